"""The sections of ``run.json`` (:class:`tracekit.manifest.run_json.Manifest`), each a typed record:
the timers, the host's load, the environment, the model's source, the profiled window, attribution,
a job's ranks, a run's processes, its twin, an eager step's capture path and a decode run's figures.
What each field means is beside it; the versions in which each appeared: :mod:`tracekit.manifest.run_json`."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType


class Record(msgspec.Struct, kw_only=True, omit_defaults=True, frozen=True):
    """A section of run.json; every field None ("not recorded") unless set. Frozen: a changed
    section is a new record (``msgspec.structs.replace``), which is what the manifest writes
    instead of the section as it was read."""

    def __bool__(self) -> bool:
        """False when nothing is recorded (every field None), as an empty JSON object."""
        return any(getattr(self, name) not in (None, UNSET) for name in self.__struct_fields__)

    @classmethod
    def of(cls, data: dict):
        """The record of a JSON object (keys it does not know are ignored).

        Raises:
            msgspec.ValidationError: a value of the wrong type (a ValueError).
        """
        return msgspec.convert(data, cls, strict=False)

    def to_dict(self) -> dict:
        """The JSON object run.json holds (fields that are None left out)."""
        return msgspec.to_builtins(self)


class Timer(Record):
    """A timer's statistics over its samples (:func:`tracekit.capture.timers.latency_stats`), ms:
    ``latency_ms`` (per call), ``wall_ms`` (per call of each synchronised block), ``host_ms``
    (the host's time to issue one call), each rank's latency and host time of a job."""

    n: int | None = None
    mean: float | None = None
    median: float | None = None
    p10: float | None = None
    p90: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    iqr: float | None = None              # wall_ms of manifests version 3-4 (blocked_autorange)
    samples: list[float] | None = None    # every timed call (latency_ms), every block (wall_ms)
    calls_per_block: int | None = None    # wall_ms: calls in each synchronised block
    calls: int | None = None              # wall_ms: calls in all its blocks
    timer: str | None = None              # cuda_events, perf_counter, tracekit.capture.timers.WALL_TIMER...
    over_ranks: str | None = None         # a job's latency_ms: how ranks were combined
    processes: int | None = None          # wall_ms of a run made in several processes


class Interleaving(Record):
    """How the two timers alternated (:func:`tracekit.capture.timers.interleaved`)."""

    rounds: int | None = None
    latency_calls: list[int] | None = None   # timed calls of each round's per-call block
    wall_calls: int | None = None            # calls of each round's wall-clock block
    schedule: str | None = None              # "sized" or "fixed" (the ranks of a job)


class LoadReading(Record):
    """The host's load at one moment (:func:`tracekit.capture.timers.host_load`)."""

    loadavg_1m: float | None = None
    loadavg_5m: float | None = None
    cpus: int | None = None


class HostLoad(Record):
    """The host's load at the start and at the end of a run."""

    start: LoadReading | None = None
    end: LoadReading | None = None


class Environment(Record):
    """Versions, device and host (:func:`tracekit.capture.environment.describe`)."""

    torch: str | None = None
    # None (null in run.json) on a CPU build or machine; UNSET: not recorded (the key absent)
    cuda_runtime: str | None | UnsetType = UNSET
    python: str | None = None
    host: str | None = None
    cpu: str | None = None
    cpu_threads: int | None = None        # torch's intra-op threads
    device_name: str | None = None        # the spec's device: the GPU, or the CPU's name
    gpu_memory_GB: float | None = None
    sm_count: int | None = None
    capability: str | None = None
    cuda_driver: str | None | UnsetType = UNSET
    libraries: dict | None = None         # the model libraries the run imported -> version (transformers, timm...)


class Source(Record):
    """Where the model comes from (:attr:`tracekit.models.Family.source`): ``kind`` (built-in,
    library, file, module, python, loop) and what applies of the rest."""

    kind: str | None = None
    module: str | None = None             # a built-in family's or a workload's module
    library: str | None = None            # transformers, timm, torchvision
    version: str | None = None
    type: str | None = None               # hf: the model type
    class_: str | None = msgspec.field(default=None, name="class")   # the model's class
    head: str | None = None               # hf: the head
    config: dict[str, Any] | None = None  # hf: the sizes the config was built with
    options: dict[str, Any] | None = None  # hf: the sizes given in the name
    name: str | None = None               # timm, torchvision: the architecture
    file: str | None = None               # a workload file, a recorded loop's file
    sha256: str | None = None             # a workload file's hash
    function: str | None = None           # a workload function
    found_in: str | None = None           # the workloads folder a bare name was found in
    line: int | None = None               # a recorded loop: the line of tracekit.record


class Profile(Record):
    """The profiled window: its iterations and the trace files it wrote."""

    iterations: int | None = None
    traces: list[str] | None = None


class Provenance(Record):
    """Inductor's call sites of each compiled graph (:class:`tracekit.capture.provenance.InductorProvenance`)."""

    graphs: list[dict[str, Any]] | None = None   # key, compile_id, calls: [[call, handle, [modules], [ops]]]
    problem: str | None = None                   # why nothing could be recorded ("" when fine)


class Attribution(Record):
    """What a run recorded for attribution (:class:`tracekit.capture.provenance.ProvenanceRecorder`)."""

    module_scopes: bool | None = None            # the profiled window has module::<path> ranges
    captures: list[dict[str, Any]] | None = None  # each captured CUDA graph's launches in order
    captures_problem: str | None = None          # why the captures are not recorded
    provenance: Provenance | None = None


class RankSummary(Record):
    """One rank of a job."""

    rank: int | None = None
    device: str | None = None
    latency_ms: Timer | None = None
    host_ms: Timer | None = None          # the rank's own time to issue one call (tracekit.capture.timers.host_times)
    peak_memory_MB: float | None = None
    compile_s: float | None = None
    parameter_checksum: float | None = None   # sum of |w| after the run (DDP: equal on every rank in step)


class Distributed(Record):
    """A job of several ranks (:mod:`tracekit.capture.launcher`, :mod:`tracekit.capture.ranks`)."""

    world_size: int | None = None
    backend: str | None = None            # the process group's: nccl or gloo
    parallel: str | None = None           # ddp, fsdp, ddp-no-overlap or fsdp-no-overlap
    launcher: str | None = None
    launcher_log: str | None = None       # the launcher's and the ranks' output, in the run folder
    ranks: list[RankSummary] | None = None


class ProcessSummary(Record):
    """One process of a run made in several (:mod:`tracekit.capture.repeats`)."""

    status: str | None = None
    reason: str | None = None
    latency_median_ms: float | None = None
    wall_median_ms: float | None = None
    host_load: HostLoad | None = None


class Repeats(Record):
    """A run made in several processes: the median process and the spread across them."""

    n: int | None = None
    median_process: int | None = None     # index of the process whose trace and fields are the run's
    processes: list[ProcessSummary] | None = None
    spread: float | None = None           # (max - min) / median of the processes' latency medians


class Twin(Record):
    """The run's twin timed in the same process, alternating with the run (:func:`tracekit.capture.twins.time_twin`)."""

    kind: str | None = None               # what the twin removes: "overlap", "balanced" ("+"-joined for both)
    names: list[str] | None = None        # what each switch makes of the run, one line each
    rounds: int | None = None             # blocks of each, alternating
    latency_ms: Timer | None = None       # the twin's calls (a job: the slowest rank of each call)
    source_latency_ms: Timer | None = None  # the run's own calls in the same rounds


class CapturePath(Record):
    """Whether the step takes another path while a CUDA graph is captured
    (:func:`tracekit.capture.capture_path.check`)."""

    differs: bool | None = None
    added: dict | None = None             # aten op -> calls more per step while "capturing"
    removed: dict | None = None           # aten op -> calls fewer
    calls_added: int | None = None        # all the calls more per step (added: the most frequent ops only)
    calls_removed: int | None = None
    error: str | None = None              # the "capturing" step raised: its one line
    trace: str | None = None              # its steps traced as if captured, beside the run's trace (file name)


class Decode(Record):
    """A decode run (phase ``decode``, :mod:`tracekit.capture.prefill`): one token of each sequence a step."""

    prompt_tokens: int | None = None      # tokens prefilled into the cache before the first step
    tokens_per_step: int | None = None    # tokens a decode step makes: one per sequence (the batch)
    cache_tokens: int | None = None       # the static KV cache's length: prompt + the counted decode steps
    kv_cache: str | None = None           # whose cache: transformers StaticCache, tracekit's (lm-*)
    kv_cache_MB: float | None = None      # keys and values of every layer (as allocated; as planned until then)
    prefill_ms: float | None = None       # the prompt's forward into the cache, timed after one untimed prefill
    prefill_first_ms: float | None = None  # the first (cold) prefill
    steps: int | None = None              # decode steps made in all (the timers' extra calls too)
    wraps: int | None = None              # times the cache was full and the position went back to the prompt's end
    ms_per_token: Timer | None = None     # latency_ms's median, p10, p90: ms per decode step
    tokens_per_s: Timer | None = None     # tokens_per_step / ms_per_token x 1000 (p10 from the latency's p90)

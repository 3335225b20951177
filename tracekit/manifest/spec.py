"""RunSpec: everything that defines one run (model, mode, sizes, iteration counts), and the
names its fields take (no torch here: the CLI's choices come from these lists)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import PurePath

DTYPES = ("fp32", "bf16", "fp16")  # tracekit.models.DTYPES maps each to its torch dtype
# What each does: tracekit.capture.phases. "decode": one token per sequence a step, over a static KV cache
# (causal LMs only: tracekit.models.check_decode).
PHASES = ("inference", "forward", "forward-backward", "train-step", "decode")

DEFAULT_WARMUP = 5       # calls after the first; covers Inductor's and CUDA-graph recording's warm-up runs
DEFAULT_ITERS = 50       # unprofiled timed iterations
DEFAULT_PROFILE_ITERS = 10  # iterations in the profiled window
# How a run of several ranks shares the model (tracekit.capture.sharding.wrap): DDP or FSDP2 overlapping
# communication with compute, or the same collectives with the compute waiting for each.
PARALLEL = ("ddp", "fsdp", "ddp-no-overlap", "fsdp-no-overlap")
# Fields added after run.json files existed: written only when not at their default, so a
# finished run's spec stays equal to the spec that would redo it (the bench's "done" test).
LATER_FIELDS = {"seq": None, "threads": None, "repeats": 1, "nproc": 1, "parallel": "ddp"}


@dataclass(frozen=True)
class RunSpec:
    """One run: a workload (model, batch, dtype, device) on one backend mode.

    batch None means the model family's default. device None means "cuda" when
    a GPU is visible, else "cpu" (resolved by :func:`resolve`). seq: the sequence
    length of models that take token inputs (``hf:gpt2``); None means the
    family's default, and models without one take none. threads: torch's
    intra-op threads (``torch.set_num_threads``; None: torch's default, recorded
    as ``environment.cpu_threads`` either way). repeats: the run is made in that
    many processes, one after the other, and reported as the median process
    with the spread across them (:mod:`tracekit.capture.repeats`).
    """

    model: str
    mode: str = "eager"
    batch: int | None = None
    dtype: str = "fp32"
    device: str | None = None
    phase: str = "inference"
    compile_only: str = ""   # surgical mode: comma-separated name patterns of submodules to compile
    warmup: int = DEFAULT_WARMUP
    iters: int = DEFAULT_ITERS
    profile_iters: int = DEFAULT_PROFILE_ITERS
    seed: int = 0
    seq: int | None = None
    threads: int | None = None
    repeats: int = 1
    nproc: int = 1           # ranks (processes) started by torch.distributed.run; 1: one process, no launcher
    parallel: str = "ddp"    # with nproc > 1: one of PARALLEL (DistributedDataParallel, FSDP2 fully_shard...)

    def to_dict(self) -> dict:
        """The spec as run.json records it; fields added later (``LATER_FIELDS``) only when
        not at their default, so the specs of runs that do not use them equal those written
        before they existed (a finished suite cell stays done)."""
        return {k: v for k, v in asdict(self).items() if k not in LATER_FIELDS or v != LATER_FIELDS[k]}

    @classmethod
    def from_dict(cls, data: dict) -> "RunSpec":
        """Build from a dict, ignoring keys RunSpec does not know (newer manifests)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def label(self, default_batch: int, default_device: str, default_seq: int | None = None) -> str:
        """The workload folder name: the model (as :func:`folder_name`), plus each setting
        that is not the default.

        ``vit16x6x384`` at its default batch 8 in fp32 is ``vit16x6x384``; at batch 1
        in bf16 it is ``vit16x6x384-b1-bf16``; ``hf:gpt2`` at sequence 512 is
        ``hf-gpt2-s512``; a training step adds ``-train-step``; a set thread count
        ``-t1`` (the number of processes is no part of it); 2 ranks under DDP ``-ddp-np2``.
        """
        parts = [folder_name(self.model)]
        if self.batch is not None and self.batch != default_batch:
            parts.append(f"b{self.batch}")
        if self.seq is not None and self.seq != default_seq:
            parts.append(f"s{self.seq}")
        if self.dtype != "fp32":
            parts.append(self.dtype)
        if self.device is not None and self.device.split(":")[0] != default_device:
            parts.append(self.device.replace(":", ""))
        if self.phase != "inference":
            parts.append(self.phase)
        if self.threads is not None:
            parts.append(f"t{self.threads}")
        if self.nproc > 1:
            parts.append(f"{self.parallel}-np{self.nproc}")
        return "-".join(parts)


def folder_name(model: str) -> str:
    """A filesystem-safe, readable folder name for a model name.

    Built-in names stay as they are (``vit16x6x384``, ``lm-2.7b-1024``). A file
    reference keeps the file's stem and the function (``path/to/net.py:build`` ->
    ``net-build``); otherwise ``key=value`` becomes ``keyvalue`` and every other
    character outside ``[A-Za-z0-9._-]`` a dash (``hf:llama?layers=16&hidden=2048`` ->
    ``hf-llama-layers16-hidden2048``, ``pkg.mod:fn`` -> ``pkg.mod-fn``).
    """
    source, sep, name = model.rpartition(":")
    if sep and source.endswith(".py"):
        model = f"{PurePath(source).stem}-{name}"
    model = re.sub(r"=", "", model)
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.") or "model"


def decode_steps(spec: RunSpec) -> int:
    """The decode steps a decode run counts, which its KV cache holds after the prompt: the first call,
    ``warmup`` more, ``iters`` timed, the profiler's warm-up step and ``profile_iters`` profiled
    (:meth:`tracekit.capture.capture_run.Capture.sequence`). The timers' other calls (each round's
    untimed call, the wall clock's blocks, the host's time per call) reuse positions: the step goes
    back to the prompt's end when the cache is full (:class:`tracekit.models.kv_cache.DecodeStep`)."""
    return 1 + spec.warmup + spec.iters + 1 + spec.profile_iters


def validate(spec: RunSpec) -> None:
    """Check the counts of ``spec`` before anything runs or is written.

    Raises:
        ValueError: a batch or sequence length below 1 (0 is not "the default":
            None is), fewer than 1 timed or profiled iteration, thread or
            process or rank, negative warm-up calls, a ``parallel`` not in
            :data:`PARALLEL`, a dtype not in :data:`DTYPES` or a phase not in :data:`PHASES`, a
            decode run of several processes (a decode step runs in one).
    """
    for name, least in (("batch", 1), ("seq", 1), ("iters", 1), ("profile_iters", 1), ("warmup", 0),
                        ("threads", 1), ("repeats", 1), ("nproc", 1)):
        value = getattr(spec, name)
        if value is not None and value < least:
            raise ValueError(f"{name} must be at least {least}, got {value}")
    if spec.parallel not in PARALLEL:
        raise ValueError(f"unknown parallel {spec.parallel!r}: with nproc > 1 give parallel one of "
                         f"{', '.join(PARALLEL)}")
    if spec.dtype not in DTYPES:
        raise ValueError(f"unknown dtype {spec.dtype!r}; valid dtypes: {', '.join(DTYPES)}")
    if spec.phase not in PHASES:
        raise ValueError(f"unknown phase {spec.phase!r}; valid phases: {', '.join(PHASES)}")
    if spec.phase == "decode" and spec.nproc > 1:
        raise ValueError(f"phase decode runs in one process, not on {spec.nproc} ranks (give nproc 1)")


def resolve(spec: RunSpec, default_batch: int, default_device: str, default_seq: int | None = None) -> RunSpec:
    """Fill batch, device and sequence-length defaults so the manifest records concrete values."""
    return replace(spec, batch=default_batch if spec.batch is None else spec.batch,
                   device=spec.device or default_device, seq=default_seq if spec.seq is None else spec.seq)

"""The run manifest, ``run.json``: what defines a run, where it ran, what it measured, how it ended.

One typed, versioned record, read and written only here (:meth:`Manifest.read`,
:meth:`Manifest.from_dict`, :meth:`Manifest.write`); the runner fills it as the
run goes, the bench writes the states it decides (timeout, time limit), and
analyses read it (no torch needed).

Versions (``manifest_version``):

* 1: written before this class existed (no ``manifest_version`` key). The
  earliest runs' ``spec`` has no ``phase`` or ``compile_only`` (read as
  "inference" and ""), and they lack ``compile_cache``, ``prepare_s``,
  ``first_call_s``, ``backend`` and ``diff_ok`` (read as None).
* 2: ``manifest_version`` written; the fields are version 1's.
* 3 (issue 17): ``host_load``, ``wall_ms``, ``timer_agreement``, ``repeats``;
  ``latency_ms`` keeps its ``samples``; the spec may have ``threads`` and
  ``repeats`` (left out where they are the defaults, None and 1).
* 4: ``source``, ``parameters``, ``build_s``, ``loss``, ``steps``, ``steps_ms`` (issue 14:
  user models and recorded loops); ``distributed`` and the spec's ``nproc`` and
  ``parallel`` (issue 15, the spec fields left out at their defaults 1 and "ddp");
  ``attribution`` (issue 20). Older files read them as None.
* 5 (issue 30): ``interleaving`` (how the two timers alternated: rounds, calls per block;
  :func:`tracekit.capture.timers.interleaved`); ``wall_ms`` is then one sample a block, with
  ``samples``, ``calls`` and no ``iqr``. Older files read ``interleaving`` as None: their two
  timers ran one after the other (``wall_ms.timer``: blocked_autorange, or timeit on ranks).
  ``host_ms``: the host's time to issue one call with the GPU idle (:func:`tracekit.capture.timers.host_times`;
  single-process runs). Since issue 37 every rank of a job times it too, each call after a barrier:
  ``distributed.ranks[i].host_ms`` is rank i's, and the job's ``host_ms`` rank 0's, like its other
  stages (a job's run.json written before has neither).
* 6 (issue 41): ``decode``, a decode run's prompt, KV cache, prefill and per-token figures (its
  ``latency_ms`` is the time of one decode step, which makes one token of each sequence). Older
  files read it as None.
* 7 (issue 38): ``twin``, the run's twin timed in the same process in alternating blocks (a
  no-overlap run's overlapped program, a straggler's balanced model:
  :mod:`tracekit.capture.twins`). Older files read it as None.
* 8 (issue 39): ``capture_path``, whether an eager run's step takes another path while a CUDA graph
  is captured (:mod:`tracekit.capture.capture_path`), and the environment's ``libraries`` (the model
  libraries' versions). Older files read them as None.

Every version is read by the same class; the JSON layout is the same in all, only fields were
added. ``spec`` is a :class:`~tracekit.manifest.spec.RunSpec`, the other sections typed records
(below, written as the same JSON objects).

Adding a field is one line in :class:`Manifest`: its name, type, a default of
None ("not recorded", as in every older file) and a comment with its unit.
Fields that a newer tracekit wrote and this one does not know are kept in
``extra`` and written back unchanged, so reading and rewriting a manifest
(the bench does, to record a status) never loses them; a section is written
back as it was read (keys of a newer version inside it too) unless it was
changed, and one that does not fit its type (a damaged file) reads as None and
is written back as it was.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_args, get_type_hints

import msgspec

from tracekit.io import write_json
from tracekit.manifest.sections import (Attribution, CapturePath, Decode, Distributed, Environment, HostLoad,
                                        Interleaving, Profile, Record, Repeats, Source, Timer, Twin)
from tracekit.manifest.spec import RunSpec

FILENAME = "run.json"
VERSION = 8


@dataclass
class Manifest:
    """One run's ``run.json``. Times in seconds (``_s``), latencies in ms, memory in MB.

    None means "not recorded" (the run stopped before that stage, or an older
    tracekit wrote the file); :meth:`to_dict` leaves such fields out.
    """

    manifest_version: int = VERSION
    tracekit: str | None = None            # the tracekit version that wrote it
    spec: RunSpec | None = None            # the resolved spec (a suite cell's as planned)
    label: str | None = None               # the workload folder name (RunSpec.label)
    model: str | None = None
    mode: str | None = None
    device_type: str | None = None         # where the run really ran: "cuda" or "cpu" (ONNX Runtime may differ)
    status: str | None = None              # running, ok, skipped, oom, failed, timeout, interrupted
    reason: str | None = None              # why a run is not ok ("" if it is)
    stage: str | None = None               # the runner's last stage (where a failure happened)
    note: str | None = None                # caveats of the run, "; "-separated
    source: Source | None = None           # where the model comes from: kind (built-in, library, file, module,
                                           # python, loop), file/module/function, library and version
    environment: Environment | None = None  # tracekit.capture.environment.describe(): versions, device and host
    started_at: str | None = None          # ISO 8601, UTC
    build_s: float | None = None           # building the model and its inputs
    parameters: int | None = None          # the model's parameter count
    compile_cache: str | None = None       # "cold" or the user's TORCHINDUCTOR_CACHE_DIR
    prepare_s: float | None = None         # the backend's preparation (trace, export, capture)
    backend: dict[str, Any] | None = None  # what the backend reports of itself (Prepared.info: its own keys)
    device_name: str | None = None         # the device that did the work, where not the spec's
    first_call_s: float | None = None      # the first call (torch.compile compiles here)
    loss: str | None = None                # backward phases: the model's own loss or the synthetic one
    compile_s: float | None = None         # prepare_s + first_call_s
    max_abs_diff: float | None = None      # first output vs eager's
    diff_tolerance: float | None = None    # the largest max_abs_diff that is ok (tracekit.capture.outputs.DIFF_RTOL)
    diff_ok: bool | None = None
    warmup_s: float | None = None
    latency_ms: Timer | None = None        # unprofiled iterations: timing.latency_stats() + "timer"
    wall_ms: Timer | None = None           # synchronised wall clock per call, per block: timing.interleaved()
    interleaving: Interleaving | None = None  # rounds, latency_calls, wall_calls, schedule: timing.interleaved()
    timer_agreement: float | None = None   # wall_ms median / latency_ms median - 1 (timing.agreement)
    host_ms: Timer | None = None           # the host's time to issue one call, GPU idle: timing.host_times()
                                           # (a job: rank 0's; each rank's in distributed.ranks)
    host_load: HostLoad | None = None      # timing.host_load() at the start and the end of the run
    repeats: Repeats | None = None         # a run made in several processes: tracekit.capture.repeats.combine()
    steps: int | None = None               # a recorded loop (tracekit.record): the steps it ran
    steps_ms: list | None = None           # a recorded loop: each timed step outside the profiled window, ms
    flop_per_iter: float | None = None     # single ops: a call's minimum work (models.cost)
    bytes_per_iter: float | None = None
    op: str | None = None                  # single ops: the op a call computes
    peak_memory_MB: float | None = None
    memory_source: str | None = None       # cuda_max_memory_allocated or process_max_rss
    profile: Profile | None = None         # the profiled window: iterations, trace file names
    distributed: Distributed | None = None  # tracekit trace --nproc: world_size, backend, parallel, per-rank latencies
    attribution: Attribution | None = None  # module scopes, Inductor provenance, CUDA-graph captures
    decode: Decode | None = None           # phase decode: prompt, KV cache, prefill, per-token figures
    twin: Twin | None = None               # the run's twin timed in the same process (tracekit.capture.twins)
    capture_path: CapturePath | None = None  # an eager run's step while "capturing" (tracekit.capture.capture_path)
    finished_at: str | None = None         # ISO 8601, UTC
    extra: dict = field(default_factory=dict)  # fields of a newer tracekit, kept as read
    # typed field -> (its value as read, its JSON as read): written back as read while unchanged
    as_read: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: dict) -> "Manifest":
        """A manifest from parsed ``run.json`` content of any version (see the module docstring)."""
        values, as_read, extra = {}, {}, {}
        for key, value in data.items():
            if key not in _FIELDS:
                extra[key] = value
            elif key in _TYPED and value is not None:
                try:
                    typed = msgspec.convert(value, _TYPED[key], strict=False)
                except (msgspec.ValidationError, TypeError):   # a damaged section: kept, read as not recorded
                    typed = None
                values[key], as_read[key] = typed, (typed, value)
            else:
                values[key] = value
        values.setdefault("manifest_version", 1)
        return cls(**values, extra=extra, as_read=as_read)

    def to_dict(self) -> dict:
        """The JSON object written as ``run.json``: recorded fields in order, then ``extra``."""
        out = {}
        for name in _FIELDS:
            value = getattr(self, name)
            read = self.as_read.get(name)
            if read is not None and value is read[0]:
                out[name] = read[1]
            elif value is not None:
                out[name] = value.to_dict() if isinstance(value, (Record, RunSpec)) else value
        return {**out, **self.extra}

    @classmethod
    def read(cls, folder: Path | str) -> "Manifest | None":
        """The manifest in ``folder`` (its run.json), or in the file ``folder`` names; None when
        missing, unreadable or not an object."""
        path = Path(folder)
        path = path / FILENAME if path.is_dir() else path
        if not path.is_file():   # missing, or a FIFO or device: never opened (it could block)
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return cls.from_dict(data) if isinstance(data, dict) else None

    def write(self, folder: Path | str, filename: str = FILENAME) -> Path:
        """Write ``folder/run.json`` (or ``folder/filename``) atomically; return its path."""
        return write_json(Path(folder) / filename, self.to_dict())

    def add_note(self, text: str) -> None:
        """Append ``text`` to :attr:`note` ("; "-separated)."""
        self.note = "; ".join(n for n in (self.note, text) if n)

    @property
    def phase(self) -> str:
        """The spec's phase ("inference" where no spec is recorded)."""
        return self.spec.phase if self.spec else "inference"

    @property
    def ran_on_name(self) -> str | None:
        """The name of the device that did the work (:attr:`device_name`, else the machine's device)."""
        return self.device_name or (self.environment.device_name if self.environment else None)

    def latency(self, stat: str) -> float:
        """One statistic of the unprofiled latency (``median``, ``p10``...) in ms; NaN if not recorded."""
        value = getattr(self.latency_ms, stat, None) if self.latency_ms else None
        return math.nan if value is None else value


_FIELDS = tuple(f.name for f in fields(Manifest) if f.name not in ("extra", "as_read"))
# The typed fields (a section record or the RunSpec, by their annotations): each converted from
# its JSON object when read (msgspec.convert).
_TYPED = {name: kind for name, hint in get_type_hints(Manifest).items() if name in _FIELDS
          for kind in get_args(hint) if isinstance(kind, type) and issubclass(kind, (Record, RunSpec))}

"""The one capture: a run's stages in their one order, and its manifest as they go.

A :class:`Capture` owns what every way of making a run shares: the manifest (its status and
stage, a failure as one status and reason, Ctrl-C, run.json written at the start and the end),
the scratch folder and torch's threads, the provenance recorder, and the sequence
(:meth:`Capture.sequence`): build -> reference output -> prepare -> first call -> warm-up ->
timing -> profiled window -> manifest (the stages' bodies: :mod:`tracekit.capture.stages`; a decode
run's prefill before the reference output and its per-token figures at the end:
:mod:`tracekit.capture.prefill`). Its
front ends supply only what differs:

* :func:`tracekit.capture.runner.run` (``tracekit trace``, :func:`tracekit.profile`, a bench
  cell): ``Capture.of(resolved, folder).run()``; for a job, ``elsewhere`` launches the ranks
  (:mod:`tracekit.capture.launcher`);
* :mod:`tracekit.capture.repeats`: each of the N processes runs ``Capture.of(...).run()``;
* :mod:`tracekit.capture.ranks`: each rank, with its rank, world size and ``wrap`` (DDP, FSDP),
  its manifest handed to the launcher (no folder of its own);
* :mod:`tracekit.capture.loop` (``tracekit.record``): no model here; the user's loop makes the
  calls, and the sequence waits for each ``rec.step()`` at a yield;
* :mod:`tracekit.counters.workload`: its measured window is NVTX-ranged iterations, its
  manifest ``workload.json``.

Every way in fills the same manifest, except the fields :data:`DIFFERENCES` lists.
"""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import torch
from msgspec.structs import replace

from tracekit import __version__, models
from tracekit.capture import prefill, stages, timers
from tracekit.capture.environment import describe, scratch, torch_threads
from tracekit.capture.profiling import worker_name
from tracekit.capture.provenance import ProvenanceRecorder
from tracekit.capture.resolved import ResolvedRun
from tracekit.errors import Interrupted
from tracekit.manifest import FILENAME, Environment, HostLoad, LoadReading, Manifest, Source
from tracekit.manifest.spec import RunSpec
from tracekit.models.workload_files import WorkloadError
from tracekit.trace.reader import trace_files

Log = Callable[[str], None]
REASON_CHARS = 2000   # a failure's message is cut to this many characters in run.json
# Each way in -> the fields of run.json (top level) in which its manifest differs from a single run's
# of the same spec (fields a single run records and it does not, or the other way round), and why.
DIFFERENCES: dict[str, dict[str, str]] = {
    "bench cell": {},
    "repeats": {"repeats": "each process's figures (tracekit.capture.repeats.combine)"},
    "job": {"distributed": "world size, backend, the launcher's log, each rank's figures (tracekit.capture.launcher)",
            "capture_path": "a rank's step runs collectives, which every rank must call alike"},
    "recorded loop": {
        **dict.fromkeys(("build_s", "parameters", "prepare_s", "backend", "loss"),
                        "the loop's model and step are the user's, built and prepared by the user's code"),
        "compile_cache": "the user's process keeps its own Inductor cache and TMPDIR",
        **dict.fromkeys(("max_abs_diff", "diff_tolerance", "diff_ok"), "no eager reference output to compare with"),
        **dict.fromkeys(("wall_ms", "interleaving", "timer_agreement"),
                        "each step is timed from one rec.step() to the next: no synchronised blocks"),
        "host_ms": "it needs a synchronize before each timed call, which the loop's steps never get",
        "attribution": "no module or backend is known to record it for",
        **dict.fromkeys(("steps", "steps_ms"), "the loop's own: the steps it ran, each timed one's time"),
        "capture_path": "its steps are the user's loop's: none to call again as if captured"},
    "counters": dict.fromkeys(("latency_ms", "wall_ms", "interleaving", "timer_agreement", "host_ms", "peak_memory_MB",
                               "memory_source", "attribution", "capture_path"),
                              "the measured window is NVTX-ranged iterations under ncu, neither timed nor traced"),
}


def stderr_log(line: str) -> None:
    """A progress line to stderr, in one write (the ranks of a job share one pipe)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def failure(exc: BaseException, where: str = "") -> tuple[str, str]:
    """(status, reason) of a run stopped by ``exc``: "skipped" for a workload that cannot run
    here (:class:`tracekit.models.Unavailable`), "oom" for an out-of-memory error
    (:func:`tracekit.capture.stages.out_of_memory`), else "failed"; the reason is
    ``"<exception type><where>: <message>"``, the message cut to :data:`REASON_CHARS`."""
    if isinstance(exc, models.Unavailable):
        status = "skipped"
    elif stages.out_of_memory(exc):
        status = "oom"
    else:
        status = "failed"
    return status, f"{type(exc).__name__}{where}: {str(exc).strip()[:REASON_CHARS]}"


def now() -> str:
    """The time now, ISO 8601 in UTC to the second (run.json's ``started_at``, ``finished_at``)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Capture:
    """One capture (see the module docstring).

    Args:
        spec, label, source: what defines the run (the resolved spec, its folder name, where the
            model comes from); ``note``: the backend's caveat here.
        out: where the manifest is written, as ``filename`` (run.json, or the counters'
            workload.json), at the start and the end; None: the caller keeps it (a rank hands
            it to the launcher).
        run: the resolved run whose model this process builds and calls; None for
            ``tracekit.record``, whose loop makes the calls (:meth:`sequence` then yields).
        trace_dir: where the profiled window's trace goes (default ``out``).
        log, where: stage lines go to ``log`` as ``[where] stage`` (default ``where``: the folder);
            None: nowhere.
        rank, world_size, wrap: a rank of a job: its trace is named ``<host>_rank<r>``, its timed
            calls follow one schedule on every rank, its host time is taken between barriers, and
            ``wrap`` (DDP, FSDP) is applied to the model before the backend prepares it.
        nvtx_range: the measured window: None, the timed iterations and the profiled window; a
            name, ``spec.profile_iters`` iterations each in an NVTX range of that name (counters).
        elsewhere: the stages run in other processes (a job's ranks): called with the capture in
            place of build and sequence, it fills the manifest.

    Raises:
        ValueError: a CUDA device and torch sees no GPU.

    Used as a context manager around the stages: an Exception ends the run with its
    :func:`failure` status (not raised on); Ctrl-C (KeyboardInterrupt, or SIGTERM as the CLI
    takes it) with status "interrupted" and the stage, raised as :class:`tracekit.errors.Interrupted`;
    either way ``finished_at``, the host's load at the end and the manifest are written.
    """

    def __init__(self, spec: RunSpec, label: str, source: dict, out: Path | None, *, note: str = "",
                 run: ResolvedRun | None = None, filename: str = FILENAME, trace_dir: Path | None = None,
                 log: Log | None = stderr_log, where: str = "", rank: int | None = None, world_size: int = 1,
                 wrap: Callable[[torch.nn.Module], torch.nn.Module] | None = None, nvtx_range: str | None = None,
                 elsewhere: Callable[["Capture"], None] | None = None):
        if spec.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError("device cuda requested but torch sees no GPU (is this the CPU build of torch?)")
        self.spec, self.resolved, self.out, self.filename = spec, run, out, filename
        self.trace_dir = trace_dir or out
        with torch_threads(spec.threads):   # the environment records the thread count the run uses
            environment = Environment.of(describe(spec.device))
        self.manifest = Manifest(tracekit=__version__, spec=spec, label=label, model=spec.model, mode=spec.mode,
                                 device_type=spec.device.split(":")[0], source=Source.of(source), status="running",
                                 reason="", stage="start", note=note, environment=environment, started_at=now(),
                                 host_load=HostLoad(start=LoadReading.of(timers.host_load())))
        self.emit: Log = log or (lambda line: None)
        self.where = where or str(out or trace_dir)
        self.rank, self.world_size, self.wrap = rank, world_size, wrap
        self.worker = worker_name(None if rank is None else f"rank{rank}")
        self.nvtx_range, self.elsewhere = nvtx_range, elsewhere
        self.recorder: ProvenanceRecorder | None = None
        self.step_clock = timers.StepClock(spec.device) if run is None else None  # the user's loop's steps
        self.profiled_steps = 0   # the profiled window's steps done

    @classmethod
    def of(cls, run: ResolvedRun, out: Path | None, **what_differs) -> "Capture":
        """The capture of ``run``, a model this process builds and calls (every front end but
        ``tracekit.record``); ``what_differs``: the keyword arguments of :class:`Capture`."""
        return cls(run.spec, run.label, run.family.source, out, note=run.backend.note(run.device_type), run=run,
                   **what_differs)

    def sequence(self, w: stages.Workload) -> Iterator[None]:
        """The stages in their one order on ``w`` (built by :meth:`run` just before, ahead of
        anything written), as a generator.

        Where this process calls the step, the stages make every call themselves and the
        generator never yields (:meth:`run` exhausts it). For ``tracekit.record`` (no step in
        ``w``), it yields once for each step the user's loop must make (resumed at each
        ``rec.step()``; closed when the loop ends): no build, reference output or prepare (the
        loop's model is the user's), its first step the first of its ``spec.warmup`` warm-up
        steps, and its steps after the profiled window timed too.
        """
        loop = self.resolved is None
        decode = not loop and self.spec.phase == "decode"
        try:
            reference = None
            if not loop:
                if decode:
                    prefill.prefill(w, self)
                reference = stages.reference_output(w, self)
                stages.prepare(w, self)
            more = self.spec.warmup - 1 if loop else self.spec.warmup
            if more >= 0:
                yield from stages.first_call(w, self, reference)
            yield from stages.warm_up(w, self, max(more, 0))
            if self.nvtx_range is not None:
                yield from stages.nvtx_window(w, self, self.nvtx_range)
                return
            yield from stages.timing(w, self)
            yield from stages.profiled_window(w, self)
            if not loop and not decode and self.spec.mode == "eager" and self.world_size == 1:
                stages.as_if_captured(w, self)
            if loop:
                yield from stages.later_steps(self)
        finally:
            if loop:
                stages.loop_timings(self)
            if decode:
                prefill.figures(w, self)

    def run(self) -> Manifest:
        """The whole capture in this process: build the model (before anything is written: a
        workload file that cannot be used raises :class:`~tracekit.models.workload_files.WorkloadError`
        where the capture writes a manifest, else is its failure), then the sequence inside the
        scratch folder, under the provenance recorder (the traced window), with ``spec.threads``.
        A run that cannot happen here is "skipped" with the reason. Returns the manifest."""
        run, spec = self.resolved, self.spec
        with torch_threads(spec.threads):
            reason = run.unavailable()
            workload, failed, t0 = None, None, time.perf_counter()
            if not reason and self.elsewhere is None:   # a job's ranks build their own
                try:
                    workload = stages.build(run)
                except Exception as exc:  # noqa: BLE001 - recorded below as the run's status
                    if isinstance(exc, WorkloadError) and self.out is not None:
                        raise
                    failed = exc
            build_s = time.perf_counter() - t0
            self.start()
            if reason:
                self.end("skipped", reason)
                self.write()
                self.log(f"unavailable: {reason}")
                return self.manifest
            with self:
                self.stage("build", f"build ({build_s:.1f} s)")
                self.manifest.build_s = build_s
                if failed is not None:
                    raise failed
                with scratch() as cache:
                    self.manifest.compile_cache = cache
                    if self.elsewhere is not None:
                        self.elsewhere(self)
                    else:
                        traced = self.nvtx_range is None
                        with ProvenanceRecorder(run.backend) if traced else nullcontext() as self.recorder:
                            for _ in self.sequence(workload):
                                pass   # never reached: the stages call the step themselves
                        if traced:
                            self.manifest.attribution = self.recorder.result()
                self.end("ok")
        return self.manifest

    @property
    def barrier(self) -> Callable[[], None] | None:
        """A barrier of the job's process group before each host-timed call of a rank
        (:func:`tracekit.capture.timers.host_times`); None for a run of one process."""
        if self.world_size == 1:
            return None
        dist = torch.distributed
        ids = [torch.cuda.current_device()] if dist.get_backend() == "nccl" else None
        return lambda: dist.barrier(device_ids=ids)

    def start(self) -> None:
        """Make the folder the manifest goes to, remove the traces of an earlier run there (where
        this capture's trace goes: not the counters' folder), write the manifest."""
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            for old in trace_files(self.out) if self.nvtx_range is None else []:
                old.unlink()
        self.write()

    def write(self) -> None:
        """Write the manifest (nothing without a folder)."""
        if self.out is not None:
            self.manifest.write(self.out, self.filename)

    def log(self, text: str) -> None:
        """A line about this run: ``[where] text``."""
        self.emit(f"[{self.where}] {text}")

    def stage(self, name: str, shown: str | None = None) -> None:
        """Enter stage ``name`` (recorded as the run's stage; logged as ``shown`` when given)."""
        self.manifest.stage = name
        self.log(shown or name)

    def end(self, status: str, reason: str = "") -> None:
        """The run ended with ``status`` ("ok": its stage becomes "done")."""
        self.manifest.status, self.manifest.reason = status, reason
        if status == "ok":
            self.manifest.stage = "done"

    def fail(self, exc: BaseException, where: str = "") -> None:
        """End the run with ``exc``'s :func:`failure` status and reason, and say so."""
        self.end(*failure(exc, where))
        self.log(f"{self.manifest.status} during {self.manifest.stage}: {self.manifest.reason[:300]}")

    def finish(self) -> None:
        """Record the end time and the host's load, write the manifest."""
        self.manifest.finished_at = now()
        self.manifest.host_load = replace(self.manifest.host_load or HostLoad(), end=LoadReading.of(timers.host_load()))
        self.write()

    def __enter__(self) -> "Capture":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if isinstance(exc, Exception):
                self.fail(exc)
            elif isinstance(exc, KeyboardInterrupt):
                self.end("interrupted", f"interrupted (Ctrl-C or SIGTERM) during {self.manifest.stage}")
        finally:
            self.finish()
        if isinstance(exc, KeyboardInterrupt):
            raise Interrupted(f"{self.where}: {self.manifest.reason}; run.json says so") from None
        return isinstance(exc, Exception)

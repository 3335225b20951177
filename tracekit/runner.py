"""Run one workload on one backend mode: warm-up, timing, profiled window, manifest.

Layout written (the one TensorBoard's profiler plugin reads: one run per folder)::

    <out>/<label>/<mode>/<worker>.<timestamp_ns>.pt.trace.json.gz
    <out>/<label>/<mode>/run.json

Failures are data: an out-of-memory, a compile error or an unavailable
backend still writes run.json, with ``status`` and ``reason``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from tracekit import __version__, attribution_record, backends, models, timing
from tracekit.environment import default_device, describe
from tracekit.errors import Interrupted
from tracekit.manifest import Manifest
from tracekit.measure import measure
from tracekit.models.workloads import WorkloadError
from tracekit.spec import RunSpec, validate
from tracekit.trace.reader import trace_files

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _classify(exc: BaseException) -> str:
    if isinstance(exc, models.Unavailable):
        return "skipped"
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower():
        return "oom"
    return "failed"


@contextmanager
def _scratch():
    """One temporary folder for the run, removed when the run ends however it ends (an error,
    Ctrl-C, SIGTERM taken as Ctrl-C by the CLI): whatever the run writes to temporary files goes
    there (``tempfile.tempdir``, and ``TMPDIR`` for the processes it starts: the ONNX export and
    ORT's profile, the ranks of a distributed run), and so does Inductor's cache
    (``TORCHINDUCTOR_CACHE_DIR``), so ``compile_s`` is a cold compile, unless the user set
    TORCHINDUCTOR_CACHE_DIR (then theirs is used).

    Yields "cold" or the user's cache folder, recorded in the manifest.
    Inductor reads TORCHINDUCTOR_CACHE_DIR at each use and keeps Triton's cache
    under it (torch/_inductor/runtime/cache_dir_utils.py).
    """
    saved = {name: os.environ.get(name) for name in ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR")}
    before = tempfile.tempdir
    with tempfile.TemporaryDirectory(prefix="tracekit-run-", ignore_cleanup_errors=True) as tmp:
        tempfile.tempdir = os.environ["TMPDIR"] = tmp
        cache = saved["TORCHINDUCTOR_CACHE_DIR"]
        if cache is None:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
        try:
            yield cache or "cold"
        finally:
            tempfile.tempdir = before
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def run_dir(spec: RunSpec, out: Path, device: str | None = None) -> Path:
    """The folder a run of ``spec`` writes to: ``out/<label>/<mode>``.

    ``device``: the default device of the machine the run is (or was) made on
    ("cuda" or "cpu"; this machine's when None): the label names a device only
    where the spec's differs from it.
    """
    family = models.lookup(spec.model)[0]
    label = spec.label(family.default_batch, device or default_device(), family.default_seq)
    return Path(out) / label / spec.mode


def new_manifest(spec: RunSpec, label: str, device_type: str, source: dict, note: str = "") -> Manifest:
    """The manifest a run starts with (status "running"): what defines it (the resolved
    spec, the model's source), where it runs, the environment and the start time.
    Every way of making a run (``run``, :mod:`tracekit.api`, :mod:`tracekit.recorder`) starts here."""
    return Manifest(
        tracekit=__version__, spec=spec.to_dict(), label=label, model=spec.model, mode=spec.mode,
        device_type=device_type, source=source, status="running", reason="", stage="start", note=note,
        environment=describe(spec.device), started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def run(spec: RunSpec, out: Path | str = "traces", log: Log = _stderr) -> Manifest:
    """Run ``spec``, write its trace and run.json under ``out``; return the :class:`~tracekit.manifest.Manifest`.

    Stages: build the model (before anything is written) and the eager reference
    output; prepare the backend; first call (``compile_s``: compilation happens
    here for compiled modes); ``warmup`` more calls; ``iters`` timed calls
    (``latency_ms``) interleaved with blocks of the synchronised wall clock per call
    (``wall_ms``, ``interleaving``, ``timer_agreement``: :mod:`tracekit.timing`); output ``max_abs_diff``
    against eager; then ``profile_iters`` iterations under torch.profiler, one
    ``ProfilerStep#N`` marker each, after one profiler warm-up step.
    ``host_load`` is read at the start and the end; ``spec.threads`` sets
    torch's thread count first (``environment.cpu_threads`` records the count
    used). A spec with ``repeats`` > 1 is run in that many processes
    (:func:`tracekit.repeats.run`).

    Raises:
        models.UnknownModel, backends.UnknownMode: invalid names (nothing written).
        tracekit.models.workloads.WorkloadError: a workload file that cannot be
            imported, has no such function, or whose function raises or returns
            something else than (nn.Module, tuple of tensors) (nothing written).
        ValueError: invalid dtype, phase, device, batch, seq, iteration, thread or
            process counts (:func:`tracekit.spec.validate`; nothing written).
    With ``spec.nproc > 1`` the ranks build the model (:mod:`tracekit.distributed`): a
    workload function that raises there fails the run (run.json says why).
    A mode or workload that cannot run here (not installed, needs CUDA, phase not
    supported, ``models.Unavailable``) is recorded as status "skipped" with the
    reason; any other failure as "oom" or "failed"; either way run.json is
    written and returned. Ctrl-C (KeyboardInterrupt) once the run folder exists
    is recorded as status "interrupted" with the stage it stopped in, and raised
    as :class:`tracekit.errors.Interrupted` (a KeyboardInterrupt); the run's
    temporary files are removed either way.
    """
    validate(spec)
    if spec.repeats > 1:
        from tracekit import repeats
        return repeats.run(spec, out, log)
    backend = backends.get(spec.mode)
    device_default = default_device()
    family, filled = models.resolved(spec, device_default)
    models.check_seq(family, spec.model, spec.seq)
    directory = run_dir(spec, Path(out))
    spec = filled
    device_type = spec.device.split(":")[0]
    if device_type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda requested but torch sees no GPU (is this the CPU build of torch?)")

    load, threads_before = timing.host_load(), torch.get_num_threads()
    if spec.threads is not None:
        torch.set_num_threads(spec.threads)
    reason = backends.why_not(backend, spec) or family.missing
    workload, failure, t0 = None, None, time.perf_counter()
    # Built before the folder exists (and before any output): a bad workload file writes nothing.
    # The ranks of a distributed run build their own (lookup above checked a workload file's import).
    if not reason and spec.nproc == 1:
        try:
            workload = models.build(spec.model, spec.batch, spec.dtype, backend.device(spec), spec.seed, spec.seq,
                                    spec.phase)
        except WorkloadError:
            torch.set_num_threads(threads_before)
            raise
        except Exception as exc:  # noqa: BLE001 - recorded below as the run's status
            failure = exc
    build_s = time.perf_counter() - t0

    directory.mkdir(parents=True, exist_ok=True)
    for old in trace_files(directory):
        old.unlink()
    manifest = new_manifest(spec, directory.parent.name, device_type, family.source, backend.note(device_type))
    manifest.host_load = {"start": load}
    manifest.write(directory)

    def stage(name: str) -> None:
        manifest.stage = name
        log(f"[{directory}] {name}")

    if reason:
        manifest.status, manifest.reason = "skipped", reason
        manifest.write(directory)
        torch.set_num_threads(threads_before)
        log(f"[{directory}] unavailable: {reason}")
        return manifest
    try:
        stage(f"build ({build_s:.1f} s)")
        manifest.stage, manifest.build_s = "build", build_s
        if failure is not None:
            raise failure
        with _scratch() as cache:
            manifest.compile_cache = cache
            if spec.nproc > 1:  # the ranks build and measure, each in its process; this one launches and gathers
                from tracekit import distributed

                distributed.launch(spec, directory, manifest, stage, log)
            else:
                with attribution_record.Recorder(backend) as recorder:
                    measure(spec, backend, directory, manifest, stage, recorder, *workload)
                manifest.attribution = recorder.result()
        manifest.status, manifest.stage = "ok", "done"
    except Exception as exc:  # noqa: BLE001 - every failure becomes a status row
        manifest.status = _classify(exc)
        manifest.reason = f"{type(exc).__name__}: {str(exc).strip()[:2000]}"
        log(f"[{directory}] {manifest.status} during {manifest.stage}: {manifest.reason[:300]}")
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM as the CLI takes it: said in run.json, then passed on
        manifest.status, manifest.reason = "interrupted", f"interrupted (Ctrl-C or SIGTERM) during {manifest.stage}"
        raise Interrupted(f"{directory}: {manifest.reason}; run.json says so") from None
    finally:
        manifest.finished_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        manifest.host_load["end"] = timing.host_load()
        manifest.write(directory)
        torch.set_num_threads(threads_before)
    return manifest

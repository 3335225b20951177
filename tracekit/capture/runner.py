"""The front door of a run: ``tracekit trace``, :func:`tracekit.profile`, a bench cell. The spec is
validated and resolved once (:mod:`tracekit.capture.resolved`), then made where it must be: in N
processes (``repeats``, :mod:`tracekit.capture.repeats`), on N ranks (``nproc``, the one
:class:`~tracekit.capture.capture_run.Capture` whose :mod:`~tracekit.capture.launcher` starts
:mod:`tracekit.capture.ranks`), or here (the one capture,
:meth:`~tracekit.capture.capture_run.Capture.run`).

Layout written (the one TensorBoard's profiler plugin reads: one run per folder)::

    <out>/<label>/<mode>/<worker>.<timestamp_ns>.pt.trace.json.gz
    <out>/<label>/<mode>/run.json

Failures are data: an out-of-memory, a compile error or an unavailable
backend still writes run.json, with ``status`` and ``reason``.
"""

from __future__ import annotations

from pathlib import Path

from tracekit.capture import launcher, repeats
from tracekit.capture.capture_run import Capture, Log, stderr_log
from tracekit.capture.resolved import resolve
from tracekit.manifest import Manifest
from tracekit.manifest.spec import RunSpec, validate


def run(spec: RunSpec, out: Path | str = "traces", log: Log = stderr_log) -> Manifest:
    """Run ``spec``, write its trace and run.json under ``out``; return the :class:`~tracekit.manifest.Manifest`.

    Stages: build the model (before anything is written) and the eager reference
    output; prepare the backend; first call (``compile_s``: compilation happens
    here for compiled modes); ``warmup`` more calls; ``iters`` timed calls
    (``latency_ms``) interleaved with blocks of the synchronised wall clock per call
    (``wall_ms``, ``interleaving``, ``timer_agreement``: :mod:`tracekit.capture.timers`), then
    the host's own time per call (``host_ms``); output ``max_abs_diff`` against eager; then
    ``profile_iters`` iterations under torch.profiler, one ``ProfilerStep#N`` marker each,
    after one profiler warm-up step (:class:`tracekit.capture.capture_run.Capture`).
    ``host_load`` is read at the start and the end; ``spec.threads`` sets
    torch's thread count first (``environment.cpu_threads`` records the count
    used). A spec with ``repeats`` > 1 is run in that many processes
    (:func:`tracekit.capture.repeats.run`).

    Raises:
        models.UnknownModel, backends.UnknownMode: invalid names (nothing written).
        tracekit.models.workload_files.WorkloadError: a workload file that cannot be
            imported, has no such function, or whose function raises or returns
            something else than (nn.Module, tuple of tensors) (nothing written).
        ValueError: invalid dtype, phase, device, batch, seq, iteration, thread or
            process counts (:func:`tracekit.manifest.spec.validate`), or a CUDA device where
            torch sees no GPU (nothing written).
    With ``spec.nproc > 1`` the ranks build the model (:mod:`tracekit.capture.ranks`): a
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
    resolved = resolve(spec)
    if spec.repeats > 1:
        return repeats.run(resolved, out, log)
    return Capture.of(resolved, resolved.directory(out), log=log,
                      elsewhere=launcher.launch if spec.nproc > 1 else None).run()

"""Hardware counters through Nsight Compute, captured (the counters' counterpart of
:mod:`tracekit.capture.runner`): per-kernel DRAM traffic, achieved GB/s and FLOP/s.

* :mod:`~tracekit.counters.ncu` runs a workload under ``ncu`` (needs a GPU and ncu).
* :mod:`~tracekit.counters.workload` is what the process ncu runs does (imports torch).

Their analysis is :mod:`tracekit.analysis.counters` (no torch, no GPU), their
report :mod:`tracekit.report.formats.counters`. :func:`run` is the library call
behind ``tracekit counters``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tracekit.analysis.counters import CountersResult, analyze
from tracekit.counters.ncu import ProfilerError
from tracekit.manifest import Manifest

__all__ = ["ProfilerError", "run"]


def run(spec, out: Path | str, traces: Path | str | None = "traces", kernels: int = 100, iters: int = 2,
        log=print) -> tuple[CountersResult, Path]:
    """Profile ``spec``'s workload under ncu and analyze the counters.

    Writes ncu.csv, ncu.out and workload.json (the workload's manifest) under
    ``out/<label>/<mode>/`` and joins the counters to the run's newest trace under
    ``traces/<label>/<mode>/`` when there is one (from ``tracekit trace``).

    Args:
        spec: a :class:`tracekit.manifest.spec.RunSpec`; the process ncu profiles runs it whole
            (:class:`tracekit.capture.child.ChildJob`).
        kernels: at most this many kernels are profiled (``--launch-count``).
        iters: measured iterations the workload runs inside the NVTX range (its
            ``profile_iters``).

    Returns:
        (the analysis, the folder written to).

    Raises:
        ProfilerError: ncu is missing or failed.
        models.UnknownModel, backends.UnknownMode, ValueError: an invalid spec.
    """
    from tracekit import backends
    from tracekit.capture.child import ChildJob
    from tracekit.capture.resolved import resolve
    from tracekit.counters import ncu
    from tracekit.manifest.spec import validate
    from tracekit.trace.reader import is_trace_file

    validate(spec)
    backends.get(spec.mode)   # an unknown mode raises here, before ncu starts
    resolved = resolve(spec)
    directory = resolved.directory(out)
    job = ChildJob("counters", replace(resolved.spec, profile_iters=iters), str(directory))
    csv = ncu.profile(job.command(), directory, kernels, log)
    trace = None
    if traces is not None and (folder := resolved.directory(traces)).is_dir():
        found = sorted((p for p in folder.iterdir() if is_trace_file(p)), key=lambda p: p.stat().st_mtime)
        trace = found[-1] if found else None
    workload = Manifest.read(directory / ncu.WORKLOAD_FILE)
    device = workload.environment.device_name if workload and workload.environment else None
    result = analyze(csv, trace, device)
    if trace is None:
        result.no_trace_under = str(traces)   # the report says so
    return result, directory

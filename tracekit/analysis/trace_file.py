"""One trace file analyzed on its own, as :mod:`tracekit.analysis.runs` has each file analyzed
(here, in a worker process or on a Dask cluster): its figures and tables, or its error, never
the other files' (issue 31). Picklable both ways; pandas and the analyses are imported when a
file is analyzed, after the reader's workers have started decoding it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracekit.analysis.options import TraceJob
from tracekit.errors import ExitCode
from tracekit.trace import NotATrace, TraceError, load

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class FileResult:
    """What one trace file gave: metrics and iterations, or the error (picklable)."""

    metrics: dict | None = None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    device_name: str | None = None
    device_type: str | None = None          # cuda, mtia, xpu or cpu, from the trace itself
    problems: list[str] = field(default_factory=list)
    error: tuple[str, int] | None = None    # (problem, exit code)
    not_a_trace: bool = False
    rank: int | None = None                 # distributedInfo.rank, else from the file name
    distributed: dict = field(default_factory=dict)   # Kineto's distributedInfo
    failures: list[dict] = field(default_factory=list)  # analyses that raised (trace_analysis.Sections)


def analyze_file(job: TraceJob, workers: int | None = None) -> FileResult:
    """One file's result: :func:`tracekit.analysis.trace_analysis.analyze_trace` of ``job.path``
    with the job's options and run facts, read by ``workers`` processes (None: as many as its size
    calls for, :func:`tracekit.trace.load`). Whatever goes wrong is its error, never the other
    files' (issue 31)."""
    path = job.path
    try:
        tables = load(path, workers=workers)
    except TraceError as exc:
        return FileResult(error=(exc.problem, int(exc.code)), not_a_trace=isinstance(exc, NotATrace))
    except Exception as exc:  # noqa: BLE001 - a bug in the reader loses this file only
        return internal_error(exc)
    try:
        from tracekit.analysis.distributed.job import rank_of
        from tracekit.analysis.metrics import integrity
        from tracekit.analysis.trace_analysis import analyze_trace

        result = analyze_trace(tables, job.options, job.run)
        return FileResult(metrics=result.row, tables=result.tables, device_type=integrity.device_type(tables),
                          device_name=tables.devices["name"].iloc[0] if len(tables.devices) else None,
                          problems=tables.meta.get("problems", []), rank=rank_of(tables.meta, path),
                          distributed=tables.meta.get("distributed") or {}, failures=result.failures)
    except Exception as exc:  # noqa: BLE001 - a bug in the analyses loses this file only
        return internal_error(exc)


def internal_error(exc: BaseException, analysis: str = "trace") -> FileResult:
    """A file's result when tracekit itself failed on it: the error (exit code INTERNAL) and its traceback."""
    import traceback

    reason = f"{type(exc).__name__}: {exc}"
    return FileResult(error=(f"internal error: {reason}", int(ExitCode.INTERNAL)), failures=[
        {"analysis": analysis, "reason": reason,
         "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))}])


def outcome(future) -> FileResult:
    """A worker process's result, or the file's error where the process died (killed, out of memory)."""
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - BrokenProcessPool and the like: this file, not the others
        return internal_error(exc)

"""A prediction from one run: calibrate its trace's graph, apply edits, re-time (issue 30)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracekit.analysis.critical_path import CriticalPath, _retimed, prepare
from tracekit.analysis.critical_path.calibrate import Calibration, calibrate
from tracekit.analysis.critical_path.edits import Edit, Replay, apply, gpu_names
from tracekit.manifest import Attribution
from tracekit.trace.reader import EventTables


@dataclass
class WhatIf:
    """calibration (:class:`Calibration`); before, after: the calibrated critical path without
    and with the edits; edits: their text; predicted_ms, modelled_ms: the steady-state
    iteration after and before the edits (ms); notes: what limits the prediction."""

    calibration: Calibration
    before: CriticalPath
    after: CriticalPath
    edits: list[str]
    predicted_ms: float
    modelled_ms: float
    notes: list[str] = field(default_factory=list)

    def split_per_iteration(self, which: str = "before") -> dict:
        """Mean µs per iteration of each part of the critical path (``before`` or ``after``)."""
        split = getattr(self, which).split
        cols = [c for c in split.columns if c.endswith("_us")]
        rows = split.iloc[1:] if len(split) >= 3 else split
        return {c: float(rows[c].mean()) for c in cols} if len(rows) else {}


def predict(ranks: list[tuple[int, EventTables]] | EventTables, edits: list[Edit], measured_ms: float | None = None,
            attribution: Attribution | None = None, annotation: str | None = None,
            replay: Replay | None = None, host_ms: float | None = None) -> WhatIf:
    """The iteration latency a trace's run would have after ``edits``.

    Args:
        ranks: a trace's tables, or (rank, tables) per trace of a job.
        edits: the edits (:mod:`tracekit.analysis.critical_path.edits`), applied in order.
        measured_ms: the run's unprofiled median latency (run.json), to calibrate to; None:
            the graph is used as traced and the result says it is uncalibrated.
        attribution: run.json's ``attribution`` record (module names for ``faster`` patterns).
        annotation: what marks an iteration (default ``ProfilerStep#N``).
        replay: the CUDA graph replay's costs for the ``cuda-graphs`` edit.
        host_ms: the run's unprofiled host time per call (run.json ``host_ms`` median), for
            the calibration of a GPU-bound run.

    Raises:
        ValueError: the traces hold no GPU op or no host call.
        tracekit.analysis.critical_path.edits.EditError: an edit that matches nothing.
    """
    if isinstance(ranks, EventTables):
        ranks = [(0, ranks)]
    g, step, markers, problems = prepare(ranks, annotation)
    cal = calibrate(g, step, markers, measured_ms, host_ms)
    names = None
    if any(e.kind == "faster" for e in edits):
        from tracekit.analysis.attribution.gpu_ops import attribute

        names = gpu_names(g, {rank: attribute(t, attribution) for rank, t in ranks})
    edited = apply(g, step, edits, cal.host_scale, cal.gpu_scale, replay, names)
    before = _retimed(g, step, markers, cal.host_scale, cal.gpu_scale, problems)
    after = _retimed(g, step, markers, cal.host_scale, cal.gpu_scale, problems, edited)
    notes = [cal.note] if cal.note else []
    balanced = "median" if any(e.kind == "balance-ranks" for e in edits) else "max"
    return WhatIf(cal, before, after, [str(e) for e in edits], after.latency_us(balanced) / 1e3,
                  before.latency_us() / 1e3, notes)


def from_run(ranks, manifest, edits: list[Edit], annotation: str | None = None) -> WhatIf:
    """:func:`predict` for a run folder's traces with what its manifest (or None) knows: the
    unprofiled latency and host time, the attribution record, the device's replay costs."""
    from tracekit.analysis.critical_path.edits import default_replay

    known = manifest is not None
    host = manifest.host_ms.median if known and manifest.host_ms else None
    return predict(ranks, edits, manifest.latency("median") if known else None,
                   manifest.attribution if known else None, annotation, default_replay(ranks, manifest), host)


def run_inputs(path) -> tuple[list[tuple[int, EventTables]], "object | None"]:
    """The traces of a run folder (one per rank) or a trace file, and the run's manifest (the
    folder's or the file's folder's ``run.json``; None without one).

    Raises:
        tracekit.trace.TraceError: the path does not exist, holds no trace, or a trace
            cannot be read (its ``code`` is the exit code).
    """
    from pathlib import Path

    from tracekit.analysis.distributed import job
    from tracekit.errors import ExitCode
    from tracekit.manifest import Manifest
    from tracekit.trace import TraceError, load
    from tracekit.trace.reader import trace_files

    path = Path(path)
    if not path.exists():
        raise TraceError(path, "no such file or folder", ExitCode.NOT_FOUND)
    files = [path] if path.is_file() else trace_files(path)
    if not files:
        raise TraceError(path, "no trace files (*.pt.trace.json[.gz]) in this folder", ExitCode.NO_TRACES)
    ranks = []
    for i, f in enumerate(files):
        tables = load(f)
        rank = job.rank_of(tables.meta, f)
        ranks.append((i if rank is None else rank, tables))
    return sorted(ranks, key=lambda rt: rt[0]), Manifest.read(path.parent if path.is_file() else path)

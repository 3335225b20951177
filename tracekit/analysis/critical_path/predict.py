"""A prediction from one run: calibrate its trace's graph, apply edits, re-time (issue 30).

:func:`predict` re-times traces' tables (:class:`WhatIf`: the graphs before and after);
:func:`predict_run` does it for a run folder or a trace file and returns the record that
``tracekit whatif`` and :func:`tracekit.whatif` give (:class:`Prediction`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from tracekit.analysis.critical_path import CriticalPath, _retimed, can_analyze, cannot_retime_launches, prepare
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


def _known(value: float | None, digits: int | None = None) -> float | None:
    """``value`` (rounded to ``digits``), None where it is unknown (None, NaN or infinite)."""
    if value is None or not math.isfinite(value):
        return None
    return value if digits is None else round(value, digits)


def _per_iteration(split: pd.DataFrame) -> dict:
    """The mean µs of latency_us and each ``<part>_us`` over the rows of a critical path's split, the
    first row left out where there are three or more (it starts on an idle GPU, as in
    :func:`tracekit.analysis.critical_path.steady_latency_us`), each rounded to 0.01 µs."""
    rows = split.iloc[1:] if len(split) >= 3 else split
    return {c: round(float(rows[c].mean()), 2) for c in split.columns if c.endswith("_us")} if len(rows) else {}


@dataclass(repr=False)
class Prediction:
    """A run's iteration latency after edits, predicted from its trace (:func:`predict_run`).

    path:                 the run folder or trace file, as given.
    edits:                the edits as text ("cuda-graphs", "faster blocks.*.mlp=2", "host-faster 2"...).
    predicted_latency_ms: the modelled steady-state iteration after the edits (ms).
    measured_latency_ms:  the run's unprofiled median latency (run.json, ms) the model is calibrated
                          to; None without one.
    modelled_latency_ms:  the calibrated model's iteration before the edits (ms).
    calibrated:           whether the model was fitted to measured_latency_ms (else: the trace as
                          profiled, an upper bound on host time).
    host_scale, gpu_scale: the calibration's factors on host time and GPU op time
                          (:mod:`tracekit.analysis.critical_path.calibrate`).
    critical_path_before, critical_path_after: one row per iteration (and rank: ``rank``, ``step``)
                          of the critical path without and with the edits: its ``latency_us`` and
                          the µs of each part on it (``<part>_us``,
                          :data:`~tracekit.analysis.critical_path.path.PARTS`).
    notes:                what limits the prediction (the calibration's note, problems of the trace).
    missing:              what the trace lacks for a complete graph.
    cannot_predict:       why there is no prediction (no GPU op, no launch call, or a single launch for
                          ``cuda-graphs`` and ``host-faster``); "" where there is one. Without one the
                          figures are None and the tables empty.

    Values are as computed; :meth:`to_dict` rounds them.
    """

    path: str
    edits: list[str]
    predicted_latency_ms: float | None = None
    measured_latency_ms: float | None = None
    modelled_latency_ms: float | None = None
    calibrated: bool = False
    host_scale: float | None = None
    gpu_scale: float | None = None
    critical_path_before: pd.DataFrame = field(default_factory=pd.DataFrame)
    critical_path_after: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    cannot_predict: str = ""

    @classmethod
    def of(cls, result: WhatIf, path) -> "Prediction":
        """The record of :func:`predict`'s result for the run at ``path``."""
        cal = result.calibration
        return cls(str(path), result.edits, _known(result.predicted_ms), _known(cal.measured_ms),
                   _known(result.modelled_ms), cal.calibrated, cal.host_scale, cal.gpu_scale,
                   result.before.split, result.after.split, result.notes + result.before.problems,
                   result.before.missing)

    def to_dict(self) -> dict:
        """The JSON object of ``tracekit whatif --json``: path, edits, predicted_latency_ms,
        measured_latency_ms, modelled_latency_ms (ms to 4 decimals, None where unknown), calibrated,
        host_scale, gpu_scale (4 decimals), critical_path_before and critical_path_after (µs per
        iteration of latency_us and each ``<part>_us``: the mean over the iterations, the first left
        out where there are three or more; 2 decimals), notes, missing. Where there is no
        prediction: path, predicted_latency_ms (None) and cannot_predict."""
        if self.cannot_predict:
            return {"path": self.path, "predicted_latency_ms": None, "cannot_predict": self.cannot_predict}
        return {"path": self.path, "edits": self.edits, "predicted_latency_ms": _known(self.predicted_latency_ms, 4),
                "measured_latency_ms": _known(self.measured_latency_ms, 4),
                "modelled_latency_ms": _known(self.modelled_latency_ms, 4), "calibrated": self.calibrated,
                "host_scale": round(self.host_scale, 4), "gpu_scale": round(self.gpu_scale, 4),
                "critical_path_before": _per_iteration(self.critical_path_before),
                "critical_path_after": _per_iteration(self.critical_path_after),
                "notes": self.notes, "missing": self.missing}


def predict_run(path, edits: list[Edit], annotation: str | None = None) -> Prediction:
    """The iteration latency of the run at ``path`` after ``edits`` (``tracekit whatif``): its
    traces' dependency graph calibrated to its run.json (:func:`from_run`), edited, re-timed.

    Args:
        path: a run folder (its trace, or one per rank of a job, beside run.json) or a trace file
            (calibrated to the run.json of its folder, where there is one).
        edits: the edits, applied in order (:func:`tracekit.analysis.critical_path.edits.edits_of`).
        annotation: the CPU op or annotation that marks an iteration (default ``ProfilerStep#N``).

    Returns:
        A :class:`Prediction`; where the traces hold no GPU op or no launch call, or (for
        ``cuda-graphs`` and ``host-faster``) fewer than two launches
        (:func:`tracekit.analysis.critical_path.cannot_retime_launches`), one whose
        ``cannot_predict`` says so.

    Raises:
        tracekit.trace.TraceError: ``path`` does not exist (``code`` 3), holds no trace (4), or a
            trace cannot be read (its code).
        tracekit.analysis.critical_path.edits.EditError: a ``faster`` pattern that matches no GPU op
            (the message names it).
        tracekit.analysis.critical_path.AnnotationError: ``annotation`` is not in the traces.
    """
    ranks, manifest = run_inputs(path)
    retimes_launches = any(e.kind in ("cuda-graphs", "host-faster") for e in edits)
    why = can_analyze(ranks) or (cannot_retime_launches(ranks) if retimes_launches else None)
    if why:
        return Prediction(str(path), [str(e) for e in edits], cannot_predict=why)
    return Prediction.of(from_run(ranks, manifest, edits, annotation), path)

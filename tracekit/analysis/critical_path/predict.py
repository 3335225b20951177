"""A prediction from one run: calibrate its trace's graph, apply edits, re-time (issue 30); a
job's graph of all its ranks, calibrated per rank (issue 38).

:func:`predict` re-times traces' tables (:class:`WhatIf`: the graphs before and after);
:func:`predict_run` does it for a run folder or a trace file and returns the record that
``tracekit whatif`` and :func:`tracekit.whatif` give
(:class:`~tracekit.analysis.critical_path.prediction.Prediction`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import pandas as pd

from tracekit.analysis.critical_path import (
    CriticalPath,
    _retimed,
    can_analyze,
    cannot_retime_launches,
    prepare,
    steady_latencies_us,
    steady_latency_us,
)
from tracekit.analysis.critical_path import reasons as why
from tracekit.analysis.critical_path.calibrate import Calibration, calibrate, calibrate_job
from tracekit.analysis.critical_path.capture_kernels import with_capture_kernels
from tracekit.analysis.critical_path.capture_risk import capture_risks
from tracekit.analysis.critical_path.edits import Edit, apply, gpu_names
from tracekit.analysis.critical_path.host_estimate import estimate
from tracekit.analysis.critical_path.path import outermost, periods
from tracekit.analysis.critical_path.prediction import Prediction, known
from tracekit.analysis.critical_path.replay_costs import Replay
from tracekit.analysis.critical_path.retime import retime, visit_order
from tracekit.analysis.critical_path.uncertainty import Interval, Spread, host_variants, interval
from tracekit.analysis.critical_path.run_inputs import run_inputs
from tracekit.manifest import Attribution
from tracekit.trace.reader import EventTables

# Edits that only take work or constraints away: the job is no slower after them.
REMOVALS = frozenset({"overlap-comm", "balance-ranks"})


@dataclass
class WhatIf:
    """calibration (:class:`Calibration`); before, after: the calibrated critical path without
    and with the edits; edits: their text; predicted_ms, modelled_ms: the steady-state
    iteration after and before the edits (ms; a job's: its slowest rank's); notes: what limits
    the prediction (reasons: :mod:`~tracekit.analysis.critical_path.reasons`); balanced: the work
    ``balance-ranks`` took from each rank
    (:func:`tracekit.analysis.critical_path.balance.balance`; None without that edit); interval:
    the prediction's interval (:mod:`~tracekit.analysis.critical_path.uncertainty`; None where not
    asked for); replay: the replay costs ``cuda-graphs`` used (None without that edit); confidence:
    ``low`` where the eager trace says a capture may run other kernels (the notes say why:
    :mod:`~tracekit.analysis.critical_path.capture_risk`), else ``normal``."""

    calibration: Calibration
    before: CriticalPath
    after: CriticalPath
    edits: list[str]
    predicted_ms: float
    modelled_ms: float
    notes: list[dict] = field(default_factory=list)
    balanced: pd.DataFrame | None = None
    interval: Interval | None = None
    replay: Replay | None = None
    confidence: str = "normal"


def predict(ranks: list[tuple[int, EventTables]] | EventTables, edits: list[Edit], measured_ms: float | None = None,
            attribution: Attribution | None = None, annotation: str | None = None,
            replay: Replay | None = None, host_ms: float | Mapping[int, float | None] | None = None,
            spread: Spread | None = None, transformers: bool = False, capture_path: dict | None = None) -> WhatIf:
    """The iteration latency a trace's run (or a job's) would have after ``edits``.

    Args:
        ranks: a trace's tables, or (rank, tables) per trace of a job.
        edits: the edits (:mod:`tracekit.analysis.critical_path.edits`), applied in order.
        measured_ms: the run's unprofiled median latency (run.json; a job's: the slowest rank of each
            timed iteration), to calibrate to; None: the graph is used as traced and the result
            says it is uncalibrated.
        attribution: run.json's ``attribution`` record (module names for ``faster`` patterns).
        annotation: what marks an iteration (default ``ProfilerStep#N``).
        replay: the CUDA graph replay's costs for the ``cuda-graphs`` edit.
        host_ms: the unprofiled host time per call (ms, run.json ``host_ms`` median), for the
            calibration of a GPU-bound run (None: estimated from the trace,
            :mod:`~tracekit.analysis.critical_path.host_estimate`); a job's: rank -> its own
            (``distributed.ranks[i].host_ms``), each rank calibrated with it
            (:func:`tracekit.analysis.critical_path.calibrate.calibrate_job`).
        spread: the ranges of the measurements, for the prediction's interval
            (:mod:`~tracekit.analysis.critical_path.uncertainty`); None: no interval.
        transformers: the model is a Hugging Face transformers one (its capture builds an attention
            mask: :func:`~tracekit.analysis.critical_path.capture_risk.capture_risks`).
        capture_path: the run's check of its step's capture path (run.json ``capture_path``:
            differs, added, removed, error), which replaces ``transformers``'s rule; None: not checked.

    Returns:
        A :class:`WhatIf`. After ``overlap-comm`` and ``balance-ranks`` alone, which only take
        constraints and work away, the prediction is no longer than the model before them (where
        the re-timed iterations' bounds make it longer, the model before is kept and a note says so).

    Raises:
        tracekit.analysis.critical_path.CannotAnalyze: the traces hold no GPU op or no host call.
        tracekit.analysis.critical_path.edits.EditError: an edit that matches nothing.
    """
    if isinstance(ranks, EventTables):
        ranks = [(0, ranks)]
    g, step, markers, problems = prepare(ranks, annotation)
    if len(ranks) > 1:
        nominal = {"host_ms": host_ms if isinstance(host_ms, Mapping) else {}}
    else:
        rank, tables = ranks[0]
        own = host_ms.get(rank) if isinstance(host_ms, Mapping) else host_ms
        guess = estimate(tables, markers[rank]) if own is None or not math.isfinite(own) else None
        nominal = {"host_ms": own, "estimate": guess}

    def calibrated(measured: float | None, host: dict) -> Calibration:
        if len(ranks) == 1:
            return calibrate(g, step, markers, measured, host["host_ms"], host["estimate"])
        cal = calibrate_job(g, step, markers, measured, host["host_ms"])
        cal.host_source = "traced" if not math.isfinite(cal.measured_ms) else \
            "fitted" if (cal.note or {}).get("lacking") else "measured"   # each rank's own host_ms
        return cal

    cal = calibrated(measured_ms, nominal)
    names = None
    if any(e.kind == "faster" for e in edits):
        from tracekit.analysis.attribution.gpu_ops import attribute

        names = gpu_names(g, {rank: attribute(t, attribution) for rank, t in ranks})
    # an edit's iteration (a replay's, a rank's share) is the outermost instance, nested ones in it
    top = outermost(step, g, markers)
    edited = apply(g, top, edits, cal.host_scale, cal.gpu_scale, replay, names)
    before = _retimed(g, step, markers, cal.host_scale, cal.gpu_scale, problems)
    after = _retimed(g, step, markers, cal.host_scale, cal.gpu_scale, problems, edited)
    notes = [cal.note] if cal.note else []
    predicted, modelled = after.latency_us() / 1e3, before.latency_us() / 1e3
    removals = all(e.kind in REMOVALS for e in edits)
    if removals and predicted > modelled:
        notes.append({"code": why.KEPT_MODEL, "longer_ms": predicted - modelled})
        predicted = modelled
    graphs = any(e.kind == "cuda-graphs" for e in edits)
    if graphs and replay is not None:
        notes.append({"code": why.REPLAY_COSTS, **replay.to_dict()})
    risks = capture_risks(ranks, markers, transformers, capture_path) if graphs else []
    result = WhatIf(cal, before, after, [str(e) for e in edits], predicted, modelled, risks + notes,
                    edited.balanced, replay=replay if graphs else None, confidence="low" if risks else "normal")
    if spread is not None:
        order = visit_order(g)

        def again(measured: float | None = measured_ms, host: dict = nominal, costs: Replay | None = replay,
                  gpu: float | None = None):
            c = cal if measured == measured_ms and host is nominal else calibrated(measured, host)
            e = apply(g, top, edits, c.host_scale, c.gpu_scale if gpu is None else gpu, costs, names)
            tm = retime(g, e.base, e.lag, order, e.removed)
            ms = steady_latency_us(periods(g, tm, step, markers, e.marker_scale)) / 1e3
            return min(ms, c.modelled_ms) if removals and math.isfinite(c.modelled_ms) else ms

        result.interval = interval(predicted, again, spread.measured_range if cal.calibrated else None,
                                   host_variants(cal, nominal, spread), replay if graphs else None, cal.gpu_scale,
                                   steady_latencies_us(after.iterations) / 1e3)
    return result


def from_run(ranks, manifest, edits: list[Edit], annotation: str | None = None) -> WhatIf:
    """:func:`predict` for a run folder's traces with what its manifest (or None) knows: the
    unprofiled latency and host time (a job's: each rank's, ``distributed.ranks``), the attribution
    record, the device's replay costs, their ranges for the prediction's interval, whether the
    model is a Hugging Face transformers one (``hf:``) outside a decode phase, and the run's check of
    its capture path, with the capture path's kernels where it traced them
    (:func:`with_capture_path`)."""
    from tracekit.analysis.critical_path.replay_costs import default_replay

    known = manifest is not None
    host = manifest.host_ms.median if known and manifest.host_ms else None
    if known and manifest.distributed and manifest.distributed.ranks:
        host = {r.rank: r.host_ms.median if r.host_ms else None for r in manifest.distributed.ranks}
    spread = Spread()
    if known:
        spread.measured_range = (manifest.latency("p10"), manifest.latency("p90"))
        h = manifest.host_ms
        spread.host_range = (h.p10, h.p90) if h and h.p10 is not None and h.p90 is not None else None
    model = (manifest.model or (manifest.spec.model if manifest.spec else None)) if known else None
    # a decode step passes its static cache's mask eagerly too: its capture keeps eager's kernels (the decode
    # study's 27 CUDA-graph predictions within 3.3% on an H100)
    decode = known and manifest.spec is not None and manifest.spec.phase == "decode"
    checked = manifest.capture_path.to_dict() if known and manifest.capture_path is not None else None
    result = predict(ranks, edits, manifest.latency("median") if known else None,
                     manifest.attribution if known else None, annotation, default_replay(ranks, manifest), host,
                     spread, transformers=str(model or "").startswith("hf:") and not decode, capture_path=checked)
    return with_capture_path(result, ranks, checked.get("trace") if checked else None, edits, annotation)


def with_capture_path(result: WhatIf, ranks, name: str | None, edits: list[Edit], annotation: str | None) -> WhatIf:
    """``result`` with the kernels of the run's capture path traced as ``name`` beside its trace
    (:func:`~tracekit.analysis.critical_path.capture_kernels.with_capture_kernels`, both traces
    predicted as traced with ``result``'s replay costs)."""
    return with_capture_kernels(result, ranks, name, edits, lambda r: predict(
        r, edits, None, annotation=annotation, replay=result.replay).predicted_ms)


def predict_run(path, edits: list[Edit], annotation: str | None = None) -> Prediction:
    """The iteration latency of the run at ``path`` after ``edits`` (``tracekit whatif``): its
    traces' dependency graph calibrated to its run.json (:func:`from_run`), edited, re-timed.

    Args:
        path: a run folder (its trace, or one per rank of a job, beside run.json) or a trace file
            (calibrated to the run.json of its folder, where there is one).
        edits: the edits, applied in order (:func:`tracekit.analysis.critical_path.edits.edits_of`).
        annotation: the CPU op or annotation that marks an iteration (default ``ProfilerStep#N``).

    Returns:
        A :class:`Prediction`, with each trace's integrity checks; where the traces hold no GPU op or
        no launch call, or (for ``cuda-graphs`` and ``host-faster``) fewer than two launches
        (:func:`tracekit.analysis.critical_path.cannot_retime_launches`), one whose
        ``cannot_predict`` says so; where the model raises or gives no iteration a length, one whose
        ``failure`` says why (the traces' damage, or a bug in tracekit: it never raises for them).

        A job folder with a rank's trace missing or unreadable is predicted from the ranks it
        has; the record names the others (``ranks_missing``, ``unreadable``; ``tracekit whatif``
        then exits 10).

    Raises:
        tracekit.trace.TraceError: ``path`` does not exist (``code`` 3), holds no trace (4), or no
            trace of it can be read (the first one's code).
        tracekit.analysis.critical_path.edits.EditError: a ``faster`` pattern that matches no GPU op
            (the message names it).
        tracekit.analysis.critical_path.AnnotationError: ``annotation`` is not in the traces.
    """
    import traceback

    from tracekit.analysis.critical_path import AnnotationError
    from tracekit.analysis.critical_path.edits import EditError
    from tracekit.analysis.metrics.integrity import checked

    found = run_inputs(path)
    decode = found.manifest.decode if found.manifest is not None else None
    job = {"tokens_per_step": decode.tokens_per_step if decode else None, "world_size": found.world_size,
           "ranks_missing": found.missing, "unreadable": found.unreadable,
           "integrity": pd.concat([checked(t).assign(trace=str(t.path), rank=r) for r, t in found.ranks],
                                  ignore_index=True)[["trace", "rank", "check", "status", "count", "total", "what"]]}
    retimes_launches = any(e.kind in ("cuda-graphs", "host-faster") for e in edits)
    ranks, texts = sorted(r for r, _ in found.ranks), [str(e) for e in edits]
    try:
        cannot = can_analyze(found.ranks) or (cannot_retime_launches(found.ranks) if retimes_launches else None)
        if cannot:
            return Prediction(str(path), texts, cannot_predict=cannot, ranks=ranks, **job)
        result = from_run(found.ranks, found.manifest, edits, annotation)
    except (EditError, AnnotationError):
        raise
    except Exception as exc:  # noqa: BLE001 - a trace the model fails on is this prediction's failure
        return Prediction(str(path), texts, ranks=ranks, failure=f"{type(exc).__name__}: {exc}",
                          failure_traceback="".join(traceback.format_exception(exc)), **job)
    if known(result.modelled_ms) is None or result.modelled_ms <= 0:
        return Prediction(str(path), texts, ranks=ranks, failure="no iteration of the model is longer than 0 µs "
                          "(every duration 0, or no op inside an iteration)", **job)
    prediction = Prediction.of(result, path, **job)
    prediction.twin = measured_twin(found.manifest, edits, prediction.predicted_latency_ms)
    return prediction


TWIN_OF_EDIT = {"balance-ranks": "balanced", "overlap-comm": "overlap"}   # tracekit.capture.twins' kinds


def measured_twin(manifest, edits: list[Edit], predicted_ms: float | None) -> dict | None:
    """The run's twin (run.json ``twin``) where it is what ``edits`` make of the run: its kinds are
    exactly those of the edits (each a ``balance-ranks`` or ``overlap-comm``): {"what", "latency_ms",
    "error"} (:attr:`Prediction.twin`); else None."""
    twin = manifest.twin if manifest is not None else None
    kinds = {TWIN_OF_EDIT.get(e.kind) for e in edits}
    if not twin or not twin.latency_ms or None in kinds or kinds != set((twin.kind or "").split("+")):
        return None
    measured = twin.latency_ms.median
    error = predicted_ms / measured - 1 if predicted_ms and measured else None
    return {"what": "; ".join(twin.names or []), "latency_ms": known(measured, 4),
            "error": known(error, 4) if error is not None else None}

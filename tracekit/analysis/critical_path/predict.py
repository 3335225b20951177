"""A prediction from one run: calibrate its trace's graph, apply edits, re-time (issue 30); a
job's graph of all its ranks, calibrated per rank (issue 38).

:func:`predict` re-times traces' tables (:class:`WhatIf`: the graphs before and after);
:func:`predict_run` does it for a run folder or a trace file and returns the record that
``tracekit whatif`` and :func:`tracekit.whatif` give (:class:`Prediction`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path import (
    CriticalPath,
    _retimed,
    can_analyze,
    cannot_retime_launches,
    prepare,
    steady_latencies_us,
    steady_latency_us,
    steady_rows,
)
from tracekit.analysis.critical_path import reasons as why
from tracekit.analysis.critical_path.calibrate import Calibration, calibrate, calibrate_job
from tracekit.analysis.critical_path.capture_risk import capture_risks
from tracekit.analysis.critical_path.edits import Edit, apply, gpu_names
from tracekit.analysis.critical_path.host_estimate import estimate
from tracekit.analysis.critical_path.path import outermost, periods
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
            spread: Spread | None = None) -> WhatIf:
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
    risks = capture_risks(ranks, markers) if graphs else []
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
    record, the device's replay costs, and their ranges for the prediction's interval."""
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
    return predict(ranks, edits, manifest.latency("median") if known else None,
                   manifest.attribution if known else None, annotation, default_replay(ranks, manifest), host,
                   spread)


def _known(value: float | None, digits: int | None = None) -> float | None:
    """``value`` (rounded to ``digits``), None where it is unknown (None, NaN or infinite)."""
    if value is None or not math.isfinite(value):
        return None
    return value if digits is None else round(value, digits)


def _per_iteration(split: pd.DataFrame) -> dict:
    """The mean µs of latency_us and each ``<part>_us`` over the steady rows of a critical path's
    split (:func:`tracekit.analysis.critical_path.steady_rows`), each rounded to 0.01 µs."""
    rows = steady_rows(split)
    return {c: round(float(rows[c].mean()), 2) for c in split.columns if c.endswith("_us")} if len(rows) else {}


def _excess(balanced: pd.DataFrame | None, after: pd.DataFrame) -> pd.DataFrame:
    """Per rank: host_excess_us, gpu_excess_us (the work ``balance-ranks`` took, µs per iteration:
    over the job's iterations, none taken counting 0); empty without the edit."""
    cols = ["rank", "host_excess_us", "gpu_excess_us"]
    if balanced is None:
        return pd.DataFrame(columns=cols)
    steps = max(int(after["step"].nunique()), 1)
    per = balanced.groupby("rank")[["host_excess_us", "gpu_excess_us"]].sum() / steps
    return per.reindex(sorted(after["rank"].unique()), fill_value=0.0).rename_axis("rank").reset_index()[cols]


@dataclass(repr=False)
class Prediction:
    """A run's iteration latency after edits, predicted from its trace (:func:`predict_run`).

    path:                 the run folder or trace file, as given.
    edits:                the edits as text ("cuda-graphs", "faster blocks.*.mlp=2", "host-faster 2"...).
    predicted_latency_ms: the modelled steady-state iteration after the edits (ms).
    predicted_low_ms, predicted_high_ms: its interval (ms) from its sources of uncertainty
                          (:mod:`tracekit.analysis.critical_path.uncertainty`: the timer's spread,
                          the host's, the replay costs', the iterations', the fit's); interval_sources:
                          each source's predictions at the ends of its range (name -> (low, high) ms).
    replay_costs:         ``cuda-graphs``: the replay costs used and where they were measured (device,
                          measured, measured_on, each cost and its range, µs:
                          :meth:`~tracekit.analysis.critical_path.replay_costs.Replay.to_dict`);
                          None without that edit.
    confidence:           ``low`` where the eager trace says the capture may run other kernels than
                          the eager ones the prediction keeps (the first note says why:
                          :mod:`~tracekit.analysis.critical_path.capture_risk`), else ``normal``.
    measured_latency_ms:  the run's unprofiled median latency (run.json, ms) the model is calibrated
                          to; None without one.
    modelled_latency_ms:  the calibrated model's iteration before the edits (ms).
    calibrated:           whether the model was fitted to measured_latency_ms (else an uncalibrated
                          bound: the trace as profiled, an upper bound on host time, or a job the fit
                          could not meet without shrinking kernels for its host: the notes say).
    host_scale, gpu_scale: the calibration's factors on host time and GPU op time
                          (:mod:`tracekit.analysis.critical_path.calibrate`; a job's host_scale: the
                          median of its ranks' factors, each in host_scale_by_rank).
    host_source:          where the host's factor came from: ``fitted`` (to the unprofiled latency),
                          ``measured`` (run.json host_ms), ``estimated`` (from the trace, run.json
                          lacking host_ms: :mod:`~tracekit.analysis.critical_path.host_estimate`),
                          ``none`` (the least allowed) or ``traced`` (uncalibrated)
                          (:attr:`~tracekit.analysis.critical_path.calibrate.Calibration.host_source`).
    critical_path_before, critical_path_after: one row per iteration (and rank: ``rank``, ``step``)
                          of the critical path without and with the edits: its ``latency_us`` and
                          the µs of each part on it (``<part>_us``,
                          :data:`~tracekit.analysis.critical_path.path.PARTS`), and ``within``: the
                          instance of ``annotation`` it is nested in (-1: none; a nested instance is
                          part of the outer one's iteration, which alone the figures count).
    notes:                what limits the prediction (the calibration's note, problems of the trace).
    missing:              what the trace lacks for a complete graph.
    cannot_predict:       why there is no prediction (no GPU op, no launch call, or a single launch for
                          ``cuda-graphs`` and ``host-faster``); None where there is one. Without one the
                          figures are None and the tables empty.
    ranks:                the ranks predicted (a single run: [0]).
    world_size:           the ranks the job should have (run.json, else the traces' distributedInfo;
                          None for a single run).
    ranks_missing:        the job's ranks with no readable trace: the prediction is of the others,
                          whose collectives wait for no missing rank.
    unreadable:           (path, problem, exit code) of each trace that could not be read.
    host_scale_by_rank:   a job's host factor per rank ({} for a single run).
    rank_excess:          ``balance-ranks``: per rank, the host and GPU work taken away (host_excess_us,
                          gpu_excess_us, µs per iteration); empty without the edit.
    integrity:            each readable trace's integrity checks (trace, rank, then the columns of
                          :func:`tracekit.analysis.metrics.integrity.checks`), as ``tracekit analyze``
                          checks them.
    tokens_per_step:      a decode run's tokens a step (run.json's ``decode``; None for other runs): its
                          iteration is one decode step, making one token of each sequence, so its
                          latencies are per token and :meth:`to_dict` adds tokens/s.
    failure, failure_traceback: why the traces could not be modelled ("" where they were): the model
                          raised (its type and message; a bug in tracekit, or input it cannot model)
                          or gave no iteration a length; the figures are then None (``tracekit whatif``
                          exits CANNOT_MODEL, 13).

    Values are as computed; :meth:`to_dict` rounds them. The notes, missing and cannot_predict are
    reasons (:mod:`~tracekit.analysis.critical_path.reasons`), which the report words
    (:func:`tracekit.report.worded.worded`: what :func:`tracekit.whatif` returns holds their words).
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
    notes: list[dict] = field(default_factory=list)
    missing: list[dict] = field(default_factory=list)
    cannot_predict: dict | None = None
    ranks: list[int] = field(default_factory=lambda: [0])
    world_size: int | None = None
    ranks_missing: list[int] = field(default_factory=list)
    unreadable: list[tuple[str, str, int]] = field(default_factory=list)
    host_scale_by_rank: dict[int, float] = field(default_factory=dict)
    rank_excess: pd.DataFrame = field(default_factory=pd.DataFrame)
    integrity: pd.DataFrame = field(default_factory=pd.DataFrame)
    host_source: str = ""
    predicted_low_ms: float | None = None
    predicted_high_ms: float | None = None
    interval_sources: dict[str, tuple[float, float]] = field(default_factory=dict)
    replay_costs: dict | None = None
    confidence: str = "normal"
    failure: str = ""
    failure_traceback: str = ""
    tokens_per_step: int | None = None

    @classmethod
    def of(cls, result: WhatIf, path, **job) -> "Prediction":
        """The record of :func:`predict`'s result for the run at ``path`` (``job``: world_size,
        ranks_missing, unreadable, as :func:`predict_run` found them)."""
        cal = result.calibration
        scales = dict(cal.host_scale) if isinstance(cal.host_scale, Mapping) else {}
        host = float(np.median(list(scales.values()))) if scales else cal.host_scale
        return cls(str(path), result.edits, _known(result.predicted_ms), _known(cal.measured_ms),
                   _known(result.modelled_ms), cal.calibrated, host, cal.gpu_scale,
                   result.before.split, result.after.split, result.notes + result.before.problems,
                   result.before.missing, ranks=sorted(int(r) for r in result.before.split["rank"].unique()),
                   host_scale_by_rank=scales, rank_excess=_excess(result.balanced, result.after.split),
                   host_source=cal.host_source, replay_costs=result.replay.to_dict() if result.replay else None,
                   confidence=result.confidence,
                   **_interval_fields(result.interval), **job)

    @property
    def is_job(self) -> bool:
        """Whether this is a job's prediction (several ranks, or ranks missing of one)."""
        return len(self.ranks) > 1 or bool(self.ranks_missing) or (self.world_size or 1) > 1

    def to_dict(self) -> dict:
        """The JSON object of ``tracekit whatif --json``: path, edits, predicted_latency_ms,
        predicted_low_ms, predicted_high_ms, confidence, measured_latency_ms, modelled_latency_ms (ms
        to 4 decimals, None where unknown), calibrated, host_scale, gpu_scale (4 decimals), host_source,
        critical_path_before and critical_path_after (µs per iteration of latency_us and each
        ``<part>_us``: the mean over the iterations, the first left out for each rank that has three or
        more; 2 decimals), notes, missing, interval_sources (source -> [low, high] ms), replay_costs
        (None without ``cuda-graphs``); for a job also ranks,
        world_size, ranks_missing, unreadable ({path, problem, code}), host_scale_by_rank (rank as
        text -> factor, 4 decimals) and, with ``balance-ranks``, rank_excess ({rank, host_excess_us,
        gpu_excess_us} per rank, 2 decimals); for a decode run (``tokens_per_step``) also per ("token":
        its latencies are per token), tokens_per_step, predicted_tokens_per_s and measured_tokens_per_s
        (tokens_per_step / the latency x 1000, 1 decimal). Where there is no prediction: path,
        predicted_latency_ms (None) and cannot_predict or failure (and a job's ranks_missing). Always
        unreadable and integrity (its rows as records)."""
        job = {"ranks": self.ranks, "world_size": self.world_size, "ranks_missing": self.ranks_missing}
        inputs = {"unreadable": [{"path": p, "problem": e, "code": c} for p, e, c in self.unreadable],
                  "integrity": self.integrity.to_dict("records")}
        if self.cannot_predict or self.failure:
            why = {"cannot_predict": self.cannot_predict} if self.cannot_predict else {"failure": self.failure}
            return {"path": self.path, "predicted_latency_ms": None, **why,
                    **({"ranks_missing": self.ranks_missing} if self.is_job else {}), **inputs}
        out = {"path": self.path, "edits": self.edits, "predicted_latency_ms": _known(self.predicted_latency_ms, 4),
               "predicted_low_ms": _known(self.predicted_low_ms, 4),
               "predicted_high_ms": _known(self.predicted_high_ms, 4), "confidence": self.confidence,
               "measured_latency_ms": _known(self.measured_latency_ms, 4),
               "modelled_latency_ms": _known(self.modelled_latency_ms, 4), "calibrated": self.calibrated,
               "host_scale": round(self.host_scale, 4), "gpu_scale": round(self.gpu_scale, 4),
               "host_source": self.host_source,
               "critical_path_before": _per_iteration(self.critical_path_before),
               "critical_path_after": _per_iteration(self.critical_path_after),
               "notes": self.notes, "missing": self.missing,
               "interval_sources": {k: [_known(x, 4) for x in v] for k, v in self.interval_sources.items()},
               "replay_costs": self.replay_costs, **inputs}
        if self.tokens_per_step:
            rate = lambda ms: _known(self.tokens_per_step / ms * 1e3, 1) if ms else None  # noqa: E731
            out.update(per="token", tokens_per_step=self.tokens_per_step,
                       predicted_tokens_per_s=rate(self.predicted_latency_ms),
                       measured_tokens_per_s=rate(self.measured_latency_ms))
        if self.is_job:
            out.update(job, host_scale_by_rank={str(r): round(f, 4) for r, f in self.host_scale_by_rank.items()})
            if len(self.rank_excess):
                out["rank_excess"] = self.rank_excess.round(2).to_dict("records")
        return out


def _interval_fields(iv: Interval | None) -> dict:
    """A :class:`Prediction`'s predicted_low_ms, predicted_high_ms and interval_sources of an interval."""
    if iv is None:
        return {}
    return {"predicted_low_ms": iv.low_ms, "predicted_high_ms": iv.high_ms, "interval_sources": dict(iv.sources)}


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
    if _known(result.modelled_ms) is None or result.modelled_ms <= 0:
        return Prediction(str(path), texts, ranks=ranks, failure="no iteration of the model is longer than 0 µs "
                          "(every duration 0, or no op inside an iteration)", **job)
    return Prediction.of(result, path, **job)

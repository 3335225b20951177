"""The record of a what-if (``tracekit whatif``, :func:`tracekit.whatif`): :class:`Prediction`, made
from :func:`tracekit.analysis.critical_path.predict.predict`'s result by :meth:`Prediction.of`, and its
JSON object (:meth:`Prediction.to_dict`, ``--json``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path import steady_rows
from tracekit.analysis.critical_path.uncertainty import Interval

if TYPE_CHECKING:
    from tracekit.analysis.critical_path.predict import WhatIf


def known(value: float | None, digits: int | None = None) -> float | None:
    """``value`` (rounded to ``digits``), None where it is unknown (None, NaN or infinite)."""
    if value is None or not math.isfinite(value):
        return None
    return value if digits is None else round(value, digits)


def per_iteration(split: pd.DataFrame) -> dict:
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
    twin:                 the run's twin measured in the same process where it is what the edits make
                          (run.json ``twin``, :mod:`tracekit.capture.twins`: ``balance-ranks`` on a
                          straggler built with its balanced twin, ``overlap-comm`` on a no-overlap run):
                          {"what": its names, "latency_ms": its median step, "error": predicted over it
                          less 1}; None otherwise.
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
    twin: dict | None = None

    @classmethod
    def of(cls, result: WhatIf, path, **job) -> "Prediction":
        """The record of :func:`predict`'s result for the run at ``path`` (``job``: world_size,
        ranks_missing, unreadable, as :func:`predict_run` found them)."""
        cal = result.calibration
        scales = dict(cal.host_scale) if isinstance(cal.host_scale, Mapping) else {}
        host = float(np.median(list(scales.values()))) if scales else cal.host_scale
        return cls(str(path), result.edits, known(result.predicted_ms), known(cal.measured_ms),
                   known(result.modelled_ms), cal.calibrated, host, cal.gpu_scale,
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
        (None without ``cuda-graphs``), twin where there is one; for a job also ranks,
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
        out = {"path": self.path, "edits": self.edits, "predicted_latency_ms": known(self.predicted_latency_ms, 4),
               "predicted_low_ms": known(self.predicted_low_ms, 4),
               "predicted_high_ms": known(self.predicted_high_ms, 4), "confidence": self.confidence,
               "measured_latency_ms": known(self.measured_latency_ms, 4),
               "modelled_latency_ms": known(self.modelled_latency_ms, 4), "calibrated": self.calibrated,
               "host_scale": round(self.host_scale, 4), "gpu_scale": round(self.gpu_scale, 4),
               "host_source": self.host_source,
               "critical_path_before": per_iteration(self.critical_path_before),
               "critical_path_after": per_iteration(self.critical_path_after),
               "notes": self.notes, "missing": self.missing,
               "interval_sources": {k: [known(x, 4) for x in v] for k, v in self.interval_sources.items()},
               "replay_costs": self.replay_costs, **({"twin": self.twin} if self.twin else {}), **inputs}
        if self.tokens_per_step:
            rate = lambda ms: known(self.tokens_per_step / ms * 1e3, 1) if ms else None  # noqa: E731
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

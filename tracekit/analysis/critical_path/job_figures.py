"""A job's critical path in ``tracekit analyze --critical-path`` (issue 38): its ranks' traces read
again and joined at their collectives (:func:`tracekit.analysis.critical_path.graph.build`), each
rank calibrated (:func:`tracekit.analysis.critical_path.calibrate.calibrate_job`), and the
``balance-ranks`` what-if, whose saving the ``jobs`` table shows
(:mod:`tracekit.analysis.distributed.job`).

Each trace's own analysis sees one rank: its critical path (the ``critical_path`` table) stops at
its collectives. The job's, here, goes through them to the rank that held them (``rank_wait``).
The traces are read a second time, in this process: a job's analysis needs all its ranks at once,
where each trace's analysis ran alone (in a worker process, or a Dask worker: on a cluster the
traces must then be readable here too, else the job's figures are absent with the reason).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tracekit.analysis.critical_path import CannotAnalyze, cannot_reason
from tracekit.analysis.critical_path import reasons as why
from tracekit.analysis.critical_path.edits import Edit
from tracekit.analysis.critical_path.path import PARTS
from tracekit.analysis.critical_path.predict import from_run
from tracekit.analysis.critical_path.prediction import per_iteration
from tracekit.manifest import Manifest

NAN = float("nan")


def job_figures(paths: list[Path], manifest: Manifest | None, annotation: str | None = None
                ) -> tuple[dict, pd.DataFrame]:
    """(row, split) of a job's critical path.

    Args:
        paths: its ranks' trace files (those that could not be read are left out: the job is then
            the ranks that could).
        manifest: its run.json (None for bare traces: uncalibrated).
        annotation: what marks an iteration (default ``ProfilerStep#N``).

    Returns:
        Row: cp_calibrated; cp_step_ms (the calibrated model's step: the slowest rank's iteration,
        ms); balance_predicted_ms (after ``balance-ranks``, ms); balance_could_save_ms (their
        difference, ms a step; NaN where the model is not calibrated: no unprofiled figure to
        give); cp_rank_wait_share and cp_comm_share (of the ranks' critical paths, per iteration:
        waiting for another rank, and collectives' transfer); cp_note (the calibration's note and
        what the traces lack: a tuple of reasons, :mod:`~tracekit.analysis.critical_path.reasons`).
        Split: per (rank, step), latency_us and each ``<part>_us`` of its critical path through
        the job (:data:`~tracekit.analysis.critical_path.path.PARTS`).

    Raises:
        CannotAnalyze: fewer than two ranks could be read (``FEW_RANKS``), or they hold no GPU op or no
            host call.
        AnnotationError: ``annotation`` is not in the traces.
    """
    from tracekit.analysis.distributed.job import rank_of
    from tracekit.trace import TraceError, load

    ranks = []
    for p in paths:
        try:
            tables = load(p)
        except TraceError:
            continue
        ranks.append((rank_of(tables.meta, p), tables))
    if len(ranks) < 2 or any(r is None for r, _ in ranks):
        raise CannotAnalyze({"code": why.FEW_RANKS, "ranks": len(ranks)})
    result = from_run(sorted(ranks, key=lambda rt: rt[0]), manifest, [Edit("balance-ranks")], annotation)
    cal = result.calibration
    mean = per_iteration(result.before.split)
    total = mean.get("latency_us") or NAN
    row = {"cp_calibrated": cal.calibrated, "cp_step_ms": result.modelled_ms,
           "balance_predicted_ms": result.predicted_ms,
           "balance_could_save_ms": result.modelled_ms - result.predicted_ms if cal.calibrated else NAN,
           "cp_rank_wait_share": mean.get("rank_wait_us", NAN) / total,
           "cp_comm_share": mean.get("comm_us", NAN) / total,
           "cp_note": tuple(([cal.note] if cal.note else []) + result.before.missing)}
    return row, result.before.split[["rank", "step", "latency_us", *[f"{p}_us" for p in PARTS]]]


def all_jobs(runs: pd.DataFrame, root: Path, manifests: dict[str, Manifest], annotation: str | None = None
             ) -> tuple[dict[str, dict], pd.DataFrame]:
    """:func:`job_figures` of every job among analyzed runs (``runs``: Analysis.runs, with job, rank,
    trace relative to ``root`` and has_gpu; ``manifests``: job -> its run.json) of two ranks or more
    with GPU activity: (job -> its row, or {"cp_note": (a ``NO_JOB_PATH`` reason: why there is
    none,)}; the ``job_critical_path`` table: job, rank, step, latency_us and each part, µs)."""
    if "job" not in runs:
        return {}, pd.DataFrame()
    rows, splits = {}, []
    for name, mine in runs[runs["job"].notna()].groupby("job", sort=True):
        gpu = mine["has_gpu"].fillna(False).astype(bool).any() if "has_gpu" in mine else False
        if mine["rank"].nunique() < 2 or mine["rank"].duplicated().any() or not gpu:
            continue
        try:
            rows[name], split = job_figures([root / t for t in mine["trace"]], manifests.get(name), annotation)
        except ValueError as exc:   # CannotAnalyze, an annotation not in the traces, or another's message
            rows[name] = {"cp_note": ({"code": why.NO_JOB_PATH, "why": cannot_reason(exc)},)}
            continue
        splits.append(split.assign(job=name))
    table = pd.concat(splits, ignore_index=True) if splits else pd.DataFrame()
    return rows, table[["job", *[c for c in table.columns if c != "job"]]] if len(table) else table

"""A job: the traces of the ranks of one distributed run, summarised and judged together.

Each trace's rank comes from Kineto's ``distributedInfo.rank``, else from its file name
(``rank-3``, ``rank_3``, ``rank3``, ``worker3``). The ranks of a job are the traces of
one run folder with a ``run.json`` (``tracekit trace --nproc``), or, without one, the
ranked traces of one folder. Per-rank figures are the per-trace analyses
(:mod:`tracekit.analysis.trace_analysis`); here they are put side by side:

* ``ranks``: per rank, span, busy, idle by cause with *rank wait* as a cause of its own
  (GPU idle while the rank waited in a collective for a later rank, taken out of the
  cause the trace alone gave it, :func:`tracekit.analysis.distributed.stragglers.rank_wait_idle`),
  computation, communication, overlap, exposed communication, the time its collectives
  waited for later ranks, a verdict and what each remedy could save;
* ``jobs``: per job, its ranks (and those it lacks), the straggler (or why there is none:
  ``no_straggler_because``, a reason with its figures), the job's verdict, its evidence and
  remedies, and its ``finding``: the figures the report says the job with
  (:func:`tracekit.report.job_text.finding_text`), or why the traces are not one job;
  ``job_balance``: per job and rank figure (span, busy, idle and each idle cause,
  computation, communication, exposed communication, rank wait), the median and
  maximum over the ranks and their imbalance (max / median);
* ``collective_calls`` and ``stragglers``: :mod:`tracekit.analysis.distributed.stragglers`.

Verdict of a rank: whichever is largest of computation, exposed communication and
host wait (idle, the GPU waiting for launches) is what bounds it: ``compute-bound``,
``communication-bound`` or ``launch-bound``. What each remedy could save per profiled
iteration, at most: *better overlap* the exposed communication that was not waiting for
another rank; *CUDA graphs* its host wait; and the time the rank waited for later ranks
(``rank_wait_us_per_iter``), which is no saving: ranks that take turns being late wait for
each other without any of them slowing the step. A job's verdict is that of its mean rank; its
remedies: the median rank's overlap and CUDA-graph savings.

*Balancing* is judged in unprofiled time (issue 38): the straggler is named only beyond the run's
noise, and what balancing could save is predicted by the job's critical path
(:mod:`tracekit.analysis.distributed.step_noise`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path, PurePath

import numpy as np
import pandas as pd

from tracekit.analysis.distributed import step_noise, stragglers
from tracekit.analysis.metrics.idle import CAUSES
from tracekit.manifest import Manifest

RANK_IN_NAME = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)", re.I)
CAUSES_IN_JOB = (*CAUSES, "rank_wait")
JOB_METRICS = ["active_span_us", "gpu_busy_us", "idle_us", *[f"idle_{c}_us" for c in CAUSES_IN_JOB],
               "computation_us", "communication_us", "exposed_communication_us", "rank_wait_us"]
# The job's critical-path figures (tracekit.analysis.critical_path.job_figures), NaN where not computed.
PREDICTED = ("cp_step_ms", "balance_predicted_ms", "balance_could_save_ms", "cp_rank_wait_share", "cp_comm_share")
VERDICTS = {"computation_us": "compute-bound", "exposed_communication_us": "communication-bound",
            "idle_host_wait_us": "launch-bound"}
# A jobs row's finding: a job (ONE_JOB, with FINDING, the figures its sentence reads, as the row had them before
# the rows of several jobs made one table); traces that are no job, several claiming a rank (CLAIMED_TWICE, with
# the ranks claimed); or the job analysis failed (FAILED: tracekit.analysis.runs.analyze's one row, with the reason).
ONE_JOB, CLAIMED_TWICE, FAILED = "job", "ranks claimed twice", "failed"
FINDING = ("job", "ranks", "backend", "verdict", "evidence", "ranks_missing", "world_size", "straggler",
           "straggler_times_last", "collectives_matched", "collectives_inconsistent", "straggler_wait_caused_us",
           "balance_could_save_ms", "noise_ms", "no_straggler_because")


def rank_of(meta: dict, path: PurePath | str) -> int | None:
    """The rank of a trace: ``distributedInfo.rank`` (``meta["distributed"]``), else the
    number in ``rank-3`` / ``rank_3`` / ``worker3`` in the file name; None for neither."""
    rank = (meta.get("distributed") or {}).get("rank")
    try:
        return int(rank)
    except (TypeError, ValueError):
        pass
    m = RANK_IN_NAME.search(PurePath(path).name)
    return int(m.group(1)) if m else None


def rank_ranges(ranks: list[int]) -> str:
    """Ranks as text, consecutive ones as a range: "0, 2-5, 7" ("" for none)."""
    spans: list[list[int]] = []
    for r in sorted(ranks):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def job_name(run: str, trace: str, has_manifest: bool, root: Path) -> str:
    """The job a ranked trace belongs to: its run (a run folder with run.json), else its
    folder (``trace`` is relative to ``root``, whose name stands for the root itself)."""
    folder = PurePath(trace).parent
    return run if has_manifest else (str(folder) if str(folder) != "." else Path(root).absolute().name)


def _per_iter(value, iterations) -> float:
    return value / iterations if iterations and iterations == iterations and iterations > 0 else math.nan


def rank_table(rows: pd.DataFrame, per_call: pd.DataFrame, idle_waits: pd.DataFrame) -> pd.DataFrame:
    """The ``ranks`` table of one job (see the module docstring).

    Args:
        rows: the job's run rows (Analysis.runs), one per rank.
        per_call: :func:`tracekit.analysis.distributed.stragglers.match`'s first table.
        idle_waits: :func:`tracekit.analysis.distributed.stragglers.rank_wait_idle`.
    """
    r = rows.sort_values("rank").reset_index(drop=True)
    out = pd.DataFrame({"rank": r["rank"].astype(np.int64), "trace": r["trace"], "iterations": r["iterations"],
                        "window_us": r["window_us"]})
    for col in ("active_span_us", "gpu_busy_us", "idle_us", "computation_us", "communication_us",
                "comm_comp_overlap", "exposed_communication_us"):
        out[col] = r[col].to_numpy() if col in r else math.nan
    taken = idle_waits.pivot_table(index="rank", columns="cause", values="idle_us", aggfunc="sum") \
        if len(idle_waits) else pd.DataFrame()
    for cause in CAUSES:
        before = r[f"idle_{cause}_us"].to_numpy(dtype=float) if f"idle_{cause}_us" in r else np.full(len(r), math.nan)
        less = taken[cause].reindex(out["rank"]).fillna(0).to_numpy() if cause in taken else 0.0
        out[f"idle_{cause}_us"] = before - less
    out["idle_rank_wait_us"] = taken.sum(axis=1).reindex(out["rank"]).fillna(0).to_numpy() if len(taken) else 0.0
    out.loc[out["active_span_us"].isna(), "idle_rank_wait_us"] = math.nan   # no GPU timeline: no GPU idle
    out["rank_wait_us"] = per_call.groupby("rank")["wait_us"].sum().reindex(out["rank"]).fillna(0).to_numpy() \
        if len(per_call) else 0.0
    out["collectives"] = per_call.groupby("rank").size().reindex(out["rank"]).fillna(0).astype(np.int64).to_numpy() \
        if len(per_call) else 0
    return _judge(out)


def _judge(out: pd.DataFrame) -> pd.DataFrame:
    """Verdict, evidence and remedy savings of each row (rank, or a job's mean rank). The evidence:
    ((verdict, share of the profiled window), ...) of each part the verdict weighs that is known
    (computation, exposed communication, host wait); None without a window."""
    parts = out[list(VERDICTS)].fillna(0)
    out["verdict"] = parts.idxmax(axis=1).map(VERDICTS).where(parts.sum(axis=1) > 0, "undetermined")
    base = out["window_us"].where(out["window_us"] > 0)
    shown = out[list(VERDICTS)].to_numpy(dtype=float)
    out["evidence"] = [tuple((VERDICTS[k], float(v / w)) for k, v in zip(VERDICTS, vals) if v == v) if w == w
                       else None for vals, w in zip(shown, base)]
    iters = out["iterations"]
    out["overlap_could_save_us_per_iter"] = [
        _per_iter(max(e - w, 0.0), n) for e, w, n in zip(out["exposed_communication_us"].fillna(0),
                                                         out["rank_wait_us"], iters)]
    out["rank_wait_us_per_iter"] = [_per_iter(w, n) for w, n in zip(out["rank_wait_us"], iters)]
    out["cuda_graphs_could_save_us_per_iter"] = [_per_iter(h, n) for h, n in zip(out["idle_host_wait_us"], iters)]
    return out


def balance(job: str, ranks: pd.DataFrame) -> pd.DataFrame:
    """The ``job_balance`` rows of one job: per JOB_METRICS, its median and maximum over the
    ranks and the imbalance max / median (NaN where the median is 0 or unknown)."""
    known = [m for m in JOB_METRICS if ranks[m].notna().any()]   # a CPU-only job has no GPU figures
    med, top = ranks[known].median(), ranks[known].max()
    return pd.DataFrame({"job": job, "metric": [m[:-3] for m in known], "median_us": med.to_numpy(),
                         "max_us": top.to_numpy(), "imbalance": (top / med.where(med > 0)).to_numpy()})


def job_row(job: str, ranks: pd.DataFrame, straggle: pd.DataFrame, matched: pd.DataFrame, info: dict,
            manifest: Manifest | None = None, predicted: dict | None = None) -> dict:
    """One row of the ``jobs`` table: ranks (present, ``world_size``, ``ranks_missing``), backend,
    matched collectives, the straggler (or ``no_straggler_because``, None where there is one:
    :func:`stragglers.no_straggler_because`, or ``step_noise.WITHIN_NOISE``), the verdict of the
    mean rank and its evidence, the remedies, noise_ms, straggler_excess_ms, balance_could_save_ms,
    the critical path's figures (cp_note: a tuple of its reasons) and the finding (``ONE_JOB``)
    (see the module docstring; ``manifest``: the job's run.json; ``predicted``: the job's
    critical-path figures, :func:`tracekit.analysis.critical_path.job_figures.job_figures`' row)."""
    consistent = matched["consistent"].astype(bool) if len(matched) else pd.Series(dtype=bool)
    world = info.get("world_size")
    present = set(ranks["rank"].astype(int))
    row = {"job": job, "ranks": len(ranks), "world_size": world, "backend": info.get("backend"),
           "ranks_missing": rank_ranges(sorted(set(range(int(world))) - present))
           if world == world and world and int(world) > 1 else "",
           "collectives_matched": len(matched), "collectives_inconsistent": int((~consistent).sum()),
           "wait_caused_us": float(matched["wait_caused_us"].sum()) if len(matched) else 0.0,
           "comm_comp_overlap_median": float(ranks["comm_comp_overlap"].median())}
    flagged = straggle[straggle["straggler"].astype(bool)]
    row["straggler"] = int(flagged["rank"].iloc[0]) if len(flagged) else None
    row["no_straggler_because"] = None if len(flagged) else stragglers.no_straggler_because(
        straggle, float(ranks["window_us"].median()))
    row["straggler_times_last"] = int(flagged["times_last"].iloc[0]) if len(flagged) else 0
    row["straggler_wait_caused_us"] = float(flagged["wait_caused_us"].iloc[0]) if len(flagged) else 0.0
    mean = ranks[list(VERDICTS) + ["window_us", "iterations", "rank_wait_us"]].mean().to_frame().T
    judged = _judge(mean)
    row.update(verdict=judged["verdict"].iloc[0], evidence=judged["evidence"].iloc[0],
               overlap_could_save_us_per_iter=float(ranks["overlap_could_save_us_per_iter"].median()),
               cuda_graphs_could_save_us_per_iter=float(ranks["cuda_graphs_could_save_us_per_iter"].median()))
    row.update(noise_ms=step_noise.noise_ms(manifest),
               straggler_excess_ms=step_noise.excess_ms(ranks, straggle, manifest, info.get("backend")))
    row.update({"cp_calibrated": False, "cp_note": (), **dict.fromkeys(PREDICTED, math.nan), **(predicted or {})})
    step_noise.beyond_noise(row, "balance_could_save_ms" if math.isfinite(row["balance_could_save_ms"])
                            else "straggler_excess_ms")
    row["finding"] = {"code": ONE_JOB, **{k: row[k] for k in FINDING}}
    return row


# The tables of jobs (:func:`analyze_jobs`), each row tagged with its job.
JOB_TABLES = ("jobs", "job_balance", "ranks", "collective_calls", "stragglers")


def analyze_jobs(runs: pd.DataFrame, calls: pd.DataFrame, pieces: pd.DataFrame,
                 manifests: dict[str, Manifest] | None = None, predicted: dict[str, dict] | None = None
                 ) -> dict[str, pd.DataFrame]:
    """Every job among the analyzed runs.

    Args:
        runs: Analysis.runs with ``job`` and ``rank`` (NaN for traces of no job).
        calls: the ``collectives`` table of every trace (with run, trace, rank, call).
        pieces: the ``collective_idle`` table of every trace (with trace, rank, call).
        manifests: job -> its run.json (a job of a run folder), for the noise and each rank's host time.
        predicted: job -> its critical-path figures (:func:`tracekit.analysis.critical_path.job_figures.job_figures`),
            where computed.

    Returns:
        {"jobs", "job_balance", "ranks", "collective_calls", "stragglers"}: DataFrames,
        each row tagged with its job (empty dict when no job has two ranks or more).
    """
    if "job" not in runs or runs["job"].isna().all():
        return {}
    out: dict[str, list] = {name: [] for name in JOB_TABLES}
    for job, rows in runs[runs["job"].notna()].groupby("job", sort=True):
        if rows["rank"].nunique() < 2:
            continue
        if rows["rank"].duplicated().any():   # two traces claim a rank: not one job's ranks
            again = sorted(int(r) for r in rows.loc[rows["rank"].duplicated(), "rank"].unique())
            out["jobs"].append(pd.DataFrame([{"job": job, "ranks": rows["rank"].nunique(),
                                              "finding": {"code": CLAIMED_TWICE, "job": job, "claimed": again}}]))
            continue
        traces = set(rows["trace"])
        own = calls[calls["trace"].isin(traces)] if len(calls) else calls
        per_call, matched = stragglers.match(own) if len(own) else (pd.DataFrame(columns=["rank", "wait_us"]),
                                                                    pd.DataFrame(columns=stragglers.MATCH_COLUMNS))
        mine = pieces[pieces["trace"].isin(traces)] if len(pieces) else pieces
        ranks = rank_table(rows, per_call, stragglers.rank_wait_idle(per_call, mine) if len(per_call) else
                           pd.DataFrame())
        straggle = stragglers.stragglers(per_call, matched, float(ranks["window_us"].median())) if len(per_call) \
            else pd.DataFrame(columns=stragglers.STRAGGLER_COLUMNS)
        info = {k: rows[k].dropna().iloc[0] if k in rows and rows[k].notna().any() else None
                for k in ("world_size", "backend")}
        row = job_row(job, ranks, straggle, matched, info, (manifests or {}).get(job), (predicted or {}).get(job))
        if len(straggle):
            straggle = straggle.assign(straggler=straggle["rank"].eq(row["straggler"]) & straggle["straggler"])
        out["jobs"].append(pd.DataFrame([row]))
        out["job_balance"].append(balance(job, ranks))
        for name, df in (("ranks", ranks), ("collective_calls", matched), ("stragglers", straggle)):
            out[name].append(df.assign(job=job)[["job", *df.columns]])
    return {k: pd.concat(v, ignore_index=True) for k, v in out.items() if v}

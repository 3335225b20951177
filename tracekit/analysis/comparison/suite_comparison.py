"""A suite's comparison: every run against the eager run of its workload, and the
suite's published claims checked against the numbers.

Input: the rows of :func:`tracekit.analysis.runs.analyze` (one per run). The speedups are
the comparison engine's (:func:`tracekit.analysis.comparison.compare.compare` with
``of_op``): each run against the eager run of the same op (a variant such as
``softmax4096-triton`` computes the op ``softmax4096``), batch, dtype, device and phase.
This module is the suite's view of them: its names (``speedup_vs_eager``, ``contender``,
``eager_<figure>``) beside the run's own row. Achieved rates are the analysis'
(``achieved_TFLOPs``, ``achieved_GBps``: a call's minimum work over its median latency,
against :mod:`tracekit.analysis.peaks`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from tracekit.analysis.comparison.compare import compare
from tracekit.analysis.peaks import SOURCES, key
from tracekit.manifest import Manifest
from tracekit.manifest.suite_toml import Suite

SLOWER = 0.98  # a speedup below this is a regression (2% is beyond run-to-run noise of medians)
# The engine's figures of each run a suite's report words (tracekit.report.worded): the speedup's range and
# the two timers' verdicts (tracekit.analysis.comparison.trust).
_ENGINE = {"speedup_low": "speedup_low_vs_eager", "speedup_high": "speedup_high_vs_eager",
           "timer_verdict": "timer_verdict", "wall_verdict": "wall_verdict", "wall_speedup_low": "wall_speedup_low",
           "wall_speedup_high": "wall_speedup_high"}
_PER_ITER = ("kernels_per_iter", "launches_per_iter", "busy_per_iter_us", "idle_per_iter_us",
             "host_wait_per_iter_us", "peak_memory_MB")


def comparison(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run: its run row with ``workload`` (the key of comparable runs: the op, batch,
    seq, dtype, device it ran on and phase), ``contender`` (the mode, plus the model when it is
    a variant of the op), ``eager_ms`` and ``speedup_vs_eager`` (eager median latency / this
    one), ``wall_speedup_vs_eager`` (the same by the synchronised wall clock),
    ``speedup_inconclusive`` (the p10-p90 latency ranges of run and eager overlap, or the two
    speedups lie on either side of 1: :func:`tracekit.analysis.comparison.trust.inconclusive`),
    ``speedup_low_vs_eager`` and ``speedup_high_vs_eager`` (its range), ``timer_verdict``,
    ``wall_verdict``, ``wall_speedup_low`` and ``wall_speedup_high`` (the two timers' verdicts
    against eager: :func:`tracekit.analysis.comparison.trust.verdicts`), ``host_wait_per_iter_us``
    (GPU idle waiting on the host, per profiled iteration) and ``eager_<x>`` for the eager run's
    figures; speedups, their range and verdicts are the engine's (:func:`compare`), of ok runs
    only (the range of every run). The report words the speedup and the timing's doubts
    (:func:`tracekit.report.worded.worded`). GPU figures of a
    trace without GPU activity, and achieved rates of phases other than a forward call (the
    work stated is one forward call's), are NaN.
    """
    if runs.empty or "mode" not in runs:
        return pd.DataFrame()
    df = runs.drop_duplicates("run").copy()
    for col in ("op", "phase", "latency_median_ms", "kernels_per_iter", "launches_per_iter", "busy_per_iter_us",
                "idle_per_iter_us", "idle_host_wait_us", "iterations", "utilization", "device_name", "has_gpu",
                "peak_memory_MB", "max_abs_diff", "achieved_TFLOPs", "achieved_GBps", "pct_peak_compute",
                "pct_peak_bw", "requested_device", "latency_p10_ms", "latency_p90_ms", "wall_median_ms",
                "wall_p10_ms", "wall_p90_ms"):
        if col not in df:
            df[col] = math.nan
    df["host_wait_per_iter_us"] = df["idle_host_wait_us"] / df["iterations"]
    no_gpu = df["has_gpu"] != True  # noqa: E712  (NaN for runs without a trace)
    df.loc[no_gpu, ["kernels_per_iter", "launches_per_iter", "busy_per_iter_us", "idle_per_iter_us",
                    "host_wait_per_iter_us", "utilization"]] = math.nan
    backward = ~df["phase"].fillna("inference").isin(["inference", "forward"])
    df.loc[backward, ["achieved_TFLOPs", "achieved_GBps", "pct_peak_compute", "pct_peak_bw"]] = math.nan
    df["op"] = df["op"].where(df["op"].notna(), df["model"])
    df["phase"] = df["phase"].fillna("inference")
    engine = compare(runs, "eager", of_op=True).set_index("run")
    of_run = lambda col: df["run"].map(engine[col])  # noqa: E731
    ok = df["status"] == "ok"
    df["workload"] = of_run("workload")
    df["contender"] = [m if model == op else f"{model} ({m})"
                       for m, model, op in zip(df["mode"], df["model"], df["op"])]
    eager = df.set_index("run").reindex(of_run("baseline_run")).set_axis(df.index)
    df["eager_ms"] = eager["latency_median_ms"]
    df["speedup_vs_eager"] = of_run("speedup").where(ok)
    df["wall_speedup_vs_eager"] = of_run("wall_speedup").where(ok)
    df["speedup_inconclusive"] = of_run("inconclusive").fillna(False).astype(bool) & ok
    for col, name in _ENGINE.items():
        df[name] = of_run(col).where(ok, "") if col.endswith("verdict") else of_run(col)
    for col in _PER_ITER:
        df[f"eager_{col}"] = eager[col]
    return df.reset_index(drop=True)


# Published claims: [[claims]] in a suite file, checked against the numbers.

CLAIM_METRICS = {  # a claim's metric -> the column of the comparison it is measured by
    "speedup": "speedup_vs_eager",             # latency speedup over eager (median latencies)
    "kernels_vs_eager": "kernels_ratio",       # kernels executed per iteration, relative to eager
    "launches_vs_eager": "launches_ratio",     # host launches per iteration, relative to eager
}


def check_claims(claims: list[dict], cmp: pd.DataFrame) -> pd.DataFrame:
    """Each claim's measured values and verdict.

    A claim: ``text``, ``metric`` (a key of :data:`CLAIM_METRICS`), ``range``
    [low, high], and filters on run columns (``model``, ``mode``, ``batch``...; a
    value or a list). The eager baselines themselves are not measured (1.0 by
    definition).

    Returns:
        One row per claim: claim (its text), metric (as the claim names it; None if it names
        none), low, high, measured (``((workload, contender, value), ...)`` of the matching runs
        with the metric) and verdict: "consistent" (every matching run in range),
        "contradicted" (none), "partly" (some), "no data" (no matching run with the metric).
        The report words them (:func:`tracekit.report.worded.claims_view`).
    """
    rows = []
    if not cmp.empty:
        cmp = cmp[cmp["contender"] != "eager"]
        cmp = cmp.assign(kernels_ratio=cmp["kernels_per_iter"] / cmp["eager_kernels_per_iter"],
                         launches_ratio=cmp["launches_per_iter"] / cmp["eager_launches_per_iter"])
    for claim in claims:
        column = CLAIM_METRICS.get(claim.get("metric", ""))
        low, high = claim.get("range", [math.nan, math.nan])
        sel = cmp
        for k, want in claim.items():
            if k in ("text", "metric", "range") or sel.empty:
                continue
            want = want if isinstance(want, list) else [want]
            sel = sel[sel[k].isin(want)] if k in sel else sel.iloc[0:0]
        values = sel[column].dropna() if column and not sel.empty else pd.Series(dtype=float)
        inside = values.between(low, high)
        verdict = ("no data" if values.empty else "consistent" if inside.all() else
                   "contradicted" if not inside.any() else "partly")
        measured = tuple((sel.loc[i, "workload"], sel.loc[i, "contender"], v) for i, v in values.items())
        rows.append({"claim": claim.get("text", ""), "metric": claim.get("metric"), "low": low, "high": high,
                     "measured": measured, "verdict": verdict})
    return pd.DataFrame(rows)


@dataclass
class SuiteTables:
    """What a suite's report shows, computed: every table of report.md (its sentences are the
    report's: :mod:`tracekit.report.findings`, :func:`tracekit.report.worded.worded`).

    suite, cells (its run names, grid order), manifests (run name -> the cell's
    run.json), command (the bench command that ran the cells), rewritten_by (the
    command that wrote the report from runs made earlier: ``--report-only``);
    results: :func:`comparison`, in grid order;
    ranked: the runs other than eager with a speedup, fastest first, ``regression``
        True below :data:`SLOWER` (not where the speedup is inconclusive);
    idle: the results with GPU activity; rated: those with achieved rates;
    peak_sources: the documents of the peaks the rates are held to;
    claims: :func:`check_claims` of the suite's claims (empty when it states none).
    """

    suite: Suite
    cells: list[str]
    manifests: dict[str, Manifest]
    results: pd.DataFrame
    ranked: pd.DataFrame
    idle: pd.DataFrame
    rated: pd.DataFrame
    peak_sources: list[str]
    claims: pd.DataFrame
    command: str = ""
    rewritten_by: str = ""

    @classmethod
    def of(cls, suite: Suite, cells: list[str], manifests: dict[str, Manifest], runs: pd.DataFrame,
           command: str = "", rewritten_by: str = "") -> "SuiteTables":
        """The tables of a suite's report from its run rows (``Analysis.runs``)."""
        cmp = comparison(runs)
        ranked = rated = cmp
        if not cmp.empty:
            rank = {name: i for i, name in enumerate(cells)}
            cmp = cmp.sort_values("run", key=lambda r: r.map(rank).fillna(len(rank)), kind="stable")
            ranked = cmp[cmp["contender"] != "eager"].dropna(subset=["speedup_vs_eager"])
            ranked = ranked.sort_values("speedup_vs_eager", ascending=False).assign(
                regression=lambda d: (d["speedup_vs_eager"] < SLOWER) & ~d["speedup_inconclusive"])
            rated = cmp.dropna(subset=["achieved_TFLOPs", "achieved_GBps"], how="all")
        sources = sorted({SOURCES[k] for k in map(key, rated["device_name"].dropna()) if k}) if len(rated) else []
        idle = cmp[cmp["has_gpu"] == True] if len(cmp) else cmp  # noqa: E712
        return cls(suite, cells, manifests, cmp, ranked, idle, rated, sources, check_claims(suite.claims, cmp),
                   command, rewritten_by)

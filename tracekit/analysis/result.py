"""What every report of an analysis shows, computed once: :class:`Tables` (the analysis,
its comparison with a baseline mode, profiler overhead, CPU op changes, module by module
differences). Report formats (:mod:`tracekit.report.formats`) render these tables only."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from tracekit.analysis.metrics import cpu_ops as ops_analysis
from tracekit.analysis.comparison.compare import compare, profiler_overhead
from tracekit.analysis.runs import Analysis


@dataclass
class Tables:
    """What every report of an analysis shows: the analysis, its comparison with
    ``baseline`` (:func:`compare`), each run's profiler overhead (:func:`profiler_overhead`),
    the CPU runs' op-by-op changes (:func:`tracekit.analysis.metrics.cpu_ops.changes`), each run
    against its baseline module by module (``modules``:
    :func:`tracekit.analysis.attribution.run_diff.versus_baseline`) and busy time per kind of module
    per run (``module_busy``: :func:`tracekit.analysis.attribution.run_diff.busy_by_kind`)."""

    analysis: Analysis
    comparison: pd.DataFrame
    overhead: pd.DataFrame
    baseline: str
    cpu_op_changes: pd.DataFrame = field(default_factory=pd.DataFrame)
    modules: pd.DataFrame = field(default_factory=pd.DataFrame)
    module_busy: pd.DataFrame = field(default_factory=pd.DataFrame)

    @classmethod
    def of(cls, analysis: Analysis, baseline: str = "eager") -> "Tables":
        """The tables of ``analysis``; the comparison's findings name the modules that
        contribute most to each run's Δ busy (``top_modules``)."""
        from tracekit.analysis.attribution.run_diff import busy_by_kind, top_modules, versus_baseline

        ops = analysis.table("cpu_ops")
        comparison = compare(analysis.runs, baseline)
        changes = ops_analysis.changes(ops, comparison)
        if len(ops) and len(comparison):  # CPU-only runs: findings made from their ops
            by_run = dict(tuple(changes.groupby("run")))
            comparison["finding"] = [f or ops_analysis.finding(by_run.get(run, pd.DataFrame()))
                                     for f, run in zip(comparison["finding"], comparison["run"])]
        runs = analysis.runs.drop_duplicates("run") if "iterations" in analysis.runs else pd.DataFrame()
        iterations = dict(zip(runs.get("run", []), pd.to_numeric(runs.get("iterations", []), errors="coerce")))
        attribution = analysis.table("attribution")
        modules = versus_baseline(attribution, comparison, iterations)
        if len(modules):
            top = comparison["run"].map({r: top_modules(g) for r, g in modules.groupby("run")}).fillna("")
            comparison["top_modules"] = top
            comparison["finding"] = [f + (f"; by module: {t}" if f and t else "") for f, t in
                                     zip(comparison["finding"], top)]
        return cls(analysis, comparison, profiler_overhead(analysis.runs), baseline,
                   changes, modules, busy_by_kind(attribution, comparison, iterations))

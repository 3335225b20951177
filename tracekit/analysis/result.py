"""The result of an analysis, as every report and the Python API show it: :class:`Result`
(the analysis of every run, its comparison with a baseline mode, profiler overhead, CPU op
changes, module by module differences), computed once. Report formats
(:mod:`tracekit.report.formats`) render it only; :func:`tracekit.analyze` and
:func:`tracekit.profile` return it (as :class:`tracekit.report.shown.ShownResult`, which shows it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tracekit.analysis.comparison.compare import compare, profiler_overhead
from tracekit.analysis.metrics import cpu_ops as ops_analysis
from tracekit.analysis.runs import Analysis
from tracekit.manifest import Manifest


@dataclass(repr=False)
class Result:
    """What ``tracekit analyze`` reports, as DataFrames.

    analysis:       the :class:`tracekit.analysis.runs.Analysis` of every run; its ``runs``,
                    ``tables``, ``errors``, ``failures``, ``skipped`` and ``root`` are also
                    this result's (below).
    comparison:     one row per run against the ``baseline`` run of its workload: speedup
                    (unprofiled median latencies) with speedup_low/high, d_latency_ms =
                    d_busy_per_iter_ms + d_idle_est_ms (ms per iteration, run minus
                    baseline), kernels_ratio, launches_ratio, dominant ("busy" or "idle")
                    and what the report's warnings rest on
                    (:func:`tracekit.analysis.comparison.compare.compare`).
    overhead:       profiled vs unprofiled iteration time of each run
                    (:func:`tracekit.analysis.comparison.compare.profiler_overhead`).
    baseline:       the mode the comparison is against.
    cpu_op_changes: the CPU runs' op-by-op changes against their baseline
                    (:func:`tracekit.analysis.metrics.cpu_ops.changes`).
    modules:        each run against its baseline module by module
                    (:func:`tracekit.analysis.attribution.run_diff.versus_baseline`).
    module_busy:    busy time per kind of module per run
                    (:func:`tracekit.analysis.attribution.run_diff.busy_by_kind`).
    manifests:      the run.json of each run :func:`tracekit.profile` made, in mode order
                    ([] from :func:`tracekit.analyze`).

    From the analysis: ``runs`` (one row per trace file, or per run without a trace:
    identity, status and reason, the manifest's figures and the trace's, units in the column
    names: µs ``_us``, ms ``_ms``, s ``_s``, MB ``_MB``), ``tables`` (the per-trace tables by
    name: iterations, kernels, kernel_classes, idle_histogram, launch_apis, streams,
    transfers, timeline, collectives, critical_path...; of distributed jobs: jobs, ranks,
    job_balance, collective_calls, stragglers), ``errors`` ((path, problem, exit code) of
    each file that could not be read or analyzed), ``failures`` ((path, analysis, reason,
    traceback) of each analysis that raised: a bug in tracekit, the other figures stand),
    ``skipped`` and ``root`` (the folder run names are relative to).

    ``result["kernels"]`` is ``result.tables["kernels"]`` (also "runs", "comparison",
    "overhead", "cpu_op_changes", "modules", "module_busy"). It writes no sentence: the report
    layer adds the texts a reader sees to its tables (:func:`tracekit.report.worded.worded`: the
    comparison's finding, warning and top_modules, the runs' evidence, integrity_detail, note and
    timing_warning...), so what :func:`tracekit.analyze` and :func:`tracekit.profile` return is its
    report-layer subclass :class:`tracekit.report.shown.ShownResult`, which a notebook shows as its
    speedup table and ``print()`` as a short summary.
    """

    analysis: Analysis
    comparison: pd.DataFrame
    overhead: pd.DataFrame
    baseline: str = "eager"
    cpu_op_changes: pd.DataFrame = field(default_factory=pd.DataFrame)
    modules: pd.DataFrame = field(default_factory=pd.DataFrame)
    module_busy: pd.DataFrame = field(default_factory=pd.DataFrame)
    manifests: list[Manifest] = field(default_factory=list)

    FRAMES = ("runs", "comparison", "overhead", "cpu_op_changes", "modules", "module_busy")

    @classmethod
    def of(cls, analysis: Analysis, baseline: str = "eager") -> "Result":
        """The result of ``analysis`` compared with ``baseline``."""
        from tracekit.analysis.attribution.run_diff import busy_by_kind, versus_baseline

        comparison = compare(analysis.runs, baseline)
        changes = ops_analysis.changes(analysis.table("cpu_ops"), comparison)
        runs = analysis.runs.drop_duplicates("run") if "iterations" in analysis.runs else pd.DataFrame()
        iterations = dict(zip(runs.get("run", []), pd.to_numeric(runs.get("iterations", []), errors="coerce")))
        attribution = analysis.table("attribution")
        modules = versus_baseline(attribution, comparison, iterations)
        return cls(analysis, comparison, profiler_overhead(analysis.runs), baseline, changes, modules,
                   busy_by_kind(attribution, comparison, iterations))

    @property
    def runs(self) -> pd.DataFrame:
        return self.analysis.runs

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return self.analysis.tables

    @property
    def errors(self) -> list[tuple[str, str, int]]:
        return self.analysis.errors

    @property
    def failures(self) -> list[tuple[str, str, str, str]]:
        return self.analysis.failures

    @property
    def skipped(self) -> list[tuple[str, str]]:
        return self.analysis.skipped

    @property
    def root(self) -> Path:
        return Path(self.analysis.root)

    def __getitem__(self, name: str) -> pd.DataFrame:
        """A frame of this result (``runs``, ``comparison``...) or a table of the analysis
        (:meth:`tracekit.analysis.runs.Analysis.table`: empty where no trace gave it; KeyError for a
        name no analysis makes)."""
        if name in self.FRAMES:
            return getattr(self, name)
        return self.analysis.table(name)

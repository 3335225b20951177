"""Diffs of analyzed runs (issue 20): ``tracekit diff`` of two runs or of every pair of
modes of each workload under a folder, and each mode against its baseline for the
reports of ``tracekit analyze``. The per-module arithmetic is
:func:`tracekit.analysis.attribution.module_diff.diff`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tracekit.analysis.attribution.gpu_ops import UNATTRIBUTED
from tracekit.analysis.attribution.module_diff import diff, totals
from tracekit.analysis.attribution.modules import DEFAULT_DEPTH, KEYS, SUMS, cut
from tracekit.analysis.metrics.integrity import COLUMNS as INTEGRITY
from tracekit.trace import TraceError

CHECKED = ("d_busy_us", "d_kernels", "d_launches", "d_idle_us")
# What two runs of one workload share (their run.json): a diff of runs that differ in one of
# these compares workloads, not modes, and says so (as `tracekit analyze` flags another device).
IDENTITY = (("model", "model"), ("batch", "batch"), ("dtype", "dtype"), ("device_type", "device"))


def mismatch(row_a: dict, row_b: dict) -> tuple[tuple[str, object, object], ...]:
    """The :data:`IDENTITY` fields in which two run rows differ, each ``(name, A's, B's)``:
    ``(("batch", 8.0, 1.0), ("device", "cuda", "cpu"))``; a field unknown on either side (a trace
    without run.json) is left out."""
    def known(v) -> bool:
        return v is not None and v == v and v != ""

    return tuple((name, row_a[col], row_b[col]) for col, name in IDENTITY
                 if known(row_a.get(col)) and known(row_b.get(col)) and row_a[col] != row_b[col])


@dataclass
class RunDiff:
    """Two runs compared module by module.

    a, b: the runs' names; workload: theirs ("" when unknown); iterations_a/b:
    profiled iterations; coverage_a/b: share of GPU busy time attributed to a
    module; modules, ops: :func:`diff` by module and by (module, op) at ``depth``;
    totals: :func:`totals`; sum_error: for each of ``CHECKED``, |sum of the module
    rows - the runs' total| (0 up to float rounding: the rows split the runs exactly);
    has_gpu: either trace holds GPU ops (else there is nothing to attribute);
    mismatch: the run.json fields the two runs differ in (:func:`mismatch`), () if none; the
    report says so (:mod:`tracekit.report.formats.diff`);
    integrity: each run's integrity checks (side "A" or "B", trace: the run as named in ``a``/``b``,
    then the columns of :func:`tracekit.analysis.metrics.integrity.checks`), as ``tracekit analyze``
    checks them; failures: (path, analysis, reason, traceback) of each analysis of either run that
    raised (a bug in tracekit: the figures it gives stand empty).
    """

    a: str
    b: str
    depth: int
    iterations_a: float
    iterations_b: float
    coverage_a: float
    coverage_b: float
    modules: pd.DataFrame
    ops: pd.DataFrame
    totals: dict = field(default_factory=dict)
    workload: str = ""
    sum_error: dict = field(default_factory=dict)
    has_gpu: bool = True
    mismatch: tuple = ()
    integrity: pd.DataFrame = field(default_factory=pd.DataFrame)
    failures: list = field(default_factory=list)

    @classmethod
    def of(cls, a: str, b: str, long_a: pd.DataFrame, long_b: pd.DataFrame, row_a: dict, row_b: dict,
           depth: int = DEFAULT_DEPTH, workload: str = "", checks: tuple[pd.DataFrame, pd.DataFrame] = (),
           failures: list | None = None) -> "RunDiff":
        """The diff of two runs from their attribution rows and run rows (iterations,
        attributed_busy_share, has_gpu, and the :data:`IDENTITY` fields); ``checks``: each run's
        integrity checks (A's, B's), ``failures``: their analyses that raised."""
        na, nb = float(row_a.get("iterations", float("nan"))), float(row_b.get("iterations", float("nan")))
        modules, total = diff(long_a, long_b, na, nb, depth), totals(long_a, long_b, na, nb)
        integrity = pd.concat([c.assign(side=side, trace=name) for side, name, c in zip("AB", (a, b), checks)],
                              ignore_index=True) if checks else pd.DataFrame()
        return cls(a, b, depth, na, nb, float(row_a.get("attributed_busy_share", float("nan"))),
                   float(row_b.get("attributed_busy_share", float("nan"))), modules,
                   diff(long_a, long_b, na, nb, depth, by=("module", "op")), total, workload,
                   {c: abs(float(modules[c].sum()) - total[c]) for c in CHECKED},
                   bool(row_a.get("has_gpu") or row_b.get("has_gpu")), mismatch(row_a, row_b),
                   integrity[["side", "trace", *INTEGRITY]] if len(integrity) else integrity, list(failures or []))


def _rows(attribution: pd.DataFrame, runs: pd.DataFrame, run: str) -> tuple[pd.DataFrame, dict]:
    """(attribution rows of the first trace of ``run``, its run row)."""
    row = runs[runs["run"] == run].iloc[0]
    long = attribution[(attribution["run"] == run) & (attribution["trace"] == row["trace"])] if len(attribution) \
        else attribution
    return (long.drop(columns=["run", "trace"]) if len(long) else pd.DataFrame(columns=KEYS + SUMS)), row.to_dict()


def _checks(analysis, run: str) -> pd.DataFrame:
    """The integrity checks of the first trace of ``run`` in an analysis (its ``integrity`` table)."""
    checks = analysis.table("integrity")
    if checks.empty:
        return pd.DataFrame(columns=INTEGRITY)
    first = checks.loc[checks["run"] == run, "trace"]
    return checks[(checks["run"] == run) & (checks["trace"] == (first.iloc[0] if len(first) else ""))][INTEGRITY]


def diff_runs(path_a: Path | str, path_b: Path | str, depth: int = DEFAULT_DEPTH,
              iterations: int | None = None) -> RunDiff:
    """Analyze two runs (run folders or trace files) and diff them.

    ``iterations``: iterations of a trace with neither markers nor run.json.

    Raises:
        TraceError: a path is missing or its trace unreadable (the error's exit code; INTERNAL where
            tracekit failed on it), or holds no trace or several (USAGE).
    """
    from tracekit.analysis.options import AnalysisOptions
    from tracekit.analysis.runs import analyze
    from tracekit.errors import ExitCode

    sides, checks, failures = [], [], []
    for path in (path_a, path_b):
        result = analyze(path, AnalysisOptions(iterations=iterations))
        if result.errors:
            p, problem, code = result.errors[0]
            raise TraceError(p, problem, code)
        traced = result.runs[result.runs["trace"].fillna("") != ""] if "trace" in result.runs else result.runs
        if len(traced) != 1:
            raise TraceError(path, f"holds {len(traced)} traces; give one run folder or one trace file",
                             ExitCode.USAGE)
        sides.append(_rows(result.table("attribution"), traced, traced["run"].iloc[0]))
        checks.append(_checks(result, traced["run"].iloc[0]))
        failures += result.failures
    (la, ra), (lb, rb) = sides
    return RunDiff.of(str(path_a), str(path_b), la, lb, ra, rb, depth, checks=tuple(checks), failures=failures)


@dataclass
class DiffSet:
    """Every pair of modes of each workload diffed (``tracekit diff FOLDER``).

    diffs: the :class:`RunDiff` of each pair; min_coverage: the attributed share of
    GPU busy time a run should reach (issue 20's acceptance: 0.95); errors: (path, problem, exit
    code) of each file under the folder that could not be read or analyzed (its runs are in no
    pair); failures: the analyses that raised, as :attr:`RunDiff.failures`.
    """

    diffs: list[RunDiff]
    min_coverage: float = 0.95
    errors: list = field(default_factory=list)
    failures: list = field(default_factory=list)

    def checks(self) -> pd.DataFrame:
        """One row per pair: workload, a, b, coverage_a, coverage_b, covered (both at
        least ``min_coverage``), d_busy_us, d_kernels, d_launches (per iteration),
        sum_error (the largest |rows - total| over ``CHECKED``)."""
        rows = [{"workload": d.workload, "a": d.a, "b": d.b, "coverage_a": d.coverage_a, "coverage_b": d.coverage_b,
                 "covered": min(d.coverage_a, d.coverage_b) >= self.min_coverage,
                 **{c: d.totals[c] for c in ("d_busy_us", "d_kernels", "d_launches")},
                 "sum_error": max(d.sum_error.values()) if d.sum_error else float("nan")} for d in self.diffs]
        return pd.DataFrame(rows, columns=["workload", "a", "b", "coverage_a", "coverage_b", "covered", "d_busy_us",
                                           "d_kernels", "d_launches", "sum_error"])


def diff_pairs(path: Path | str, depth: int = DEFAULT_DEPTH, iterations: int | None = None,
               baseline: str = "eager", min_coverage: float = 0.95) -> DiffSet:
    """Every pair of modes of each workload under ``path`` (a folder of runs), A before B
    in the comparison's order (the baseline first, then by run name), with the files that could
    not be read and the analyses that raised (``min_coverage``: :class:`DiffSet`'s).

    Raises:
        TraceError: ``path`` does not exist.
    """
    from tracekit.analysis.comparison.compare import compare
    from tracekit.analysis.options import AnalysisOptions
    from tracekit.analysis.runs import analyze

    analysis = analyze(path, AnalysisOptions(iterations=iterations))
    comparison = compare(analysis.runs, baseline)
    ok = comparison[comparison["status"] == "ok"] if len(comparison) else comparison
    attribution = analysis.table("attribution")
    out = []
    for workload, group in ok.groupby("workload", sort=False):
        for a, b in itertools.combinations(group["run"], 2):
            (la, ra), (lb, rb) = _rows(attribution, analysis.runs, a), _rows(attribution, analysis.runs, b)
            out.append(RunDiff.of(a, b, la, lb, ra, rb, depth, workload, (_checks(analysis, a), _checks(analysis, b))))
    return DiffSet(out, min_coverage, analysis.errors, analysis.failures)


def pattern(module: str) -> str:
    """A module path with its numeric parts as ``*`` (``blocks.3.mlp`` -> ``blocks.*.mlp``):
    the repeated layers of a model as one kind; the root module (``""``, or a missing value as
    a table read back from CSV has it) is returned as it is."""
    if not isinstance(module, str) or not module:
        return module
    return ".".join("*" if part.isdigit() else part for part in module.split("."))


def versus_baseline(attribution: pd.DataFrame, comparison: pd.DataFrame, iterations: dict[str, float],
                    depth: int = DEFAULT_DEPTH) -> pd.DataFrame:
    """Each compared run against its baseline, module by module (:func:`diff`).

    Args:
        attribution: ``Analysis.table("attribution")`` (rows tagged with run and trace;
            a run's first trace is used).
        comparison: :func:`tracekit.analysis.comparison.compare.compare`'s table (workload, mode,
            run, baseline_run).
        iterations: run -> profiled iterations.

    Returns:
        :func:`diff`'s rows with workload, mode, run and baseline_run first, for each
        run that, with its baseline, has attribution rows, some attributed to a module.
    """
    if attribution.empty or comparison.empty:
        return pd.DataFrame()
    first = attribution.groupby("run")["trace"].transform("first") == attribution["trace"]
    by_run = {r: g.drop(columns=["run", "trace"]) for r, g in attribution[first].groupby("run")}
    parts = []
    for r in comparison.to_dict("records"):
        run, base = r["run"], r.get("baseline_run") or ""
        attributed = any((by_run[r]["module"] != UNATTRIBUTED).any() for r in (run, base) if r in by_run)
        if run != base and run in by_run and base in by_run and attributed:
            d = diff(by_run[base], by_run[run], iterations.get(base), iterations.get(run), depth)
            parts.append(d.assign(workload=r["workload"], mode=r["mode"], run=run, baseline_run=base))
    if not parts:
        return pd.DataFrame()
    out = pd.concat(parts, ignore_index=True)
    return out[["workload", "mode", "run", "baseline_run"] + [c for c in out.columns if c not in
                                                               ("workload", "mode", "run", "baseline_run")]]


def busy_by_kind(attribution: pd.DataFrame, comparison: pd.DataFrame, iterations: dict[str, float],
                 depth: int = DEFAULT_DEPTH) -> pd.DataFrame:
    """GPU busy time, kernels and launches per iteration of each compared run with some
    attributed time, per kind of module (:func:`pattern` of the path cut to ``depth``):
    workload, mode, run, module, busy_per_iter_us, kernels_per_iter, launches_per_iter."""
    if attribution.empty or comparison.empty:
        return pd.DataFrame()
    first = attribution.groupby("run")["trace"].transform("first") == attribution["trace"]
    a = attribution[first & attribution["run"].isin(comparison["run"])]
    a = a[a.groupby("run")["module"].transform(lambda m: (m != UNATTRIBUTED).any())]
    a = a.assign(module=cut(a["module"], depth).map(pattern), n=a["run"].map(iterations).fillna(1.0))
    for col, name in (("busy_us", "busy_per_iter_us"), ("kernels", "kernels_per_iter"),
                      ("launches", "launches_per_iter")):
        a[name] = a[col] / a["n"]
    out = a.groupby(["run", "module"], as_index=False)[["busy_per_iter_us", "kernels_per_iter",
                                                        "launches_per_iter"]].sum()
    return comparison[["workload", "mode", "run"]].merge(out, on="run")

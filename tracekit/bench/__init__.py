"""Run the cells of suites, each in its own process: resumable, with progress, failures as rows.

A cell in a fresh process gets a clean CUDA context and allocator, its own
compile (no in-memory cache from an earlier cell), and a crash of one cell
(a segfault in a backend) cannot take the others with it.

Layout: a suite's runs go to ``<traces>/<suite name>/<label>/<mode>/`` (trace,
``run.json``, and ``cell.log``, the cell's own output), its report to
``<reports>/<suite name>/``.

Resuming: a cell is *done* when its ``run.json`` holds a final status
(:data:`FINAL`) written for the very same spec. The runner writes ``run.json``
atomically, "running" first and the final status last, after the trace; so a
cell killed at any point is simply not done, and the next run redoes it, and
only it. A "skipped" cell is not done either: it could not run here (an unknown
model, mode or field, a backend, phase or GPU missing: checked before each run,
without a process) or the time limit came first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from tracekit.analysis.comparison.suite_comparison import SuiteTables
from tracekit.analysis.result import Result
from tracekit.analysis.runs import Analysis
from tracekit.analysis.runs import analyze as run_analysis
from tracekit.bench.cells import run_cell
from tracekit.bench.plan import FINAL, Planned, grid_table, plan, plan_all, suite_traces
from tracekit.bench.progress import run_planned
from tracekit.errors import Interrupted
from tracekit.manifest import Manifest
from tracekit.manifest.suite_toml import Suite
from tracekit.report import write_reports

__all__ = ["FINAL", "Interrupted", "Planned", "SuiteResult", "bench", "grid_table", "plan", "plan_all",
           "recorded_device", "report_only", "run_cell", "run_planned", "suite_traces", "write_suite_report"]


@dataclass
class SuiteResult:
    """A suite after a bench run: its plan, the cells' final manifests and the analysis
    of its runs with their comparison."""

    suite: Suite
    planned: list[Planned]
    manifests: dict[str, Manifest]
    tables: Result
    report_dir: Path
    elapsed_s: float = 0.0
    ran: list[str] = field(default_factory=list)

    @property
    def analysis(self) -> Analysis:
        return self.tables.analysis


def bench(suites: list[Suite], traces: Path | str = "traces", reports: Path | str = "reports",
          only: tuple[str, ...] = (), force: bool = False, timeout_s: float | None = None,
          max_minutes: float | None = None, command: str = "", console: Console | None = None,
          report_options: dict | None = None) -> list[SuiteResult]:
    """Run suites one after the other, then analyze each and write its report.

    Time: ``max_minutes`` bounds the whole call; a suite's own ``max_minutes``
    bounds that suite, plus whatever earlier suites with a budget left unused.
    Cells past a limit become "skipped" rows (and run on the next call). Each
    suite's report is written as soon as its cells are done, to
    ``reports/<suite name>/``: summary.md, runs.csv, runs.json and report.md.
    ``timeout_s`` (else the suite's ``timeout_s``) limits one cell.
    ``report_options``: options of the report formats (:func:`tracekit.report.write_reports`).

    Raises:
        SuiteError: a suite whose cells collide, or a pattern of ``only`` that matches no
            cell (see :func:`plan_all`), before anything runs.
        Interrupted: Ctrl-C, or SIGTERM as the CLI takes it (finished cells are kept).
    """
    start = time.monotonic()
    total_deadline = None if max_minutes is None else start + 60 * max_minutes
    plans = plan_all(suites, traces, only, force)
    results, saved = [], 0.0
    for suite, planned in zip(suites, plans):
        t0 = time.monotonic()
        own = None if suite.max_minutes is None else t0 + 60 * suite.max_minutes + saved
        deadline = min((d for d in (total_deadline, own) if d is not None), default=None)
        manifests, ran = run_planned(suite, planned, traces, timeout_s or suite.timeout_s, deadline, console)
        if own is not None:
            saved = max(0.0, own - time.monotonic())
        results.append(write_suite_report(suite, planned, manifests, traces, reports, command,
                                          time.monotonic() - t0, ran, report_options=report_options))
    return results


def write_suite_report(suite: Suite, planned: list[Planned], manifests: dict[str, Manifest], traces: Path | str,
                       reports: Path | str, command: str = "", elapsed_s: float = 0.0,
                       ran: list[str] | None = None, rewritten_by: str = "",
                       report_options: dict | None = None) -> SuiteResult:
    """Analyze the suite's runs and write its report folder; return the :class:`SuiteResult`.
    (``command``, ``rewritten_by``: see :class:`tracekit.analysis.comparison.suite_comparison.SuiteTables`;
    ``report_options``: see :func:`tracekit.report.write_reports`.)"""
    root = suite_traces(traces, suite)
    root.mkdir(parents=True, exist_ok=True)
    tables = Result.of(run_analysis(root, only={p.name for p in planned if p.name in manifests}))
    out = Path(reports) / suite.name
    write_reports(tables, out, source=str(root), **(report_options or {}))
    write_reports(SuiteTables.of(suite, [p.name for p in planned], manifests, tables.analysis.runs, command,
                                 rewritten_by), out)
    return SuiteResult(suite, planned, manifests, tables, out, elapsed_s, ran or [])


def recorded_device(traces: Path | str, suite: Suite) -> str | None:
    """The default device of the machine that ran the suite's cells, from their run.json
    files: "cuda" if it had a CUDA driver, else "cpu"; None before any cell ran."""
    found = None
    for path in sorted(suite_traces(traces, suite).glob("**/run.json")):
        env = (Manifest.read(path) or Manifest()).environment
        if env:
            if env.cuda_driver:
                return "cuda"
            found = "cpu"
    return found


def report_only(suites: list[Suite], traces: Path | str = "traces", reports: Path | str = "reports",
                command: str = "", report_options: dict | None = None) -> list[SuiteResult]:
    """Write each suite's report from the runs already under ``traces``; run nothing.

    For results copied from another machine (the GPU box's suite folder on a
    laptop) or re-analyzed after a change: cells are named as on the machine
    that ran them (:func:`recorded_device`), and a cell without a run.json is
    "not run" in the report.
    """
    results = []
    for suite in suites:
        planned = plan(suite, traces, device=recorded_device(traces, suite))
        root = suite_traces(traces, suite)
        manifests = {p.name: m for p in planned if (m := Manifest.read(root / p.name))}
        results.append(write_suite_report(suite, planned, manifests, traces, reports, rewritten_by=command,
                                          report_options=report_options))
    return results

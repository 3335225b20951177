"""The run table and the comparison on the terminal (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tracekit.analysis.runs import Analysis
from tracekit.report.columns import (DETAILS, IDLE, PROFILED, SPEEDUP, comparison_view, evidence, headline,
                                     notes)
from tracekit.report.content import Tables, findings
from tracekit.report.jobs import job_lines, job_tables


_TEXT_COLUMNS = ("run", "status", "device", "verdict", "workload", "mode", "job", "per rank", "backend")


def _table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title, show_lines=False)
    for h in headers:
        table.add_column(h, overflow="fold", justify="left" if h in _TEXT_COLUMNS else "right")
    for r in rows:
        table.add_row(*r)
    return table


def print_runs(analysis: Analysis, console: Console | None = None) -> None:
    """Print the run table, the idle-time table with each verdict's evidence, then
    notes and any unreadable files."""
    # Off a terminal (a pipe, CI) rich assumes 80 columns; a wide table reads better unwrapped.
    console = console or Console(width=None if Console().is_terminal else 220)
    console.print(_table("tracekit: runs", *headline(analysis.runs)))
    gpu_runs = analysis.runs[analysis.runs["has_gpu"].fillna(False).astype(bool)] \
        if "has_gpu" in analysis.runs else analysis.runs.iloc[:0]
    if len(gpu_runs):
        console.print(_table("GPU idle time by cause (share of the active span)", *headline(gpu_runs, IDLE)))
        for line in evidence(gpu_runs):
            console.print(f"  {line}", highlight=False)
    for title, df, spec in job_tables(analysis):
        console.print(_table(title, *headline(df, spec)))
    for line in job_lines(analysis):
        console.print(f"  {line}", highlight=False)
    for line in notes(analysis.runs):
        console.print(f"  note: {line}", highlight=False)
    for path, problem, _ in analysis.errors:
        console.print(f"[red]unreadable[/red] {path}: {problem}", highlight=False)
    for path, why in analysis.skipped:
        console.print(f"[dim]skipped {path}: {why}[/dim]", highlight=False)


def print_comparison(t: Tables, console: Console | None = None, detail: bool = False) -> None:
    """Print the speedup table (each mode vs the baseline, with Δ busy / Δ idle), its
    findings and warnings, and the runs whose profiler overhead is over 10%;
    with ``detail`` also the profiled-window split by cause and the details table."""
    console = console or Console(width=None if Console().is_terminal else 220)
    comp = comparison_view(t.comparison)
    if comp.empty:
        console.print("no runs with a run.json to compare (model and mode unknown)", highlight=False)
        return
    console.print(_table(f"speedup over {t.baseline}, and why (latency unprofiled; Δ per iteration)",
                         *headline(comp, SPEEDUP)))
    for workload, mode, finding, warning in findings(comp):
        console.print(f"  {workload} {mode}: {finding}" + (f" [bold red]warning:[/bold red] {warning}" if warning else ""),
                      highlight=False)
    if detail:
        gpu = comp[comp["busy_per_iter_ms"].notna()]
        if len(gpu):
            console.print(_table("inside the profiled window (ms per iteration)", *headline(gpu, PROFILED)))
        console.print(_table("work, compile time, memory, accuracy", *headline(comp, DETAILS)))
    flagged = t.overhead[t.overhead["flagged"]]
    if len(flagged):
        console.print("  profiler overhead > 10% (profiled vs unprofiled iteration): "
                      + ", ".join(f"{r} {o:+.0%}" for r, o in zip(flagged["run"], flagged["profiler_overhead"]))
                      + "; their profiled figures (idle time above all) are inflated", highlight=False)

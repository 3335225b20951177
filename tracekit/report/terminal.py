"""The run table on the terminal (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tracekit.analysis.runs import Analysis
from tracekit.report.columns import IDLE, evidence, headline, notes


def _table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title, show_lines=False)
    for h in headers:
        table.add_column(h, overflow="fold",
                         justify="left" if h in ("run", "status", "device", "verdict") else "right")
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
    for line in notes(analysis.runs):
        console.print(f"  note: {line}", highlight=False)
    for path, problem, _ in analysis.errors:
        console.print(f"[red]unreadable[/red] {path}: {problem}", highlight=False)
    for path, why in analysis.skipped:
        console.print(f"[dim]skipped {path}: {why}[/dim]", highlight=False)

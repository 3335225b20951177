"""The run table on the terminal (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tracekit.analysis.runs import Analysis
from tracekit.report.columns import headline, notes


def print_runs(analysis: Analysis, console: Console | None = None) -> None:
    """Print one row per run, then any unreadable files."""
    # Off a terminal (a pipe, CI) rich assumes 80 columns; a wide table reads better unwrapped.
    console = console or Console(width=None if Console().is_terminal else 220)
    headers, rows = headline(analysis.runs)
    table = Table(title="tracekit: runs", show_lines=False)
    for h in headers:
        table.add_column(h, overflow="fold", justify="left" if h in ("run", "status", "device", "note") else "right")
    for r in rows:
        table.add_row(*r)
    console.print(table)
    for line in notes(analysis.runs):
        console.print(f"  note: {line}", highlight=False)
    for path, problem, _ in analysis.errors:
        console.print(f"[red]unreadable[/red] {path}: {problem}", highlight=False)
    for path, why in analysis.skipped:
        console.print(f"[dim]skipped {path}: {why}[/dim]", highlight=False)

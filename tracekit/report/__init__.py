"""Reports from metric tables: terminal tables, summary.md, index.html, plots, CSV and JSON.

Reports never re-read traces; they take an :class:`tracekit.analysis.runs.Analysis`.
"""

from tracekit.report.content import Tables
from tracekit.report.files import write_reports
from tracekit.report.terminal import print_comparison, print_runs

__all__ = ["Tables", "print_comparison", "print_runs", "write_reports"]

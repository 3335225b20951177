"""Reports from metric tables: terminal tables, summary.md, index.html, plots, CSV and JSON.

Reports never re-read traces or call analyses; they take finished tables
(:class:`tracekit.analysis.compare.Tables`, :class:`tracekit.analysis.runs.Analysis`).
"""

from tracekit.report.files import write_reports
from tracekit.report.terminal import print_comparison, print_runs

__all__ = ["print_comparison", "print_runs", "write_reports"]

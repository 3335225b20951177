"""Reports from metric tables: terminal table, summary.md, runs.csv, runs.json.

Reports never re-read traces; they take an :class:`tracekit.analysis.runs.Analysis`.
"""

from tracekit.report.files import write_reports
from tracekit.report.terminal import print_runs

__all__ = ["print_runs", "write_reports"]

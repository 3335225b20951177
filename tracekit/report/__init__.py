"""Reports from finished tables: one format per module of ``tracekit/report/formats/``,
each a registered renderer (:mod:`tracekit.report.base`): the terminal, plots/*.png,
summary.md, index.html, runs.csv/comparison.csv/runs.json, a suite's report.md and the
counters report. Reports never re-read traces or call analyses.

Importing this package imports every format module, which registers it.
"""

import importlib
import pkgutil

from tracekit.report import formats
from tracekit.report.base import RENDERERS, Renderer, Report, print_reports, register, write_reports

for _module in sorted(m.name for m in pkgutil.iter_modules(formats.__path__)):
    importlib.import_module(f"{formats.__name__}.{_module}")

__all__ = ["RENDERERS", "Renderer", "Report", "print_reports", "register", "write_reports"]

"""Reports from finished tables: one format per module of ``tracekit/report/formats/``,
each a registered renderer (:mod:`tracekit.report.base`): the terminal, plots/*.png,
summary.md, index.html, runs.csv/comparison.csv/runs.json, a suite's report.md, the
counters report, a diff, a what-if, a run's status. Reports never re-read traces or call
analyses.

The registry imports every format module (each registers itself) when first used:
:func:`write_reports`, :func:`print_reports`, or ``RENDERERS`` read from this package. So
a module of report/ used alone (the lines of ``tracekit models``) imports no format.
"""

from tracekit.report.base import Renderer, Report, print_reports, register, write_reports

__all__ = ["RENDERERS", "Renderer", "Report", "print_reports", "register", "write_reports"]


def __getattr__(name: str):
    """``RENDERERS``: the registry, every format loaded (:func:`tracekit.report.base.load_formats`)."""
    if name == "RENDERERS":
        from tracekit.report.base import RENDERERS, load_formats

        load_formats()
        return RENDERERS
    raise AttributeError(f"module 'tracekit.report' has no attribute {name!r}")

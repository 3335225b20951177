"""Report formats as plug-ins: the renderer base and its registry (as pyinstrument's ``renderers/base.py``).

A report format is one module in ``tracekit/report/formats/`` holding one
:class:`Renderer` subclass, registered at import with :func:`register`;
:func:`load_formats` imports every module there (the first time the registry is
used), so adding a format is adding its file (and its test). A renderer takes
finished tables, never traces, and calls no analysis:

* :class:`tracekit.analysis.result.Result`: an analysis and its comparison
  (``tracekit analyze``, ``tracekit compare``, a suite's summary);
* :class:`tracekit.analysis.comparison.suite_comparison.SuiteTables`: a suite's report.md;
* :class:`tracekit.analysis.counters.CountersResult`: hardware counters;
* :class:`tracekit.analysis.attribution.run_diff.RunDiff` and ``DiffSet``: ``tracekit diff``;
* :class:`tracekit.analysis.critical_path.prediction.Prediction`: ``tracekit whatif``;
* :class:`tracekit.manifest.Manifest`: a run's status as ``tracekit trace`` prints it.

:func:`write_reports` runs the ``write`` of every registered format that
takes the data, by ``order`` (plots come before the pages that show them);
:func:`print_reports` runs their ``show``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import ClassVar

from rich.console import Console


@dataclass
class Report:
    """One report being made: its data, where its files go, and what its formats wrote so far.

    data:    the finished tables (see the module docstring), with their texts
             (:func:`tracekit.report.worded.worded`: every format sees the same columns).
    out:     the report folder.
    source:  what the report is of, for its title (the traces' path; the counters' run).
    plots:   workload -> PNG files, as the plots format wrote them ("" -> the overview).
    written: every file written so far.
    options: format options given to :func:`write_reports` or :func:`print_reports`.
    """

    data: object
    out: Path
    source: str = ""
    plots: dict[str, list[Path]] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        from tracekit.report.worded import worded  # (it imports the records, and pandas)

        self.data = worded(self.data)


class Renderer:
    """One report format. A subclass sets ``name`` and ``takes`` (the type of the data it
    renders), ``order`` if it must come before or after others of its data (lower
    first; ties by name), and overrides :meth:`write`, :meth:`show` or both."""

    name: ClassVar[str] = ""
    takes: ClassVar[type] = object
    order: ClassVar[int] = 50

    def write(self, report: Report) -> list[Path]:
        """Write this format's files under ``report.out`` (atomically) and return them; none by default."""
        return []

    def show(self, report: Report, console: Console) -> None:
        """Print this format on the terminal; nothing by default."""


RENDERERS: dict[str, Renderer] = {}
WIDE = 10_000  # the console's width under ``wide``: no table is narrowed


def register(cls: type[Renderer]) -> type[Renderer]:
    """Class decorator: add an instance of ``cls`` to :data:`RENDERERS` under its name."""
    RENDERERS[cls.name] = cls()
    return cls


@cache
def load_formats() -> None:
    """Import every module of ``tracekit/report/formats/`` (each registers its renderer), once."""
    import importlib
    import pkgutil

    from tracekit.report import formats

    for module in sorted(m.name for m in pkgutil.iter_modules(formats.__path__)):
        importlib.import_module(f"{formats.__name__}.{module}")


def _taking(data) -> list[Renderer]:
    """The registered formats that render ``data``, in the order they run."""
    load_formats()
    return sorted((r for r in RENDERERS.values() if isinstance(data, r.takes)), key=lambda r: (r.order, r.name))


def write_reports(data, out: Path | str, source: str = "", **options) -> list[Path]:
    """Write every registered format that takes ``data`` under ``out``; return the files written.

    ``options``: format options, e.g. ``html_plots="link"`` (see each format's module).
    """
    report = Report(data, Path(out), source, options=options)
    for renderer in _taking(data):
        report.written += renderer.write(report)
    return report.written


def terminal(wide: bool = False) -> Console:
    """A console on stdout, as wide as ``COLUMNS`` or the terminal, else 100 columns
    (:func:`tracekit.report.fit.terminal_width`); ``wide``: as wide as any table (the
    terminal wraps its lines)."""
    from tracekit.report.fit import terminal_width

    return Console(width=WIDE if wide else terminal_width())


def print_reports(data, source: str = "", console: Console | None = None, **options) -> None:
    """Print every registered format that takes ``data`` and has a terminal form.

    ``options``: format options, e.g. ``detail=True``, ``wide=True`` (every column, whatever
    the width: :mod:`tracekit.report.fit`; see each format's module).
    """
    report = Report(data, Path("."), source, options=options)
    console = console or terminal(options.get("wide", False))
    for renderer in _taking(data):
        renderer.show(report, console)

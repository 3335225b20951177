"""The analyses of one trace as plug-ins: what each declares, and the registry it is entered in
(as :mod:`tracekit.report.base` is for report formats).

An analysis is one module of ``metrics/``, ``attribution/``, ``distributed/`` or
``critical_path/`` holding its functions and, beside them, its declaration: a function of
:class:`Inputs` returning an :class:`Output`, under ``@register(name, reads=..., needs=...,
columns=..., tables=...)``. :mod:`tracekit.analysis.trace_analysis` imports every module of
those packages, so that each registers, and runs the registered analyses on every trace
(:func:`~tracekit.analysis.trace_analysis.analyze_trace`): in the order their declarations
allow, each isolated (one that raises is a line of the report and leaves its declared default;
the analyses that need its result are not run), the shared tables and the results dropped once
their last reader has run. A declaration says:

* ``reads``: the event tables it reads (:data:`EVENT_TABLES`) and the tables derived from them
  that analyses share (:data:`SHARED_TABLES`: the runner frees one after its last reader);
* ``needs``: the analyses whose results it cannot do without: where one failed (or was not run)
  this one is not run and stands with its ``default``; ``uses``: those whose results it takes as
  they stand (their defaults where they failed); both run before it. Every analysis reads the
  ``required`` ones' row (the summary: the headline figures, ``iterations``...);
* what it produces: ``columns`` of the run row with their units (:data:`UNITS`; the unit is in the
  name: ``_us``, ``_ms``...), ``tables`` by name, and a ``value`` for the analyses that read it;
* ``order``: where its columns and tables go in the row and the result (lower first, ties by
  name; runs.csv keeps its column order); ``default``: what stands where it failed or was not
  run (no columns, empty tables, no value unless it says otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

import pandas as pd

from tracekit.analysis.options import AnalysisOptions, RunFacts

if TYPE_CHECKING:
    from tracekit.trace.reader import EventTables

# The event tables of a trace (tracekit.trace.reader.EventTables' fields).
EVENT_TABLES = ("gpu_ops", "host_calls", "cpu_ops", "syncs", "markers", "devices", "comms", "meta")
# Tables derived from the event tables that analyses share (EventTables.memo keys): "nest", the CPU
# ops nested per thread (tracekit.analysis.metrics.nest.Nest, as long as the CPU ops).
SHARED_TABLES = ("nest",)
# A column's unit -> what its name holds to say so ("" where a name need not: a count, a share...).
UNITS = {"µs": "_us", "ms": "_ms", "s": "_s", "MB": "_MB", "GB/s": "_GBps", "count": "", "share": "",
         "ratio": "", "": ""}


@dataclass(frozen=True)
class Output:
    """What an analysis gives: ``row`` (its columns of the run row), ``tables`` (name -> DataFrame)
    and ``value`` (anything, for the analyses that need or use it; dropped after the last)."""

    row: dict = field(default_factory=dict)
    tables: dict = field(default_factory=dict)
    value: Any = None


@dataclass(frozen=True)
class Inputs:
    """What an analysis is given.

    tables: the trace's event tables. options: the analysis's options. run: what the trace's
    run.json says. row: the required analyses' row (the summary) and the columns of the analyses
    it needs and uses. ``inputs[name]``: the value of an analysis it needs or uses (KeyError for
    one it did not declare)."""

    tables: EventTables
    options: AnalysisOptions
    run: RunFacts
    row: dict = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def iterations(self) -> int | None:
        """The iterations the profiled window holds, for a trace without markers: run.json's,
        else the option's (None: unknown)."""
        return self.run.iterations if self.run.iterations is not None else self.options.iterations


@dataclass(frozen=True)
class TraceAnalysis:
    """One registered analysis of a trace (see the module docstring); ``run(inputs) -> Output``;
    ``default``: an :class:`Output`, or ``default(inputs, why) -> Output`` where it depends on
    why the analysis failed or was not run (``"name failed: Type: message"``)."""

    name: str
    run: Callable[[Inputs], Output]
    reads: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    columns: Mapping[str, str] = field(default_factory=dict)
    tables: tuple[str, ...] = ()
    order: int = 50
    default: Output | Callable[[Inputs, str], Output] = Output()
    required: bool = False   # its failure fails the trace (the summary: without it, no figure stands)

    def fallback(self, inputs: Inputs, why: str) -> Output:
        """What stands where it failed or was not run: its ``default``, every declared table
        it leaves out an empty DataFrame."""
        out = self.default(inputs, why) if callable(self.default) else self.default
        return Output(dict(out.row), {**{t: pd.DataFrame() for t in self.tables}, **out.tables}, out.value)

    def checked(self, out: Output) -> Output:
        """``out``, the analysis's own, if it holds only what was declared.

        Raises:
            ValueError: a column or table it did not declare (the declarations are what the
                reports, the units and the runner rely on).
        """
        extra = sorted(set(out.row) - set(self.columns)) + sorted(set(out.tables) - set(self.tables))
        if extra:
            raise ValueError(f"{self.name} gave {', '.join(extra)}, which it does not declare")
        return out


ANALYSES: dict[str, TraceAnalysis] = {}


def _named(column: str, unit: str) -> bool:
    """True when ``column``'s name has its unit's mark (``_us`` for µs) and no other unit's."""
    return all((f"{mark}_" in f"{column}_") == (u == unit) for u, mark in UNITS.items() if mark)


def register(name: str, *, reads: tuple[str, ...] = (), needs: tuple[str, ...] = (), uses: tuple[str, ...] = (),
             columns: Mapping[str, str] | None = None, tables: tuple[str, ...] = (), order: int = 50,
             default: Output | Callable[[Inputs, str], Output] = Output(), required: bool = False):
    """Decorator: enter ``fn(inputs) -> Output`` in :data:`ANALYSES` as the analysis ``name``
    (the arguments are :class:`TraceAnalysis`' fields); returns ``fn``.

    Raises:
        ValueError: ``name`` is registered already, ``reads`` names no event or shared table,
            a unit is not one of :data:`UNITS` or a column's name does not say it (``busy_us``
            in µs, and only a µs column has ``_us`` in its name), the analysis needs or uses itself,
            or a required one needs or uses any.
    """
    columns = dict(columns or {})
    problems = ([f"{name} is registered already"] if name in ANALYSES else []) \
        + [f"reads {r!r}: not a table of {EVENT_TABLES + SHARED_TABLES}" for r in reads
           if r not in EVENT_TABLES + SHARED_TABLES] \
        + [f"column {c}: unit {u!r} not one of {list(UNITS)}" for c, u in columns.items() if u not in UNITS] \
        + [f"column {c} in {u!r}: its name does not say so" for c, u in columns.items() if not _named(c, u)] \
        + ([f"{name} needs or uses itself"] if name in needs + uses else []) \
        + ([f"{name} is required: it runs first, and can need or use no other"] if required and needs + uses else [])
    if problems:
        raise ValueError("; ".join(problems))

    def add(fn: Callable[[Inputs], Output]) -> Callable[[Inputs], Output]:
        ANALYSES[name] = TraceAnalysis(name, fn, tuple(reads), tuple(needs), tuple(uses), columns, tuple(tables),
                                       order, default, required)
        return fn
    return add

"""Trace files in, typed event tables out (no torch needed)."""

from tracekit.trace.discover import Run, discover
from tracekit.trace.reader import EventTables, NotATrace, TraceError, load

__all__ = ["EventTables", "NotATrace", "Run", "TraceError", "discover", "load"]

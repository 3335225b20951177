"""Hardware counters, analyzed (no torch, no GPU: runs anywhere).

* :mod:`~tracekit.analysis.counters.metrics`: the Nsight Compute metrics tracekit
  collects and how FLOPs follow from them;
* :mod:`~tracekit.analysis.counters.parse`: ncu's CSV, one row per profiled kernel;
* :mod:`~tracekit.analysis.counters.join`: each profiled kernel joined to a trace's kernel;
* :mod:`~tracekit.analysis.counters.roofline`: per-kernel DRAM traffic, GB/s, FLOP/s and
  how bound each kernel is, against the datasheet peaks of :mod:`tracekit.analysis.peaks`.

Captured by :mod:`tracekit.counters` (ncu and the workload it runs); reported by
:mod:`tracekit.report.formats.counters`.
"""

from tracekit.analysis.counters.parse import CountersError
from tracekit.analysis.counters.roofline import BOUND_PCT, CountersResult, analyze

__all__ = ["BOUND_PCT", "CountersError", "CountersResult", "analyze"]

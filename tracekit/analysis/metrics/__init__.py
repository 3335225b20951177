"""Per-trace metrics: pure functions of one trace's event tables (:class:`tracekit.trace.EventTables`)
returning DataFrames or flat figures, units in the names.

* :mod:`.summary`: kernels, launches, GPU busy, active span, utilization; per iteration, per device.
* :mod:`.idle`: GPU idle gaps by cause (host wait, launch latency, sync, other).
* :mod:`.launches`: launch calls by host API, their CPU cost and latency, dispatch per iteration.
* :mod:`.kernels`: top kernels, time by kernel class.
* :mod:`.transfers`: memcpy/memset bytes and bandwidth by direction.
* :mod:`.timeline`: one iteration's GPU ops per stream over its CUDA API calls.
* :mod:`.cpu_ops`: CPU time by op, and its changes between runs.
* :mod:`.integrity`: what keeps a trace's figures from being trusted.
* :mod:`.verdict`: launch-bound, GPU-bound or mixed, with its evidence.
* helpers the metrics share: :mod:`.intervals` (interval arithmetic), :mod:`.nest` (CPU ops
  nested per thread), :mod:`.categorical` (string columns as codes).

Each module registers the analyses it holds (:mod:`tracekit.analysis.registry`: what each reads and
gives, columns with units); :mod:`tracekit.analysis.trace_analysis` runs them all on each trace.
"""

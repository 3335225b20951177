"""The host's unprofiled time per iteration estimated from its trace, for a run whose run.json lacks
``host_ms`` (manifests from before it, a trace with an unprofiled latency and no host timing).

The profiler slows the host by a cost per event it records: each CPU op (and annotation) and each
CUDA runtime or driver call it wraps. So the host's unprofiled time per iteration is estimated as the
traced iteration (the steady iterations' median marker length, as
:func:`tracekit.analysis.critical_path.calibrate.host_scale_of` reads it) less
``PROFILER_US_PER_EVENT`` for each event recorded in it (the median over the same iterations).

``PROFILER_US_PER_EVENT`` is the median, over the committed eager runs whose unprofiled host time per
iteration is known, of (traced iteration - that host time) / events per iteration: where run.json has
``host_ms`` (the host's time per call measured unprofiled, GPU idle), conv-b1 4.23 µs,
conv-b1-forward-backward 4.09, torchvision-resnet18-b64 6.25 (tests/data/h200/predict-h200, H200),
mlp-train-step 5.34 (tests/data/h100, H100); where the run is launch-bound (its unprofiled latency is
its host's time: a CUDA graph replays it 3x faster), vit16x6x384-b1 0.76 (tests/data/h100/vit-study)
and 2.11 (reports/h100/compile-modes): 4.16. The cost differs from one machine and run to the next
(the H100 ViT runs' profiler cost a fifth of the H200 runs'), so the estimate's range is theirs,
rounded outward, 0.7-6.3 µs (``PROFILER_US_PER_EVENT_RANGE``), and the prediction's interval carries it
(:mod:`~tracekit.analysis.critical_path.uncertainty`). On the four runs with ``host_ms`` the estimated
host factor is 0.38, 0.61, 0.60 and 0.69 against 0.37, 0.62, 0.41 and 0.61 measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracekit.trace.reader import EventTables

PROFILER_US_PER_EVENT = 4.2
PROFILER_US_PER_EVENT_RANGE = (0.7, 6.3)


@dataclass(frozen=True)
class HostEstimate:
    """host_ms: the estimated unprofiled host time per iteration (ms; never below 0); traced_ms: the
    traced iterations' median length; events: the events recorded per iteration (median);
    per_event_us: the profiler's cost per event it was estimated with."""

    host_ms: float
    traced_ms: float
    events: float
    per_event_us: float = PROFILER_US_PER_EVENT

    def at(self, per_event_us: float) -> "HostEstimate":
        """The same estimate with another cost per event."""
        host = max(self.traced_ms - per_event_us * self.events / 1e3, 0.0)
        return HostEstimate(host, self.traced_ms, self.events, per_event_us)


def steady_windows(m: pd.DataFrame) -> pd.DataFrame:
    """The iterations a host time per iteration is read from: the outermost instances (``within``
    -1, where markers nest), the first and last left out when there are 3 or more (they hold the
    profiled window's synchronizations)."""
    if "within" in m:
        m = m[m["within"] < 0]
    m = m.sort_values("ts")
    return m.iloc[1:-1] if len(m) >= 3 else m


def estimate(tables: EventTables, markers: pd.DataFrame) -> HostEstimate | None:
    """The host's unprofiled time per iteration of a trace (the module docstring), from its markers
    (step, ts, end µs; ``within``); None without a marker longer than 0."""
    m = steady_windows(markers)
    lengths = m["end"].to_numpy(float) - m["ts"].to_numpy(float)
    if not len(m) or not np.isfinite(lengths).all() or np.median(lengths) <= 0:
        return None
    events = np.zeros(len(m))
    for frame in (tables.cpu_ops, tables.host_calls):
        ts = np.sort(frame["ts"].to_numpy(float))
        events += np.searchsorted(ts, m["end"].to_numpy(float)) - np.searchsorted(ts, m["ts"].to_numpy(float))
    ops = tables.cpu_ops
    own = pd.MultiIndex.from_arrays([ops["ts"].to_numpy(float), ops["end"].to_numpy(float)])
    events -= pd.MultiIndex.from_arrays([m["ts"].to_numpy(float), m["end"].to_numpy(float)]).isin(own)  # the marker
    traced = float(np.median(lengths)) / 1e3
    return HostEstimate(0.0, traced, float(np.median(events))).at(PROFILER_US_PER_EVENT)

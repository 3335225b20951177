"""The GPU edges of a trace's dependency graph (:mod:`tracekit.analysis.critical_path.graph`): the
launch, stream and cross-stream wait edges into each GPU op, weighed so that re-timing the graph
gives the traced times back. A mixin of the graph's builder, which holds the trace's host calls
(``host``), GPU ops (``gpu``), their numbering and ``missing``.
"""

from __future__ import annotations

import numpy as np

from tracekit.analysis.critical_path import reasons as why
from tracekit.analysis.critical_path.kinds import LAUNCH, STREAM, WAIT

# An op starting this long before its launch call returns started during the call (more than
# the host/GPU clock skew seen on the H100 fixtures, 0.4 µs).
OUTLASTS_US = 1.0


def median_finite(values: np.ndarray, default: float) -> float:
    """The median of the finite ``values``; ``default`` where there are none."""
    values = values[np.isfinite(values)]
    return float(np.median(values)) if len(values) else default


class GpuEdges:
    """The builder's GPU edges (:meth:`gpu_edges`), after :meth:`SyncEdges.index_streams` and
    :meth:`SyncEdges.wait_pairs`."""

    def gpu_edges(self, waits: tuple[np.ndarray, np.ndarray]) -> None:
        """Launch, stream and cross-stream wait edges into each GPU op: the one that bound its
        start (the latest source end plus the typical lag of its kind) with its observed lag."""
        gpu, n_host = self.gpu, self.n_host
        ts, end = gpu["ts"].to_numpy(float), gpu["end"].to_numpy(float)
        launch = self.launch_local
        known = launch >= 0
        call_end, call_ts = np.full(len(gpu), np.nan), np.full(len(gpu), np.nan)
        call_end[known] = self.host["end"].to_numpy(float)[launch[known]]
        call_ts[known] = self.hts[launch[known]]
        order = np.lexsort((ts, self.stream))
        prev = np.full(len(gpu), -1)
        same = self.stream[order][1:] == self.stream[order][:-1]
        prev[order[1:][same]] = order[:-1][same]
        prev_end = np.where(prev >= 0, end[np.maximum(prev, 0)], np.nan)
        launch_lag, stream_gap = ts - call_end, ts - prev_end
        # an op that starts while its call still runs (a synchronous memcpy, a CUDA graph replay):
        # its launch edge runs from the call's start
        during = launch_lag < -OUTLASTS_US
        w_src, w_dst = waits
        wait_end = np.full(len(gpu), -np.inf)
        np.maximum.at(wait_end, w_dst, end[w_src])
        # typical lags: an op launched onto an idle stream / an op queued behind the previous one,
        # leaving out the ops a cross-stream wait held back
        free = ~(wait_end > np.fmax(call_end, prev_end))
        idle = free & np.isfinite(launch_lag) & ~during & ~(prev_end > call_end)
        self.launch_lag_us = median_finite(launch_lag[idle], 0.0)
        self.stream_gap_us = median_finite(stream_gap[free & np.isfinite(stream_gap) & (prev_end > call_end)], np.nan)
        gap = self.stream_gap_us if np.isfinite(self.stream_gap_us) else 0.0
        start_of = np.where(during, call_ts, call_end)
        by_launch = start_of + np.where(during, ts - call_ts, self.launch_lag_us)
        candidates = np.vstack([np.nan_to_num(by_launch, nan=-np.inf), np.nan_to_num(prev_end + gap, nan=-np.inf),
                                wait_end])
        binds = np.argmax(candidates, axis=0)
        lag_l = np.where(binds == 0, ts - start_of, np.minimum(self.launch_lag_us, launch_lag))
        lag_l[during] = (ts - call_ts)[during]
        lag_s = np.where(binds == 1, stream_gap, np.minimum(gap, stream_gap))
        w_obs = ts[w_dst] - end[w_src]
        w_binding = (binds[w_dst] == 2) & (end[w_src] == wait_end[w_dst])
        ops = np.arange(len(gpu)) + n_host
        self.add(launch[known], ops[known], lag_l[known], LAUNCH, during[known])
        has_prev = prev >= 0
        self.add(prev[has_prev] + n_host, ops[has_prev], lag_s[has_prev], STREAM)
        self.add(w_src + n_host, w_dst + n_host, np.where(w_binding, w_obs, np.minimum(gap, w_obs)), WAIT)
        if (~known).any():
            self.missing.append({"code": why.LAUNCHLESS_OPS, "ops": int((~known).sum()), "of": len(gpu)})

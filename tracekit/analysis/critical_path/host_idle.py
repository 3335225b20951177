"""Idle host time: the part of the CPU time between a thread's calls in which the thread ran no
profiled op (a sleep, a wait for data or a lock, Python that calls no torch op).

The profiler slows what it records: each op it records costs its host a few µs more, which is why
a traced host runs slower than an unprofiled one and why the calibration
(:mod:`tracekit.analysis.critical_path.calibrate`) scales host time to the unprofiled latency. A
stretch in which the thread ran no op has nothing recorded to slow: a 2 ms ``time.sleep`` is 2 ms
with or without the profiler. Such stretches, at least :data:`IDLE_MIN_US` long (shorter ones are
the Python between ops, which the recording does slow), cut to the ``ProfilerStep#N`` windows (the
time between two windows is the profiler's own step, which it does slow), are kept out of the host
scale
(:func:`tracekit.analysis.critical_path.retime.weights`): neither the calibration nor
``--host-faster`` shortens a sleep, and ``--balance-ranks`` takes a straggler's sleep at its length.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

IDLE_MIN_US = 200.0   # an op-free stretch this long is idle, not the Python between two ops (µs)
STEP_MARKER = "ProfilerStep#"   # the profiler's iteration markers (torch.profiler.profile.step())


def _thread(pid, tid) -> pd.Series:
    return pd.Series(np.asarray(pid)).astype(str) + "\0" + pd.Series(np.asarray(tid)).astype(str)


def _covered(ts: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals [ts, end) as sorted disjoint (starts, ends)."""
    if not len(ts):
        return ts, end
    order = np.argsort(ts, kind="stable")
    ts, end = ts[order], end[order]
    reach = np.maximum.accumulate(end)
    new = np.r_[True, ts[1:] > reach[:-1]]
    return ts[new], reach[np.r_[np.flatnonzero(new)[1:] - 1, len(ts) - 1]]


def _in_windows(h0: np.ndarray, h1: np.ndarray,
                windows: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The stretches [h0, h1) cut to the iteration windows (sorted disjoint (starts, ends)): each
    stretch's part in each window; all of each where there is no window (a trace without markers is
    one window)."""
    starts, ends = windows
    if not len(starts):
        return h0, h1
    first = np.searchsorted(ends, h0, side="right")      # the first window ending after a stretch starts
    last = np.searchsorted(starts, h1, side="left")      # past the last window starting before it ends
    count = np.maximum(last - first, 0)
    which = np.repeat(np.arange(len(h0)), count)
    w = np.concatenate([np.arange(a, b) for a, b in zip(first[count > 0], last[count > 0])]) if count.any() \
        else np.zeros(0, np.int64)
    return np.maximum(h0[which], starts[w]), np.minimum(h1[which], ends[w])


def idle_us(cpu_ops: pd.DataFrame, pid, tid, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Idle time in each gap of a host thread (module docstring).

    Args:
        cpu_ops: a trace's CPU ops (``cat``, ``pid``, ``tid``, ``ts``, ``end``, µs); only ``cpu_op``
            events count as ops (a ``user_annotation`` range covers a sleep as well as work).
        pid, tid: each gap's thread (arrays of length g).
        start, stop: each gap's ends (µs, arrays of length g; a thread's gaps do not overlap).

    Returns:
        Per gap, the total of its stretches at least :data:`IDLE_MIN_US` long in which its thread
        ran no ``cpu_op``, each inside one ``ProfilerStep#N`` window (µs, 0 to stop - start).
    """
    start, stop = np.asarray(start, float), np.asarray(stop, float)
    out = np.zeros(len(start))
    if not len(start):
        return out
    ops = cpu_ops[cpu_ops["cat"] == "cpu_op"] if "cat" in cpu_ops else cpu_ops
    steps = cpu_ops[cpu_ops["name"].astype(str).str.startswith(STEP_MARKER)]
    windows = _covered(steps["ts"].to_numpy(float), steps["end"].to_numpy(float))
    op_thread = _thread(ops["pid"], ops["tid"]).to_numpy()
    gap_thread = _thread(pid, tid).to_numpy()
    for key in np.unique(gap_thread):
        gaps = np.flatnonzero(gap_thread == key)
        gaps = gaps[np.argsort(start[gaps], kind="stable")]
        mine = op_thread == key
        starts, ends = _covered(ops["ts"].to_numpy(float)[mine], ops["end"].to_numpy(float)[mine])
        h0s, h1s = _in_windows(np.r_[-np.inf, ends], np.r_[starts, np.inf], windows)   # op-free, in an iteration
        long = h1s - h0s >= IDLE_MIN_US
        for h0, h1 in zip(h0s[long].tolist(), h1s[long].tolist()):
            lo = np.searchsorted(stop[gaps], h0, side="right")
            hi = np.searchsorted(start[gaps], h1, side="left")
            for j in gaps[lo:hi].tolist():
                part = min(h1, stop[j]) - max(h0, start[j])
                if part >= IDLE_MIN_US:
                    out[j] += part
    return np.minimum(out, np.maximum(stop - start, 0.0))


def idle_per_iteration_ms(g, step: np.ndarray, rank: int | None = None) -> float:
    """A graph's idle host time per iteration (ms): the idle part of the ``cpu`` lags (``g.idle``,
    inside the iterations' windows) into the calls of its iterations (``step`` >= 0; the first
    call's from the previous iteration's last, where a sleep at the top of a forward is), of
    ``rank`` where given, over the iterations; 0.0 without any."""
    if g.idle is None or not len(g.idle):
        return 0.0
    mine = step >= 0 if rank is None else (step >= 0) & (g.rank == rank)
    steps = np.unique(step[mine])
    return float(g.idle[mine[g.dst]].sum()) / len(steps) / 1e3 if len(steps) else 0.0

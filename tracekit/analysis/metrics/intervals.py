"""Interval arithmetic on GPU-op timelines (µs), vectorised with numpy."""

from __future__ import annotations

import numpy as np


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge possibly overlapping intervals [start, end) into disjoint ones.

    Args:
        starts, ends: 1-D float arrays of equal length n (µs), in any order.

    Returns:
        (merged_starts, merged_ends): sorted, disjoint, non-touching intervals
        covering exactly the union of the inputs; length m <= n.
    """
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    s, e = np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64)
    if not (s[1:] >= s[:-1]).all():  # the reader's tables come in start order: no sort needed
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    running_end = np.maximum.accumulate(e)
    # A new merged interval begins where a start lies beyond every earlier end.
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > running_end[:-1]
    idx = np.flatnonzero(new)
    merged_starts = s[idx]
    merged_ends = running_end[np.r_[idx[1:] - 1, len(s) - 1]]
    return merged_starts, merged_ends


def busy_and_gaps(starts: np.ndarray, ends: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Busy time and the idle gaps between merged intervals.

    Returns:
        (busy_us, gap_starts, gap_ends): the length of the union of the
        intervals (overlap counted once) and the gaps inside the active span
        (first start to last end), each gap a pair [gap_start, gap_end).
    """
    ms, me = union(starts, ends)
    busy = float(np.sum(me - ms))
    return busy, me[:-1], ms[1:]


def busy_shares(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Each interval's share of the busy time (the union of the intervals).

    Time covered by k intervals at once is split equally among them, so the
    shares sum to the union's length (overlap counted once, as GPU busy time
    is) and an interval alone on the timeline gets its full length.

    Args:
        starts, ends: 1-D float arrays of equal length n (µs), in any order.

    Returns:
        float array of length n (µs), aligned with the inputs.
    """
    n = len(starts)
    if n == 0:
        return np.zeros(0)
    t0 = float(np.min(starts))
    points = np.concatenate([np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64)])
    points -= t0
    order = np.argsort(points, kind="stable")
    p = points[order]
    del points   # (scratch arrays freed as soon as used: this runs on every GPU op of a trace)
    cover = np.cumsum(np.where(order < n, 1, -1))[:-1]        # intervals open on [p[i], p[i+1])
    weight = np.diff(p)
    del p
    weight = np.where(cover > 0, weight / np.maximum(cover, 1), 0.0)
    del cover
    before = np.concatenate([[0.0], np.cumsum(weight)])       # weight of the timeline before each point
    del weight
    rank = np.empty(2 * n, dtype=np.int64)
    rank[order] = np.arange(2 * n)
    return before[rank[n:]] - before[rank[:n]]

"""The CPU ops of a trace as ranges nested per thread (a CPU op's caller is the range of its
thread that encloses it): parent links, the innermost range around a point in time, and
the first ancestor with some property. Vectorised with numpy; relies on the reader's
``depth`` column (ops of one thread nest)."""

from __future__ import annotations

from functools import cached_property

import numpy as np
import pandas as pd


class Nest:
    """The CPU ops of a trace as ranges nested per thread: parent links, and the
    innermost range around a point. Positions index the ops sorted by (thread, start,
    longer first): ``order[position]`` is the op's row in ``cpu``, and ``ts``, ``end``,
    ``dur``, ``names`` are per position; ops of one thread nest (the reader's ``depth``)."""

    def __init__(self, cpu: pd.DataFrame, threads: np.ndarray):
        self.order = order = _nest_order(threads, cpu["ts"].to_numpy(), cpu["dur"].to_numpy())  # position -> row
        self.thread = threads[order]
        self.ts, self.end, self.dur = (cpu[c].to_numpy()[order] for c in ("ts", "end", "dur"))
        depth = cpu["depth"].to_numpy()[order]
        self.parent = np.full(len(order), -1, dtype=np.int64)
        for d in range(1, int(depth.max()) + 1 if len(depth) else 0):
            up, here = np.flatnonzero(depth == d - 1), np.flatnonzero(depth == d)
            k = np.searchsorted(up, here) - 1
            ok = k >= 0
            ok[ok] = self.thread[up[k[ok]]] == self.thread[here[ok]]
            self.parent[here[ok]] = up[k[ok]]
        names = pd.Categorical(cpu["name"])  # the reader's names are categorical already: no hashing
        self._codes, self._distinct = names.codes[order], names.categories.to_numpy(dtype=object)

    @cached_property
    def names(self) -> np.ndarray:
        """The op name at each position (object array)."""
        return self._distinct[self._codes]

    def per_name(self, fn, dtype=bool) -> np.ndarray:
        """``fn(name)`` for each position, computed once per distinct name."""
        return np.array([fn(n) for n in self._distinct], dtype=dtype)[self._codes]

    def innermost(self, threads: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Position of the innermost op around each (thread, ts) point, -1 where none."""
        out = np.full(len(ts), -1, dtype=np.int64)
        for t in np.unique(threads):
            lo, hi = np.searchsorted(self.thread, [t, t + 1])
            q = np.flatnonzero(threads == t)
            out[q] = np.where(np.searchsorted(self.ts[lo:hi], ts[q], side="right") > 0,
                              lo + np.searchsorted(self.ts[lo:hi], ts[q], side="right") - 1, -1)
        for _ in range(64):  # climb out of ranges that ended before the point
            out_of = (out >= 0) & (self.end[np.maximum(out, 0)] <= ts)
            if not out_of.any():
                break
            out[out_of] = self.parent[out[out_of]]
        return out

    def ancestor(self, pos: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The first of ``pos`` or its ancestors where ``mask`` (per position) holds; -1 if none."""
        found, cur = np.full(len(pos), -1, dtype=np.int64), pos.copy()
        while ((cur >= 0) & (found < 0)).any():
            hit = (cur >= 0) & (found < 0)
            hit[hit] = mask[cur[hit]]
            found[hit] = cur[hit]
            cur = np.where(cur >= 0, self.parent[np.maximum(cur, 0)], -1)
        return found


def _nest_order(threads: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Rows ordered by (thread, start, longer first). The reader's tables are in ts order:
    then a stable sort by thread (a radix sort of small ints) and a sort of the ties do."""
    if len(ts) < 2 or not (ts[1:] >= ts[:-1]).all():
        return np.lexsort((-dur, ts, threads))
    order = np.argsort(threads.astype(np.int16) if threads.max() < 2**15 else threads, kind="stable")
    t, s = threads[order], ts[order]
    tie = np.zeros(len(ts), dtype=bool)
    tie[1:] = (t[1:] == t[:-1]) & (s[1:] == s[:-1])
    tie[:-1] |= tie[1:]
    if tie.any():
        at = np.flatnonzero(tie)
        order[at] = order[at][np.lexsort((-dur[order[at]], s[at], t[at]))]
    return order


def threads(*frames: pd.DataFrame) -> list[np.ndarray]:
    """One integer code per (pid, tid), shared by the frames."""
    pid = pd.factorize(pd.concat([f["pid"] for f in frames], ignore_index=True))[0]
    tid = pd.factorize(pd.concat([f["tid"] for f in frames], ignore_index=True))[0]
    code = pid.astype(np.int64) * (int(tid.max()) + 1 if len(tid) else 1) + tid
    return np.split(code, np.cumsum([len(f) for f in frames])[:-1])

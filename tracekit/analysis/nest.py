"""The CPU ops of a trace as ranges nested per thread (a CPU op's caller is the range of its
thread that encloses it): parent links, the innermost range around a point in time, and
the first ancestor with some property. Vectorised with numpy; relies on the reader's
``depth`` column (ops of one thread nest)."""

from __future__ import annotations

import numpy as np
import pandas as pd


class Nest:
    """The CPU ops of a trace as ranges nested per thread: parent links, and the
    innermost range around a point. Positions index ``ops`` sorted by (thread, start,
    longer first); ops of one thread nest (the reader's ``depth`` column)."""

    def __init__(self, cpu: pd.DataFrame, threads: np.ndarray):
        order = np.lexsort((-cpu["dur"].to_numpy(), cpu["ts"].to_numpy(), threads))
        self.ops = cpu.iloc[order].reset_index(drop=True)
        self.thread = threads[order]
        self.ts, self.end = self.ops["ts"].to_numpy(), self.ops["end"].to_numpy()
        depth = self.ops["depth"].to_numpy()
        self.parent = np.full(len(order), -1, dtype=np.int64)
        for d in range(1, int(depth.max()) + 1 if len(depth) else 0):
            up, here = np.flatnonzero(depth == d - 1), np.flatnonzero(depth == d)
            k = np.searchsorted(up, here) - 1
            ok = k >= 0
            ok[ok] = self.thread[up[k[ok]]] == self.thread[here[ok]]
            self.parent[here[ok]] = up[k[ok]]
        self.names = self.ops["name"].to_numpy(dtype=object)
        self._codes, self._distinct = pd.factorize(self.names)

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


def threads(*frames: pd.DataFrame) -> list[np.ndarray]:
    """One integer code per (pid, tid), shared by the frames."""
    pid = pd.factorize(pd.concat([f["pid"] for f in frames], ignore_index=True))[0]
    tid = pd.factorize(pd.concat([f["tid"] for f in frames], ignore_index=True))[0]
    code = pid.astype(np.int64) * (int(tid.max()) + 1 if len(tid) else 1) + tid
    return np.split(code, np.cumsum([len(f) for f in frames])[:-1])

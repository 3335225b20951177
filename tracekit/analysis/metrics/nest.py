"""The CPU ops of a trace as ranges nested per thread (a CPU op's caller is the range of its
thread that encloses it): parent links, the innermost range around a point in time, and
the first ancestor with some property. Vectorised with numpy; relies on the reader's
``depth`` column (ops of one thread nest). Built once per trace (:meth:`Nest.of`) and
shared by the analyses that need it (attribution, CPU-op self time, module scope times)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.metrics import categorical
from tracekit.trace.reader import EventTables


class Nest:
    """The CPU ops of a trace as ranges nested per thread: parent links, and the
    innermost range around a point. Positions index the ops sorted by (thread, start,
    longer first): ``order[position]`` is the op's row in ``cpu``, and ``thread``, ``dur``
    (µs), ``parent`` (position, -1 for a top-level op) and ``codes`` (of the op's name, see
    :meth:`by_name`) are per position (start and end times are read from ``cpu`` through
    ``order`` where needed: not copied, as the nest lives through several analyses);
    ops of one thread nest (the reader's ``depth``). A thread is an integer code of
    (pid, tid): :meth:`threads_of` gives the codes of other events' (pid, tid)."""

    def __init__(self, cpu: pd.DataFrame, order: np.ndarray | None = None):
        """``order``: the rows of ``cpu`` by (thread, start, longer first) where known (the reader's)."""
        pid, tid = pd.Categorical(cpu["pid"]), pd.Categorical(cpu["tid"])  # the reader's: no hashing
        self._pids, self._tids = pid.categories, tid.categories
        threads = self._thread(pid.codes, tid.codes)
        if order is None:
            order = _nest_order(threads, cpu["ts"].to_numpy(), cpu["dur"].to_numpy())
        # int32 positions: the nest lives through the analyses of a trace, so it is kept compact
        self.order = order = order.astype(np.int32, copy=False)
        self.thread = threads[order].astype(np.int32, copy=False)
        del threads
        self._ts, self._end, self._dur = (cpu[c].to_numpy() for c in ("ts", "end", "dur"))
        self.parent = _parents(cpu["depth"].to_numpy()[order], self.thread)
        names = pd.Categorical(cpu["name"])
        self.codes, self._distinct = names.codes[order], names.categories.to_numpy(dtype=object)

    @property
    def dur(self) -> np.ndarray:
        """The duration (µs) of the op at each position (made on each use: not kept)."""
        return self._dur[self.order]

    def starts(self, pos: np.ndarray) -> np.ndarray:
        """The start (µs) of the op at each position of ``pos``."""
        return self._ts[self.order[pos]]

    @classmethod
    def of(cls, tables: EventTables) -> "Nest":
        """The nest of ``tables.cpu_ops``, built once per trace (in the order the reader found)."""
        def make() -> "Nest":
            known = tables.derived.pop("nest_order", None)
            return cls(tables.cpu_ops, known[1] if known is not None and known[0] is tables.cpu_ops else None)
        return tables.memo("nest", tables.cpu_ops, make)

    def _thread(self, pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
        code = pid.astype(np.int32 if len(self._pids) * len(self._tids) < 2**31 else np.int64)
        code *= max(len(self._tids), 1)
        code += tid
        code[(pid < 0) | (tid < 0)] = -1
        return code

    def threads_of(self, frame: pd.DataFrame) -> np.ndarray:
        """The thread code of each row of ``frame`` (pid, tid columns); -1 for a thread
        without CPU ops."""
        return self._thread(_codes(frame["pid"], self._pids), _codes(frame["tid"], self._tids)).astype(np.int32)

    @property
    def names(self) -> np.ndarray:
        """The op name at each position (object array, made on each use: not kept)."""
        return self._distinct[self.codes]

    def by_name(self, fn, dtype=bool) -> np.ndarray:
        """``fn(name)`` for each distinct name (index them with ``codes[position]``)."""
        return np.array([fn(n) for n in self._distinct], dtype=dtype)

    def per_name(self, fn, dtype=bool) -> np.ndarray:
        """``fn(name)`` for each position, computed once per distinct name."""
        return self.by_name(fn, dtype)[self.codes]

    def at(self, pos: np.ndarray, values: np.ndarray, default) -> np.ndarray:
        """``values`` (one per distinct name, from :meth:`by_name`) of the op at each position
        of ``pos``; ``default`` where ``pos`` is -1."""
        return np.where(pos >= 0, values[self.codes[np.maximum(pos, 0)]], default)

    def coded_at(self, pos: np.ndarray, values: np.ndarray, default) -> pd.Categorical:
        """:meth:`at` as a Categorical (:mod:`tracekit.analysis.metrics.categorical`): no string per position."""
        return categorical.remap(np.where(pos >= 0, self.codes[np.maximum(pos, 0)], -1), values, default)

    def innermost(self, threads: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Position of the innermost op around each (thread, ts) point, -1 where none."""
        out = np.full(len(ts), -1, dtype=np.int64)
        for t in np.unique(threads[threads >= 0]):
            lo, hi = np.searchsorted(self.thread, [t, t + 1])
            q = np.flatnonzero(threads == t)
            at = np.searchsorted(self._ts[self.order[lo:hi]], ts[q], side="right")
            out[q] = np.where(at > 0, lo + at - 1, -1)
        for _ in range(64):  # climb out of ranges that ended before the point
            out_of = (out >= 0) & (self._end[self.order[np.maximum(out, 0)]] <= ts)
            if not out_of.any():
                break
            out[out_of] = self.parent[out[out_of]]
        return out

    def ancestor(self, pos: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The first of ``pos`` or its ancestors where ``mask`` (per position) holds; -1 if none."""
        found = np.full(len(pos), -1, dtype=np.int64)
        idx = np.flatnonzero(pos >= 0)
        cur = pos[idx]
        while len(idx):  # only the points still climbing are looked at
            hit = mask[cur]
            found[idx[hit]] = cur[hit]
            idx, cur = idx[~hit], self.parent[cur[~hit]]
            live = cur >= 0
            idx, cur = idx[live], cur[live]
        return found


def _parents(depth: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """The parent (position, -1 for none) of each op, given per position (ops by thread, start,
    longer first) its depth and thread: the last op before it one level up, of its own thread."""
    parent = np.full(len(depth), -1, dtype=np.int32)
    if len(depth) == 0:
        return parent
    levels = depth if depth.dtype.itemsize <= 2 else depth.astype(np.int16 if depth.max() < 2**15 else np.int64)
    by_level = np.argsort(levels, kind="stable").astype(np.int32)  # positions by level (a radix sort), in order
    bounds = np.searchsorted(levels[by_level], np.arange(int(depth.max()) + 2))
    for d in range(1, int(depth.max()) + 1):
        up_level, here = by_level[bounds[d - 1]:bounds[d]], by_level[bounds[d]:bounds[d + 1]]
        up = up_level[np.maximum(np.searchsorted(up_level, here) - 1, 0)] if len(up_level) else here
        ok = (up < here) & (thread[up] == thread[here])
        parent[here[ok]] = up[ok]
    return parent


def _codes(column: pd.Series, categories: pd.Index) -> np.ndarray:
    """The position of each value of ``column`` in ``categories``, -1 where absent."""
    own = pd.Categorical(column)
    return np.append(categories.get_indexer(own.categories), -1)[own.codes]


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

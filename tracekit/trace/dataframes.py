"""Chunks of columns -> the trace's tables: pandas DataFrames sorted by ts.

Runs in the reading process once every chunk is in. Numeric columns are
concatenated and put in ts order with one stable ``argsort`` per table; string
columns stay categorical (int32 codes) through concatenation, with categories
sorted so that grouping by them orders as the strings do.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from tracekit.trace.event_columns import COMM_TEXT, ITERATION_MARKER, MARKER_COLUMNS, TABLES, Chunk
from tracekit.trace.values import Strings

# Two events equal on these (numeric, so cheap to hash) columns are one event
# written twice (a trace merged with itself, a buffer flushed twice): Kineto gives
# every op its own correlation / external id, and ts has ns resolution.
DEDUP_KEYS = {
    "gpu": ["ts", "dur", "device", "stream", "correlation"],
    "host": ["ts", "dur", "correlation", "external_id"],
    "cpu": ["ts", "dur", "external_id"],
    "comms": ["ts", "dur", "correlation", "external_id", "name"],
}
_DTYPES = {"step": np.int64, "ts": np.float64, "dur": np.float64, "end": np.float64, "device": np.int64,
           "stream": np.int64,
           "correlation": np.int64, "external_id": np.int64, "sequence": np.int64, "wait_on_stream": np.int64,
           "wait_on_correlation": np.int64,
           **{c: np.float64 for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                                      "registers", "shared_memory", "occupancy_pct", "bytes",
                                      "in_msg_nelems", "out_msg_nelems", "group_size", "seq")},
           **{c: object for c in COMM_TEXT}}
_BLOCK = 1 << 18  # positions per step of depth's key and count loops: scratch arrays stay small


class TableBuilder:
    """Collect the :class:`~tracekit.trace.event_columns.Chunk` s of one file; :meth:`table` makes each table.

    ``problems`` counts damaged events (problem -> count; see
    :mod:`tracekit.trace.event_columns`), plus exact duplicates of an event (same
    table key, see ``DEDUP_KEYS``), which are dropped.
    """

    def __init__(self):
        self.chunks: list[Chunk] = []
        self.problems: Counter[str] = Counter()
        self.categories: Counter[str] = Counter()
        self.unknown_device: Counter[str] = Counter()
        self.events = 0
        self._window: tuple[float, float] | None = None

    def merge(self, chunk: Chunk) -> None:
        """Take a chunk tabulated here or in a worker process, in file order."""
        self.chunks.append(chunk)
        self.events += chunk.events
        self.problems += chunk.problems
        self.categories += chunk.categories
        self.unknown_device += chunk.unknown_device

    def window(self) -> tuple[float, float]:
        """(lo, hi) µs: events starting before lo or ending after hi are outliers, far outside
        the trace's own range: more than a day, or 1000 median absolute deviations if that is
        more, from the median start of its ops (a robust rule: Hampel's, with a wide margin;
        a profile never spans a day, so a ts of 0 in a trace of µs since boot, or a dur of
        1e300, stands out however the trace's events are spread)."""
        if self._window is None:
            parts = [c.tables[k]["ts"] for c in self.chunks for k in ("gpu", "host", "cpu", "syncs") if k in c.tables]
            step = max(1, sum(map(len, parts)) // 100_000)   # a sample is enough for a median:
            sample, at = [], 0                                # every step-th start of them all, in file order
            for ts in parts:
                sample.append(ts[-at % step::step])
                at += len(ts)
            ts = np.concatenate(sample) if sample else np.zeros(0)
            med = float(np.median(ts)) if len(ts) else 0.0
            margin = max(86_400e6, 1000 * float(np.median(np.abs(ts - med)))) if len(ts) else np.inf
            self._window = (med - margin, med + margin)
        return self._window

    def table(self, key: str, end: bool = True, extra=None) -> pd.DataFrame:
        """One table (``TABLES[key]`` columns), sorted by ts (stable: file order for ties),
        exact twins dropped, with ``end = ts + dur``; ``extra(columns)`` may add columns
        (name -> array) before the DataFrame is made. Its chunks are freed."""
        lo, hi = self.window()
        spans = [c.spans.get(key) for c in self.chunks if key in c.tables]
        parts = [c.tables.pop(key) for c in self.chunks if key in c.tables]
        if not parts:
            empty = {c: _empty(c) for c in TABLES[key] + (["end"] if end else [])}
            if extra is not None:
                empty.update((c, pd.Series(v)) for c, v in extra({"ts": np.zeros(0)}).items())
            return pd.DataFrame(empty)
        ts = np.concatenate([p.pop("ts") for p in parts])
        order = None if _is_sorted(ts) else np.argsort(ts, kind="stable")
        cols = {"ts": ts if order is None else ts[order]}
        cols.update((c, _column([p.pop(c) for p in parts], order)) for c in TABLES[key] if c != "ts")
        if None in spans or min(s[0] for s in spans) < lo or max(s[1] for s in spans) > hi:
            cols = self._outliers(cols, lo, hi)
        if key in DEDUP_KEYS:
            cols = self._dedup(cols, DEDUP_KEYS[key])
        if end:
            cols["end"] = cols["ts"] + cols["dur"]
        if extra is not None:
            cols.update(extra(cols))
        return pd.DataFrame({c: cols[c] for c in TABLES[key] + [c for c in cols if c not in TABLES[key]]},
                            copy=False)

    def _outliers(self, cols: dict, lo: float, hi: float) -> dict:
        """Drop events starting before ``lo`` or ending after ``hi`` (see :meth:`window`)."""
        ts = cols["ts"]
        out = (ts < lo) | ((ts + cols["dur"]) > hi if "dur" in cols else ts > hi)
        if not out.any():
            return cols
        self.problems["events far outside the trace's time range dropped as outliers"] += int(out.sum())
        return {c: v[~out] for c, v in cols.items()}

    def _dedup(self, cols: dict, keys: list[str]) -> dict:
        """Drop exact twins. Twins share ts, so only rows whose ts equals a
        neighbour's (in ts order) are compared: a handful in a sound trace."""
        ts = cols["ts"]
        tie = np.zeros(len(ts), dtype=bool)
        tie[1:] = ts[1:] == ts[:-1]
        tie[:-1] |= tie[1:]
        if not tie.any():
            return cols
        at = np.flatnonzero(tie)
        dup = pd.DataFrame({k: cols[k][at] for k in keys}).duplicated(keys).to_numpy()
        if not dup.any():
            return cols
        self.problems["duplicated events dropped"] += int(dup.sum())
        keep = np.ones(len(ts), dtype=bool)
        keep[at[dup]] = False
        return {c: v[keep] for c, v in cols.items()}


def _is_sorted(a: np.ndarray) -> bool:
    return bool(np.all(a[1:] >= a[:-1]))


def _empty(column: str) -> pd.Series:
    if column in _DTYPES:
        return pd.Series(dtype=_DTYPES[column])
    return pd.Series(pd.Categorical([]))


def _column(parts: list, order: np.ndarray | None):
    """Chunks of one column as one array (a Categorical for strings), in ``order``."""
    if isinstance(parts[0], Strings):
        index: dict[str, int] = {}   # value -> its number in the file; per chunk, its codes' numbers
        numbers = [np.array([index.setdefault(v, len(index)) for v in p.values], dtype=np.int64) for p in parts]
        used = np.zeros(len(index), dtype=bool)  # a chunk's values may go unused by this table's rows
        for number, p in zip(numbers, parts):
            used[number[np.bincount(p.codes, minlength=len(number)) > 0]] = True
        values = np.array(list(index), dtype=object)
        used = np.flatnonzero(used)
        by_name = used[np.argsort(values[used])]
        # the codes in the smallest integer type the categories allow: fewer bytes to move
        rank = np.zeros(len(index), dtype=np.min_scalar_type(-max(len(by_name), 1)))
        rank[by_name] = np.arange(len(by_name))
        codes, at = np.empty(sum(len(p.codes) for p in parts), dtype=rank.dtype), 0
        for number, p in zip(numbers, parts):
            np.take(rank[number], p.codes, out=codes[at:at + len(p.codes)])
            at += len(p.codes)
        return pd.Categorical.from_codes(codes if order is None else codes[order],
                                         categories=pd.Index(values[by_name], dtype=object), validate=False)
    values = np.concatenate(parts)
    return values if order is None else values[order]


def _key(us: np.ndarray, rows: np.ndarray | None, thread: np.ndarray, t0: float) -> np.ndarray:
    """:func:`depth`'s keys: thread, then integer ns since t0 (< 2**44 ns: 4.9 h), of ``us[rows]``
    (all of ``us`` for None), made in one array (the floats turned into int64 in place, a block at a time)."""
    ns = us.copy() if rows is None else us[rows]
    ns -= t0
    ns *= 1e3
    np.rint(ns, out=ns)
    out = ns.view(np.int64)
    for at in range(0, len(ns), _BLOCK):
        part = ns[at:at + _BLOCK].astype(np.int64)   # read before its bytes are overwritten
        part += (thread[at:at + _BLOCK] if rows is None else thread[rows[at:at + _BLOCK]]).astype(np.int64) << 44
        out[at:at + _BLOCK] = part
    return out


def depth(cpu: dict) -> tuple[np.ndarray, np.ndarray]:
    """Nesting depth of each CPU op within its thread: how many ops of the same
    thread are open when it starts (CPU ops of one thread nest properly); and the
    order it found them in, which the CPU-op nest reuses (:class:`tracekit.analysis.metrics.nest.Nest`).

    ``cpu``: the cpu table's columns (pid, tid categorical; ts, dur, end), sorted by
    ts. With ops ordered by (thread, start, longer
    first), an op's depth is the ops started before it in its thread minus
    those that ended by its start. Keys pack the thread in the high bits of
    integer nanoseconds, so one sort of the ends serves every thread at once:
    counts from threads sorted earlier cancel. Returns (depth: int8, or the narrowest wider int
    that holds the deepest nesting, aligned with ``cpu``; order: int32 rows by (thread, start,
    longer first)).
    """
    n = len(cpu["ts"])
    if n == 0:
        return np.zeros(0, dtype=np.int8), np.zeros(0, dtype=np.int32)
    pid, tid = cpu["pid"].codes, cpu["tid"].codes
    tids = int(tid.max()) + 1
    thread = pid.astype(np.int32 if (int(pid.max()) + 1) * tids < 2**31 else np.int64)
    thread *= tids
    thread += tid
    # Rows are in ts order: a stable sort by thread (a radix sort of small ints) gives
    # (thread, start, row); ties of start within a thread are then put longer first.
    order = np.argsort(thread.astype(np.int16) if thread.max() < 2**15 else thread, kind="stable")
    t0 = cpu["ts"][0]

    end = _key(cpu["end"], None, thread, t0)
    end.sort()
    s = _key(cpu["ts"], order, thread, t0)
    del thread
    tie = np.zeros(n, dtype=bool)
    np.equal(s[1:], s[:-1], out=tie[1:])
    tie[:-1] |= tie[1:]
    if tie.any():
        at = np.flatnonzero(tie)
        fix = np.lexsort((-cpu["dur"][order[at]], s[at]))
        order[at], s[at] = order[at][fix], s[at][fix]
    del tie
    for at in range(0, n, _BLOCK):  # each op's depth in place of its start key
        part = s[at:at + _BLOCK]
        ended = np.searchsorted(end, part, side="right")
        ended -= np.arange(at, at + len(part))
        np.maximum(np.negative(ended, out=ended), 0, out=part)
    del end
    deepest = int(s.max())
    out = np.empty(n, dtype=np.int8 if deepest < 2**7 else np.int16 if deepest < 2**15 else np.int32)
    out[order] = s
    return out, order.astype(np.int32)


STEP_PAST_INT64 = "ProfilerStep markers numbered past int64 (not taken as iterations)"


def markers(cpu: pd.DataFrame, problems: Counter | None = None) -> pd.DataFrame:
    """Iteration markers (``ProfilerStep#N`` CPU ops): step, ts, dur, end, one row per
    step (nested ranges of the same step, cpu_op and user_annotation, collapse to the first).
    A marker whose N does not fit a step (int64) is not one; such CPU ops are counted in
    ``problems`` (``STEP_PAST_INT64``)."""
    names = cpu["name"].cat.categories
    found = {i: int(m.group(1)) for i, n in enumerate(names) if (m := ITERATION_MARKER.match(str(n)))}
    steps = {i: n for i, n in found.items() if n < 2**63}
    if len(steps) < len(found) and problems is not None:
        past = [i for i in found if i not in steps]
        problems[STEP_PAST_INT64] += int(np.isin(cpu["name"].cat.codes.to_numpy(), past).sum())
    if not steps:
        return pd.DataFrame({c: pd.Series(dtype=_DTYPES[c]) for c in MARKER_COLUMNS + ["end"]})
    codes = cpu["name"].cat.codes.to_numpy()
    step_of = np.full(len(names), -1, dtype=np.int64)
    step_of[list(steps)] = list(steps.values())
    hit = step_of[codes] >= 0
    found = pd.DataFrame({"step": step_of[codes[hit]], "ts": cpu["ts"].to_numpy()[hit],
                          "dur": cpu["dur"].to_numpy()[hit], "end": cpu["end"].to_numpy()[hit]})
    return found.drop_duplicates("step").reset_index(drop=True)


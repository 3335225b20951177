"""Decoded events -> typed columns, a chunk at a time, with no Python tuple per event.

Events are bucketed once by (ph, cat); each bucket becomes numpy columns
through list comprehensions over struct attributes, which is several times
faster than building a row per event. Strings (names, pid/tid labels) are
held as categoricals while chunks are built (cheap to pass between processes:
codes plus the few distinct strings) and become object columns sharing one
str per distinct value at the end, so a million launches of one kernel hold
one name string.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from tracekit.trace.schema import Args, Event
from tracekit.trace.stream import decode_chunk, decode_range, no_gc

# Kineto category names, old (capitalised, torch < 1.11) and new, mapped to ours.
GPU_OP_KINDS = {
    "kernel": "kernel", "Kernel": "kernel",
    "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
    "gpu_memset": "memset", "Memset": "memset",
}
HOST_CALL_KINDS = {
    "cuda_runtime": "runtime", "Runtime": "runtime",
    "cuda_driver": "driver", "Driver": "driver",
}
CPU_OP_CATS = {"cpu_op", "Operator", "user_annotation", "python_function"}
# Kineto (2023+) records the GPU side of a synchronization (stream/event/context
# sync, stream-wait-event) as "cuda_sync" events on the GPU timeline.
SYNC_CAT = "cuda_sync"
FLOW_CAT = "ac2g"
# torch.profiler's schedule wraps each step in a "ProfilerStep#N" range.
ITERATION_MARKER = re.compile(r"^ProfilerStep#(\d+)$")  # Kineto's flow from a launch (ph "s") to its GPU op (ph "f")

GPU_COLUMNS = ["kind", "name", "device", "stream", "ts", "dur", "correlation", "external_id",
               "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
               "registers", "shared_memory", "occupancy_pct", "bytes"]
HOST_COLUMNS = ["api", "name", "pid", "tid", "ts", "dur", "correlation", "external_id"]
CPU_COLUMNS = ["cat", "name", "pid", "tid", "ts", "dur", "external_id"]
MARKER_COLUMNS = ["step", "ts", "dur"]
FLOW_COLUMNS = ["id", "ph", "pid", "tid", "ts"]
# Events that are, or may carry the metadata of, a collective: NCCL/RCCL kernels, torch's
# record_param_comms, nccl:*/gloo:* annotations, c10d::* ops. Checked on distinct names only.
COMM_EVENT = re.compile(r"nccl|rccl|gloo|c10d::|record_param_comms", re.I)
COMM_ARGS = ["collective", "in_msg_nelems", "out_msg_nelems", "group_size", "dtype", "pg_name", "pg_desc",
             "pg_ranks", "seq"]
_COMM_TEXT = {"collective", "dtype", "pg_name", "pg_desc", "pg_ranks"}
COMM_COLUMNS = ["table", "name", "pid", "tid", "ts", "dur", "correlation", "external_id", *COMM_ARGS]

# Two events equal on these (numeric, so cheap to hash) columns are one event
# written twice (a trace merged with itself, a buffer flushed twice): Kineto gives
# every op its own correlation / external id, and ts has ns resolution.
DEDUP_KEYS = {
    "gpu": ["ts", "dur", "device", "stream", "correlation"],
    "host": ["ts", "dur", "correlation", "external_id"],
    "cpu": ["ts", "dur", "external_id"],
    "comms": ["ts", "dur", "correlation", "external_id", "name"],
}

_NO_ARGS = Args()


def _num(value) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return np.nan
    return np.nan


def _int(value) -> float:
    if isinstance(value, str):
        try:
            return float(int(value, 0))  # ROCm writes "0x0"
        except ValueError:
            return np.nan
    return _num(value)


def floats(values: list) -> np.ndarray:
    """float64 array; None and non-numeric values become NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_num(v) for v in values], dtype=np.float64)


def ints(values: list, default: int = -1) -> np.ndarray:
    """int64 array; None and unparsable values become ``default``; "0x1f" parses."""
    try:
        a = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        a = np.array([_int(v) for v in values], dtype=np.float64)
    a[~np.isfinite(a)] = default
    return a.astype(np.int64)


def strings(values: list) -> pd.Categorical:
    """``values`` as a categorical of str; non-str values (int pids) are str()-ed once each."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=False)
    if all(isinstance(u, str) for u in uniques):
        return pd.Categorical.from_codes(codes, categories=pd.Index(uniques, dtype=object), validate=False)
    return strings(list(np.array([str(u) for u in uniques], dtype=object)[codes]))


def labels(values: list) -> pd.Categorical:
    """pid/tid values as a categorical of str: the usual all-int case without hashing each."""
    try:
        a = np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return strings(values)
    uniques, codes = np.unique(a, return_inverse=True)
    return pd.Categorical.from_codes(codes.reshape(-1), categories=pd.Index([str(u) for u in uniques], dtype=object),
                                     validate=False)


def _dims(args: list[Args], attr: str) -> list[np.ndarray]:
    vals = [getattr(a, attr) for a in args]
    try:
        cols = np.array(vals, dtype=np.float64)
    except (TypeError, ValueError):
        cols = None
    if cols is None or cols.shape != (len(vals), 3):
        rows = [v[:3] if isinstance(v, list) and len(v) >= 3 else (np.nan,) * 3 for v in vals]
        cols = np.array(rows, dtype=np.float64).reshape(-1, 3)
    return [cols[:, 0], cols[:, 1], cols[:, 2]]


class TableBuilder:
    """Accumulate chunks of decoded events; :meth:`tables` returns the DataFrames.

    Damaged events are mended or dropped, and counted in ``problems``
    (problem -> count): a complete event (``ph == "X"``) without a numeric
    ``ts`` or with a negative ``dur`` is dropped; a missing or non-numeric
    ``dur`` counts as 0 µs; an exact duplicate of an event (same table key,
    see ``DEDUP_KEYS``) is dropped.
    """

    def __init__(self):
        self.parts: dict[str, list[pd.DataFrame]] = defaultdict(list)
        self.problems: Counter[str] = Counter()
        self.events = 0

    def add(self, events: list[Event]) -> None:
        self.events += len(events)
        buckets: dict[str, list[Event]] = defaultdict(list)
        for e in events:
            buckets[e.cat].append(e)
        for cat, evs in buckets.items():
            if cat == FLOW_CAT:
                self._flows(evs)
                continue
            if cat in GPU_OP_KINDS:
                table = ("gpu", self._gpu, GPU_OP_KINDS[cat])
            elif cat in HOST_CALL_KINDS:
                table = ("host", self._host, HOST_CALL_KINDS[cat])
            elif cat in CPU_OP_CATS:
                table = ("cpu", self._cpu, cat)
            elif cat == SYNC_CAT:
                table = ("syncs", self._gpu, "sync")
            else:
                continue
            self._complete(*table[:1], [e for e in evs if e.ph == "X"], *table[1:])

    def _flows(self, evs: list[Event]) -> None:
        evs = [e for e in evs if e.ph in ("s", "f")]
        ts = floats([e.ts for e in evs])
        keep = np.isfinite(ts)
        if not keep.all():
            evs = [e for e, k in zip(evs, keep) if k]
            ts = ts[keep]
        self.parts["flows"].append(pd.DataFrame({
            "id": ints([e.id for e in evs]), "ph": strings([e.ph for e in evs]),
            "pid": labels([e.pid for e in evs]), "tid": labels([e.tid for e in evs]), "ts": ts}))

    def _complete(self, table: str, evs: list[Event], build, label: str) -> None:
        ts = floats([e.ts for e in evs])
        dur = floats([e.dur for e in evs])
        no_dur = ~np.isfinite(dur)
        if no_dur.any():
            self.problems["events without a numeric dur (taken as 0 µs)"] += int(no_dur.sum())
            dur[no_dur] = 0.0
        bad_ts, negative = ~np.isfinite(ts), dur < 0
        if bad_ts.any() or negative.any():
            self.problems["events without a numeric ts dropped"] += int(bad_ts.sum())
            self.problems["events with a negative dur dropped"] += int((negative & ~bad_ts).sum())
            keep = ~(bad_ts | negative)
            evs = [e for e, k in zip(evs, keep) if k]
            ts, dur = ts[keep], dur[keep]
        if not evs:
            return
        args = [e.args or _NO_ARGS for e in evs]
        names = strings([e.name for e in evs])
        self.parts[table].append(build(label, evs, args, names, ts, dur))
        if table in ("gpu", "cpu"):
            self._comms(table, evs, args, names, ts, dur)

    def _comms(self, table, evs, args, names, ts, dur) -> None:
        """Rows of the ``comms`` table: the events named like a collective, with its metadata args."""
        comm = [n for n in names.categories if COMM_EVENT.search(n)]
        if not comm:
            return
        hit = np.flatnonzero(names.isin(comm))
        evs, args = [evs[i] for i in hit], [args[i] for i in hit]
        cols = {"table": "gpu_ops" if table == "gpu" else "cpu_ops", "name": names[hit].remove_unused_categories(),
                "pid": labels([e.pid for e in evs]), "tid": labels([e.tid for e in evs]), "ts": ts[hit],
                "dur": dur[hit], "correlation": ints([a.correlation for a in args]),
                "external_id": ints([a.external_id for a in args])}
        for col in COMM_ARGS:
            values = [getattr(a, col) for a in args]
            cols[col] = (np.array([None if v is None else str(v) for v in values], dtype=object)
                         if col in _COMM_TEXT else floats([v if isinstance(v, (int, float, str)) else None
                                                           for v in values]))
        self.parts["comms"].append(pd.DataFrame(cols))

    def _gpu(self, kind, evs, args, names, ts, dur) -> pd.DataFrame:
        device = ints([a.device for a in args])
        # Kineto puts a GPU op's device in pid and its stream in tid as well as in args.
        no_dev = device < 0
        if no_dev.any():
            device[no_dev] = ints([e.pid for e in evs], default=0)[no_dev]
        stream = ints([a.stream for a in args])
        no_stream = stream < 0
        if no_stream.any():
            stream[no_stream] = ints([e.tid for e in evs])[no_stream]
        gx, gy, gz = _dims(args, "grid")
        bx, by, bz = _dims(args, "block")
        return pd.DataFrame({
            "kind": kind, "name": names, "device": device, "stream": stream, "ts": ts, "dur": dur,
            "correlation": ints([a.correlation for a in args]), "external_id": ints([a.external_id for a in args]),
            "grid_x": gx, "grid_y": gy, "grid_z": gz, "block_x": bx, "block_y": by, "block_z": bz,
            "registers": floats([a.registers for a in args]),
            "shared_memory": floats([a.shared_memory for a in args]),
            "occupancy_pct": floats([a.occupancy_pct for a in args]),
            "bytes": floats([a.bytes for a in args]),
        })

    def _host(self, api, evs, args, names, ts, dur) -> pd.DataFrame:
        return pd.DataFrame({
            "api": api, "name": names, "pid": labels([e.pid for e in evs]),
            "tid": labels([e.tid for e in evs]), "ts": ts, "dur": dur,
            "correlation": ints([a.correlation for a in args]), "external_id": ints([a.external_id for a in args]),
        })

    def _cpu(self, cat, evs, args, names, ts, dur) -> pd.DataFrame:
        # Iteration markers: checking the few distinct names beats a test per event.
        steps = {n: int(m.group(1)) for n in names.categories if (m := ITERATION_MARKER.match(n))}
        if steps:
            hit = names.isin(list(steps))
            self.parts["markers"].append(pd.DataFrame({
                "step": [steps[n] for n in names[hit]], "ts": ts[hit], "dur": dur[hit]}))
        return pd.DataFrame({
            "cat": cat, "name": names, "pid": labels([e.pid for e in evs]),
            "tid": labels([e.tid for e in evs]), "ts": ts, "dur": dur,
            "external_id": ints([a.external_id for a in args]),
        })

    def merge(self, parts: dict[str, list[pd.DataFrame]], events: int, problems: Counter) -> None:
        """Take over the tables another builder made (in a worker process)."""
        for key, frames in parts.items():
            self.parts[key] += frames
        self.events += events
        self.problems += problems

    def _dedup(self, df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
        """Drop exact twins. Twins share ts, so only rows whose ts equals a
        neighbour's (in ts order) are compared: a handful in a sound trace."""
        ts = df["ts"].to_numpy()
        tie = np.zeros(len(ts), dtype=bool)
        tie[1:] = ts[1:] == ts[:-1]
        tie[:-1] |= tie[1:]
        if not tie.any():
            return df
        dup = df[tie].duplicated(keys)
        if not dup.any():
            return df
        self.problems["duplicated events dropped"] += int(dup.sum())
        return df.drop(index=dup.index[dup]).reset_index(drop=True)

    def table(self, key: str, columns: list[str], end: bool = True) -> pd.DataFrame:
        """One table: the chunks concatenated, sorted by ts (stable), with ``end = ts + dur``."""
        parts = self.parts.get(key)
        if parts:
            df = pd.concat(parts, ignore_index=True)
            for col in df.columns:
                if isinstance(parts[0][col].dtype, pd.CategoricalDtype):
                    df[col] = _objects([p[col] for p in parts])
        else:
            df = pd.DataFrame({c: pd.Series(dtype=_DTYPES.get(c, object)) for c in columns})
        df = df.sort_values("ts", kind="stable").reset_index(drop=True)
        if key in DEDUP_KEYS and len(df) > 1:
            df = self._dedup(df, DEDUP_KEYS[key])
        if end:
            df["end"] = df["ts"] + df["dur"]
        return df


def _objects(parts: list[pd.Series]) -> np.ndarray:
    """Chunks of a categorical column as one object array (one str per distinct value)."""
    cat = union_categoricals([p.array for p in parts])
    return np.asarray(cat.categories, dtype=object)[cat.codes]


_DTYPES = {"step": np.int64, "ts": np.float64, "dur": np.float64, "device": np.int64, "stream": np.int64,
           "correlation": np.int64, "external_id": np.int64, "id": np.int64,
           **{c: np.float64 for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                                      "registers", "shared_memory", "occupancy_pct", "bytes",
                                      "in_msg_nelems", "out_msg_nelems", "group_size", "seq")}}


def build_chunk(data: bytes | tuple) -> tuple[dict[str, list[pd.DataFrame]], int, int]:
    """Decode one chunk and build its tables (runs in a worker process).

    Args:
        data: JSON array text from ``iter_events(raw=True)``, or
            (path, open, close) of a range from ``split_file``.

    Returns:
        (parts, events, problems) for :meth:`TableBuilder.merge`.

    Raises:
        StreamError: the chunk is not a JSON array of events.
    """
    builder = TableBuilder()
    with no_gc():
        builder.add(decode_chunk(data) if isinstance(data, bytes) else decode_range(*data))
    return dict(builder.parts), builder.events, builder.problems

"""Decoded events -> numpy columns, a chunk at a time, with no Python code run per event.

Runs in the reader's worker processes, so it needs numpy and msgspec only (no
pandas). Each column is pulled out of the chunk's decoded structs in one
C-level pass (``map`` over an ``operator.attrgetter``) and converted by numpy;
events are routed to their table by factorizing their category once, not by a
test per event. Strings (names, pid/tid labels) travel as :class:`Strings`:
int32 codes plus the chunk's few distinct values, so a million launches of one
kernel carry one name string between processes.

Damaged events are mended or dropped, and counted in ``Chunk.problems``
(problem -> count): a complete event (``ph == "X"``) without a numeric ``ts``
or with a negative ``dur`` is dropped; a missing or non-numeric ``dur`` counts
as 0 µs.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter
from typing import get_args

import msgspec
import numpy as np

from tracekit.trace.decode import NOT_AN_EVENT, Strict, decode_chunk, no_gc
from tracekit.trace.schema import NO_ARGS, Args, Category, Event, LeanEvent, StrictEvent, Trace
from tracekit.trace.stream import decode_range, decode_tail
from tracekit.trace.values import Strings, factorize, floats, ints, pick, strings

# Kineto category names, old (capitalised, torch < 1.11) and new, mapped to ours.
GPU_OP_KINDS = {
    "kernel": "kernel", "Kernel": "kernel",
    "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
    "gpu_memset": "memset", "Memset": "memset",
}
# Device ops of other accelerators: MTIA's command-processor events (libkineto ActivityType
# MTIA_CCP_EVENTS); Intel XPU and AMD ROCm traces use the kernel/gpu_memcpy names above.
GPU_OP_KINDS["mtia_ccp_events"] = "kernel"
HOST_CALL_KINDS = {
    "cuda_runtime": "runtime", "Runtime": "runtime",
    "cuda_driver": "driver", "Driver": "driver",
    "mtia_runtime": "runtime", "xpu_runtime": "runtime", "xpu_driver": "driver",
    "privateuse1_runtime": "runtime", "privateuse1_driver": "driver",
}
# CPU op categories -> the ``cat`` their rows get (2021 traces say Operator and Python).
CPU_OP_CATS = {"cpu_op": "cpu_op", "Operator": "cpu_op", "user_annotation": "user_annotation",
               "python_function": "python_function", "Python": "python_function"}
# Kineto (2023+) records the GPU side of a synchronization (stream/event/context
# sync, stream-wait-event) as "cuda_sync" events on the GPU timeline.
SYNC_CAT = "cuda_sync"
# torch.profiler's schedule wraps each step in a "ProfilerStep#N" range.
ITERATION_MARKER = re.compile(r"^ProfilerStep#(\d+)$")

GPU_COLUMNS = ["kind", "name", "device", "stream", "ts", "dur", "correlation", "external_id",
               "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
               "registers", "shared_memory", "occupancy_pct", "bytes"]
HOST_COLUMNS = ["api", "name", "pid", "tid", "ts", "dur", "correlation", "external_id"]
CPU_COLUMNS = ["cat", "name", "pid", "tid", "ts", "dur", "external_id", "sequence"]  # sequence: autograd's, -1 none
# GPU-side syncs: a wait's stream and the correlation id of the cudaEventRecord it waits on (-1: none).
SYNC_COLUMNS = GPU_COLUMNS + ["wait_on_stream", "wait_on_correlation"]
MARKER_COLUMNS = ["step", "ts", "dur"]
# Events that are, or may carry the metadata of, a collective: NCCL/RCCL kernels, torch's
# record_param_comms, nccl:*/gloo:* annotations, c10d::* ops. Checked on distinct names only.
COMM_EVENT = re.compile(r"nccl|rccl|gloo|c10d::|record_param_comms", re.I)
COMM_ARGS = ["collective", "in_msg_nelems", "out_msg_nelems", "group_size", "dtype", "pg_name", "pg_desc",
             "pg_ranks", "seq"]
COMM_TEXT = ["collective", "dtype", "pg_name", "pg_desc", "pg_ranks"]  # object columns: str or None
COMM_COLUMNS = ["table", "name", "pid", "tid", "ts", "dur", "correlation", "external_id", *COMM_ARGS]

# table -> its columns, and category -> (table, the label its rows get: kind, api or cat);
# the comms table takes its rows from the gpu and cpu tables' (see _comms).
TABLES = {"gpu": GPU_COLUMNS, "host": HOST_COLUMNS, "cpu": CPU_COLUMNS, "syncs": SYNC_COLUMNS, "comms": COMM_COLUMNS}
ROUTES = {**{c: ("gpu", k) for c, k in GPU_OP_KINDS.items()},
          **{c: ("host", k) for c, k in HOST_CALL_KINDS.items()},
          **{c: ("cpu", label) for c, label in CPU_OP_CATS.items()},
          SYNC_CAT: ("syncs", "sync")}
_GPU_ARGS = ("registers", "shared_memory", "occupancy_pct", "bytes")
KNOWN_CATEGORIES = frozenset(get_args(Category))


@dataclass
class Chunk:
    """The columns one chunk of events gave: table -> column -> array or :class:`Strings`."""

    tables: dict[str, dict[str, np.ndarray | Strings]] = field(default_factory=dict)
    events: int = 0
    problems: Counter = field(default_factory=Counter)
    header: Trace | None = None  # the file's keys after the events, for the chunk at its end
    categories: Counter = field(default_factory=Counter)  # events per category ("cat")
    # table -> (earliest ts, latest ts + dur) of its rows, µs: the reader's outlier check
    # passes over a whole table only when some chunk reaches outside its window
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)
    # complete events of a category Kineto does not write that carry a device or a stream arg, by
    # category: GPU activity the tables leave out (trace integrity says so)
    unknown_device: Counter = field(default_factory=Counter)


def _dims(args: list[Args], attr: str) -> list[np.ndarray]:
    vals = list(map(attrgetter(attr), args))
    try:
        cols = np.array(vals, dtype=np.float64)
    except (TypeError, ValueError):
        cols = None
    if cols is None or cols.shape != (len(vals), 3):
        rows = [v[:3] if isinstance(v, list) and len(v) >= 3 else (np.nan,) * 3 for v in vals]
        cols = np.array(rows, dtype=np.float64).reshape(-1, 3)
    return [cols[:, 0], cols[:, 1], cols[:, 2]]


_KEY = attrgetter("cat", "ph", "pid", "tid")


def tabulate(events: list[Event]) -> Chunk:
    """The columns of every table (see ``TABLES``) from one chunk of decoded events.

    Each field is pulled from every event once; an event's table, label, pid and
    tid come from factorizing its (cat, ph, pid, tid), which takes few distinct
    values. Rows keep the events' order in the file; tables are sorted later,
    once (:mod:`tracekit.trace.dataframes`).
    """
    chunk = Chunk(events=len(events))
    if not events:
        return chunk
    key_codes, keys = factorize(list(map(_KEY, events)))
    for (cat, _, _, _), n in zip(keys, np.bincount(key_codes, minlength=len(keys)).tolist()):
        chunk.categories[cat] += n
    if NOT_AN_EVENT in chunk.categories:
        chunk.problems["items of traceEvents that are no event object dropped"] += chunk.categories.pop(NOT_AN_EVENT)
    routes = [ROUTES.get(cat, (None, None)) for cat, _, _, _ in keys]
    fits = np.array([table is not None and ph == "X" for (table, _), (_, ph, _, _) in zip(routes, keys)])[key_codes]
    ts_all = floats(list(map(attrgetter("ts"), events)))
    dur_all = floats(list(map(attrgetter("dur"), events)))
    names = strings(list(map(attrgetter("name"), events)))
    if isinstance(events[0], LeanEvent) and any(COMM_EVENT.search(v) for v in names.values):
        raise NeedsCollectiveArgs  # LeanEvent has no collective metadata
    args_all = list(map(attrgetter("args"), events))
    if not isinstance(events[0], StrictEvent) and None in args_all:  # a StrictEvent's args are never None
        args_all = [a or NO_ARGS for a in args_all]
    ext_all = ints(list(map(attrgetter("external_id"), args_all)))
    per_key = {c: strings([v[i] for v in keys]) for i, c in ((2, "pid"), (3, "tid"))}
    per_key["label"] = strings([label for _, label in routes])
    key_table = np.array([table or "" for table, _ in routes], dtype=object)

    def by_key(column: str, rows: np.ndarray) -> Strings:
        s = per_key[column]
        return Strings(s.codes[key_codes[rows]], s.values)

    comms: dict[str, tuple[np.ndarray, ...]] = {}
    for table in TABLES:
        rows = np.flatnonzero(fits & (key_table == table)[key_codes])
        if len(rows) == 0:
            continue
        ts = ts_all[rows]
        dur = dur_all[rows]
        no_dur = ~np.isfinite(dur)
        if no_dur.any():
            chunk.problems["events without a numeric dur (taken as 0 µs)"] += int(no_dur.sum())
            dur[no_dur] = 0.0
        bad_ts, negative = ~np.isfinite(ts), dur < 0
        if bad_ts.any() or negative.any():
            chunk.problems["events without a numeric ts dropped"] += int(bad_ts.sum())
            chunk.problems["events with a negative dur dropped"] += int((negative & ~bad_ts).sum())
            keep = ~(bad_ts | negative)
            rows, ts, dur = rows[keep], ts[keep], dur[keep]
        if len(rows) == 0:
            continue
        cols = {TABLES[table][0]: by_key("label", rows), "name": Strings(names.codes[rows], names.values),
                "ts": ts, "dur": dur, "external_id": ext_all[rows]}
        if table in ("gpu", "syncs"):
            cols.update(_gpu_columns(pick(events, rows), args := pick(args_all, rows)))
            if table == "syncs":
                cols.update((c, ints(list(map(attrgetter(c), args)))) for c in ("wait_on_stream", "wait_on_correlation"))
        else:
            cols.update(pid=by_key("pid", rows), tid=by_key("tid", rows))
            if table == "cpu":
                cols["sequence"] = ints(list(map(attrgetter("sequence"), pick(args_all, rows))))
            if table == "host":
                cols["correlation"] = ints(list(map(attrgetter("correlation"), pick(args_all, rows))))
        chunk.tables[table] = cols
        chunk.spans[table] = _span(ts, dur)
        if table in ("gpu", "cpu"):
            comms[table] = (rows, ts, dur)
    if comms:
        _comms(chunk, comms, names, by_key, args_all, ext_all)
    _unknown_device(chunk, keys, key_codes, args_all)
    return chunk


def _unknown_device(chunk: Chunk, keys: list, key_codes: np.ndarray, args: list[Args]) -> None:
    """Count, by category, the complete events of categories Kineto does not write (``KNOWN_CATEGORIES``)
    whose args name a device or a stream: device work under a name the reader does not route."""
    for i, (cat, ph, _, _) in enumerate(keys):
        if ph == "X" and cat not in KNOWN_CATEGORIES:
            on = [a for a in pick(args, np.flatnonzero(key_codes == i)) if a.device is not None or a.stream is not None]
            if on:
                chunk.unknown_device[cat] += len(on)


def _comms(chunk: Chunk, parts: dict, names: Strings, by_key, args: list[Args], ext: np.ndarray) -> None:
    """The ``comms`` table's columns: the gpu and cpu rows (``parts``: table -> (rows, ts,
    dur) of the events kept) named like a collective (``COMM_EVENT``), in file order, with
    their collective metadata args: text ones as str (or None), the others as float."""
    is_comm = np.array([COMM_EVENT.search(v) is not None for v in names.values])
    picked = [(table, rows[hit], ts[hit], dur[hit]) for table, (rows, ts, dur) in parts.items()
              if (hit := is_comm[names.codes[rows]]).any()]
    if not picked:
        return
    rows = np.concatenate([p[1] for p in picked])
    order = np.argsort(rows, kind="stable")
    rows = rows[order]
    table = np.concatenate([np.full(len(p[1]), i, dtype=np.int32) for i, p in enumerate(picked)])[order]
    args = pick(args, rows)
    cols = {"table": Strings(table, [f"{p[0]}_ops" for p in picked]),
            "name": Strings(names.codes[rows], names.values), "pid": by_key("pid", rows), "tid": by_key("tid", rows),
            "ts": np.concatenate([p[2] for p in picked])[order], "dur": np.concatenate([p[3] for p in picked])[order],
            "correlation": ints(list(map(attrgetter("correlation"), args))), "external_id": ext[rows]}
    for col in COMM_ARGS:
        values = list(map(attrgetter(col), args))
        cols[col] = (np.array([None if v is None else str(v) for v in values], dtype=object) if col in COMM_TEXT
                     else floats([v if isinstance(v, (int, float, str)) else None for v in values]))
    chunk.tables["comms"] = cols
    chunk.spans["comms"] = _span(cols["ts"], cols["dur"])


def _span(ts: np.ndarray, dur: np.ndarray) -> tuple[float, float]:
    """(earliest start, latest end) in µs of rows with these (non-empty) ts and dur."""
    return float(ts.min()), float((ts + dur).max())


def _gpu_columns(evs: list[Event], args: list[Args]) -> dict[str, np.ndarray]:
    """The columns of GPU ops (and GPU-side syncs) from their args."""
    # Kineto puts a GPU op's device in pid and its stream in tid as well as in args.
    device = ints(list(map(attrgetter("device"), args)))
    if (no_dev := device < 0).any():
        device[no_dev] = ints(list(map(attrgetter("pid"), evs)), default=0)[no_dev]
    stream = ints(list(map(attrgetter("stream"), args)))
    if (no_stream := stream < 0).any():
        stream[no_stream] = ints(list(map(attrgetter("tid"), evs)))[no_stream]
    cols = {"device": device, "stream": stream, "correlation": ints(list(map(attrgetter("correlation"), args)))}
    for dim in ("grid", "block"):
        cols.update(zip((f"{dim}_x", f"{dim}_y", f"{dim}_z"), _dims(args, dim)))
    cols.update({c: floats(list(map(attrgetter(c), args))) for c in _GPU_ARGS})
    return cols


class NeedsCollectiveArgs(Exception):
    """A chunk decoded as :class:`LeanEvent` holds collectives: decode it with their args."""


def build_chunk(data: bytes | tuple) -> Chunk:
    """Decode one chunk and tabulate it (runs in a worker process).

    Args:
        data: JSON array text from ``iter_events(raw=True)``; (path, open, close)
            of a range from ``split_file``; or (path, tail_at), the file's end
            (its header keys after the events are returned in ``Chunk.header``).

    Raises:
        StreamError: the chunk is not a JSON array of events (or the end, not
            the end of a trace).
    """
    with no_gc():
        if isinstance(data, bytes) or len(data) == 3:
            def decode(lean: bool) -> list[Event]:
                return decode_chunk(data, lean) if isinstance(data, bytes) else decode_range(*data, lean)
            try:
                return tabulate(decode(lean=True))
            except NeedsCollectiveArgs:  # a trace with collectives: their args, here and from now on
                Strict.lean = False
                return tabulate(decode(lean=False))
        tail = decode_tail(*data)
        chunk = tabulate(tail.traceEvents)
        chunk.header = msgspec.structs.replace(tail, traceEvents=[])
        return chunk

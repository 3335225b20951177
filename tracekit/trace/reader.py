"""Read a Kineto / Chrome trace file into typed columnar event tables.

Every analyzer reads :class:`EventTables`, never raw JSON. Timestamps stay
float µs as Kineto writes them.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pandas as pd

from tracekit.trace.columns import (CPU_COLUMNS, FLOW_COLUMNS, GPU_COLUMNS, HOST_COLUMNS, MARKER_COLUMNS,
                                    TableBuilder, build_chunk)
from tracekit.trace.schema import Trace
from tracekit.trace.stream import StreamError, iter_events, split_file

TRACE_SUFFIXES = (".json", ".json.gz")


class TraceError(Exception):
    """A trace file that cannot be read; ``str()`` names the file and the problem."""

    def __init__(self, path: Path | str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem


class NotATrace(TraceError):
    """Valid JSON that is not a Chrome/Kineto trace (no ``traceEvents``)."""


@dataclass
class EventTables:
    """The events of one trace file, as pandas DataFrames (one row per event).

    gpu_ops:    kind ('kernel'|'memcpy'|'memset'), name, device, stream, ts, dur,
                end (µs), correlation (-1 if none), external_id, grid_x/y/z,
                block_x/y/z, registers, shared_memory (bytes), occupancy_pct,
                bytes; sorted by ts.
    host_calls: api ('runtime'|'driver'), name, pid, tid, ts, dur, end (µs),
                correlation, external_id; sorted by ts.
    cpu_ops:    cat, name, pid, tid, ts, dur, end (µs), external_id; sorted by ts.
    markers:    iteration markers: step, ts, dur, end (µs); sorted by ts.
    flows:      ac2g flow events: id, ph ('s'|'f'), pid, tid, ts (µs).
    devices:    one row per GPU in ``deviceProperties``: id, name, numSms, ...
    """

    path: Path
    gpu_ops: pd.DataFrame
    host_calls: pd.DataFrame
    cpu_ops: pd.DataFrame
    markers: pd.DataFrame
    flows: pd.DataFrame
    devices: pd.DataFrame
    meta: dict = field(default_factory=dict)

    @property
    def has_gpu(self) -> bool:
        """True when the trace holds at least one GPU op (kernel, memcpy, memset)."""
        return len(self.gpu_ops) > 0


def is_trace_file(path: Path) -> bool:
    """True for names Kineto and Chrome traces use: ``*.json`` or ``*.json.gz``."""
    return path.name.endswith(TRACE_SUFFIXES) and not path.name.endswith("run.json")


def _problem(exc: StreamError) -> TraceError:
    """A user-facing problem for a decode failure (msgspec's message in brackets)."""
    msg = str(exc.__cause__ or exc)
    low = msg.lower()
    if "gzip" in exc.problem:
        return TraceError, exc.problem
    if "missing required field `traceevents`" in low:
        return NotATrace, "JSON without 'traceEvents': not a Kineto/Chrome trace"
    if "expected `object`, got `array`" in low and "$.traceEvents" not in msg:
        return NotATrace, ("a JSON array, not a Kineto trace object "
                           "(an ONNX Runtime profile? read it with the onnx backend)")
    if "truncated" in low:
        return TraceError, "truncated JSON (was the trace cut off mid-write?)"
    if isinstance(exc.__cause__, msgspec.ValidationError):
        return TraceError, f"unexpected trace content ({msg})"
    return TraceError, f"not valid JSON ({msg})"


PARALLEL_MIN_BYTES = 64 << 20  # below this (uncompressed), worker start-up costs more than it saves
GZIP_RATIO = 8                  # Kineto JSON compresses about 8-15x; a conservative guess of the size


class _BadCut(Exception):
    pass


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _workers(path: Path) -> int:
    """Processes to decode with: one per usable core for a large file, else 1."""
    size = path.stat().st_size * (GZIP_RATIO if _is_gzip(path) else 1)
    if size < PARALLEL_MIN_BYTES or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return min(len(os.sched_getaffinity(0)), 8)


def _read(path: Path, builder: TableBuilder) -> Trace:
    header = None
    for item in iter_events(path):
        if isinstance(item, Trace):
            header = item
        else:
            builder.add(item)
    return header


def _read_parallel(path: Path, builder: TableBuilder, workers: int) -> Trace:
    """Cut the file into raw chunks here; decode and tabulate them in ``workers`` processes.

    At most ``workers + 1`` chunks are in flight, so memory stays bounded.
    """
    def take(future: Future) -> None:
        try:
            builder.merge(*future.result())
        except StreamError as exc:
            raise _BadCut from exc

    if _is_gzip(path):
        items = iter_events(path, raw=True)
    else:  # the workers map the file themselves: this process reads only the head and tail
        try:
            ranges, header, tail = split_file(path)
        except StreamError:
            return _read(path, builder)
        items = [*((path, a, b) for a, b in ranges), tail, header]
    header = None
    # fork: workers inherit the imported modules, and nothing re-runs __main__
    # (forkserver/spawn re-import it, which breaks under `python -m` and stdin).
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        pending: deque[Future] = deque()
        for item in items:
            if isinstance(item, (bytes, tuple)):
                pending.append(pool.submit(build_chunk, item))
                while len(pending) > workers:
                    take(pending.popleft())
            elif isinstance(item, Trace):
                header = item
            else:
                builder.add(item)
        while pending:
            take(pending.popleft())
    return header


def load(path: Path | str, workers: int | None = None) -> EventTables:
    """Read one trace file (``.json`` or ``.json.gz``) into :class:`EventTables`.

    The file is streamed in chunks (:mod:`tracekit.trace.stream`), so memory
    holds a few chunks of text at a time plus the columns kept. A large file
    (over ``PARALLEL_MIN_BYTES`` of JSON) is decoded by one worker process per
    core (``workers`` overrides the count; 1 decodes here).

    Raises:
        TraceError: the file is missing, unreadable, empty, not gzip/JSON,
            truncated, or not a Chrome trace object with ``traceEvents``
            (:class:`NotATrace` for the last).
    """
    path = Path(path)
    try:
        if path.is_dir():
            raise TraceError(path, "is a directory, not a trace file")
        if path.stat().st_size == 0:
            raise TraceError(path, "empty file")
        workers = _workers(path) if workers is None else workers
        builder = TableBuilder()
        try:
            header = _read_parallel(path, builder, workers) if workers > 1 else _read(path, builder)
        except _BadCut:  # a chunk cut inside a value: read again with checked cuts
            builder = TableBuilder()
            header = _read(path, builder)
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except StreamError as exc:
        kind, problem = _problem(exc)
        raise kind(path, problem) from None
    return _tables(path, builder, header)


def _tables(path: Path, builder: TableBuilder, header: Trace) -> EventTables:
    gpu_ops = builder.table("gpu", GPU_COLUMNS)
    host_calls = builder.table("host", HOST_COLUMNS)
    cpu_ops = builder.table("cpu", CPU_COLUMNS)
    flows = builder.table("flows", FLOW_COLUMNS, end=False)
    # Nested ProfilerStep ranges of the same step (cpu_op and user_annotation) collapse to one.
    markers = builder.table("markers", MARKER_COLUMNS).drop_duplicates("step").reset_index(drop=True)
    meta = {"trace_name": header.traceName, "cuda_runtime_version": header.cuda_runtime_version,
            "cuda_driver_version": header.cuda_driver_version, "events": builder.events,
            "dropped_events": builder.dropped}
    return EventTables(path=path, gpu_ops=gpu_ops, host_calls=host_calls, cpu_ops=cpu_ops,
                       markers=markers, flows=flows,
                       devices=pd.DataFrame([msgspec.structs.asdict(d) for d in header.deviceProperties]),
                       meta=meta)

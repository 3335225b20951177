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
import numpy as np
import pandas as pd

from tracekit.errors import ExitCode
from tracekit.trace.columns import (COMM_COLUMNS, CPU_COLUMNS, FLOW_COLUMNS, GPU_COLUMNS, HOST_COLUMNS,
                                    MARKER_COLUMNS, TableBuilder, build_chunk)
from tracekit.trace.schema import Trace
from tracekit.trace import ort, stream
from tracekit.trace.stream import StreamError, iter_events, read_ends, split_file

TRACE_SUFFIXES = (".json", ".json.gz")


class TraceError(Exception):
    """A trace file that cannot be read; ``str()`` names the file and the problem,
    ``code`` is the exit code the CLI ends with for it (:class:`tracekit.errors.ExitCode`)."""

    def __init__(self, path: Path | str, problem: str, code: ExitCode = ExitCode.BAD_CONTENT):
        super().__init__(f"{path}: {problem}")
        self.path = Path(path)
        self.problem = problem
        self.code = code


class NotATrace(TraceError):
    """Valid JSON that is not a PyTorch profiler trace (no ``traceEvents``, or none of its events)."""

    def __init__(self, path: Path | str, problem: str):
        super().__init__(path, problem, ExitCode.NOT_A_TRACE)


@dataclass
class EventTables:
    """The events of one trace file, as pandas DataFrames (one row per event).

    gpu_ops:    kind ('kernel'|'memcpy'|'memset'), name, device, stream, ts, dur,
                end (µs), correlation (-1 if none), external_id, grid_x/y/z,
                block_x/y/z, registers, shared_memory (bytes), occupancy_pct,
                bytes; sorted by ts.
    host_calls: api ('runtime'|'driver'), name, pid, tid, ts, dur, end (µs),
                correlation, external_id; sorted by ts.
    cpu_ops:    cat, name, pid, tid, ts, dur, end (µs), external_id, depth (0 for a
                top-level op of its thread, 1 for one inside it, ...); sorted by ts.
    syncs:      GPU-side synchronization waits (Kineto "cuda_sync": Stream Sync,
                Event Sync, Context Sync, Stream Wait Event), same columns as gpu_ops.
    markers:    iteration markers: step, ts, dur, end (µs); sorted by ts.
    flows:      ac2g flow events: id, ph ('s'|'f'), pid, tid, ts (µs).
    devices:    one row per GPU in ``deviceProperties``: id, name, numSms, ...
    comms:      the kernels and CPU ops named like a collective (NCCL/RCCL kernels,
                record_param_comms, nccl:*, gloo:*, c10d::*), also in gpu_ops/cpu_ops,
                with their collective metadata: table ('gpu_ops'|'cpu_ops'), name, pid,
                tid, ts, dur, end (µs), correlation, external_id, collective, in_msg_nelems,
                out_msg_nelems, group_size, dtype, pg_name, pg_desc, pg_ranks, seq (NaN or
                None where the event has no such arg); sorted by ts.
    meta:       trace_name, source, versions, events, problems, and ``distributed``
                (Kineto's distributedInfo: rank, world_size, backend, ...; {} if absent).
    """

    path: Path
    gpu_ops: pd.DataFrame
    host_calls: pd.DataFrame
    cpu_ops: pd.DataFrame
    syncs: pd.DataFrame
    markers: pd.DataFrame
    flows: pd.DataFrame
    devices: pd.DataFrame
    meta: dict = field(default_factory=dict)
    comms: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COMM_COLUMNS + ["end"]))

    @property
    def has_gpu(self) -> bool:
        """True when the trace holds at least one GPU op (kernel, memcpy, memset)."""
        return len(self.gpu_ops) > 0


def is_trace_file(path: Path) -> bool:
    """True for names Kineto and Chrome traces use: ``*.json`` or ``*.json.gz``."""
    return path.name.endswith(TRACE_SUFFIXES) and not path.name.endswith("run.json")


def _error(path: Path, exc: StreamError) -> TraceError:
    """The user-facing error for a decode failure (msgspec's message in brackets)."""
    msg = str(exc.__cause__ or exc)
    low = msg.lower()
    if "gzip" in exc.problem:
        return TraceError(path, exc.problem, ExitCode.CORRUPT_GZIP)
    if "missing required field `traceevents`" in low or "no 'traceevents' key" in low:
        return NotATrace(path, "JSON without 'traceEvents': not a Kineto/Chrome trace")
    if "expected `object`, got `array`" in low and "$.traceEvents" not in msg:
        return NotATrace(path, "a JSON array, not a Kineto trace object "
                               "(an ONNX Runtime profile? read it with the onnx backend)")
    if "truncated" in low:
        return TraceError(path, "truncated JSON (was the trace cut off mid-write?)", ExitCode.TRUNCATED)
    if isinstance(exc.__cause__, UnicodeDecodeError):
        return TraceError(path, f"not valid UTF-8 JSON ({msg})", ExitCode.NOT_JSON)
    if isinstance(exc.__cause__, msgspec.ValidationError):
        return TraceError(path, f"unexpected trace content ({msg})", ExitCode.BAD_CONTENT)
    return TraceError(path, f"not valid JSON ({msg})", ExitCode.NOT_JSON)


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
    """Decode and tabulate the file's chunks in ``workers`` processes.

    A plain file is cut by offsets only; each worker maps its ranges itself, so
    no text passes between processes and this one reads just the two ends. A
    gzip file is gunzipped and cut here, with at most ``workers + 1`` chunks of
    text in flight. Raises _BadCut when a cut fell inside a value.
    """
    def take(future: Future) -> None:
        try:
            builder.merge(*future.result())
        except StreamError as exc:
            raise _BadCut from exc

    header = None
    # fork: workers inherit the imported modules, and nothing re-runs __main__
    # (forkserver/spawn re-import it, which breaks under `python -m` and stdin).
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        pending: deque[Future] = deque()
        if _is_gzip(path):  # this process gunzips and cuts; workers decode
            for item in iter_events(path, raw=True):
                if isinstance(item, bytes):
                    pending.append(pool.submit(build_chunk, item))
                    while len(pending) > workers:
                        take(pending.popleft())
                elif isinstance(item, Trace):
                    header = item
                else:
                    builder.add(item)
        else:  # workers map the file themselves; this process reads only its two ends
            try:
                # about four chunks a worker, so they finish together
                size = path.stat().st_size
                chunk = min(max(size // (4 * workers), min(4 << 20, stream.CHUNK_BYTES)), stream.CHUNK_BYTES)
                ranges, key_at, tail_at = split_file(path, chunk)
            except StreamError:
                return _read(path, builder)  # the serial read gives the precise error
            pending.extend(pool.submit(build_chunk, (path, a, b)) for a, b in ranges)
            try:
                header, tail = read_ends(path, key_at, tail_at)
            except StreamError as exc:
                raise _BadCut from exc
            builder.add(tail)
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
            raise TraceError(path, "is a directory, not a trace file", ExitCode.NOT_FOUND)
        if path.stat().st_size == 0:
            raise TraceError(path, "empty file", ExitCode.NOT_JSON)
        workers = _workers(path) if workers is None else workers
        builder = TableBuilder()
        try:
            header = _read_parallel(path, builder, workers) if workers > 1 else _read(path, builder)
        except _BadCut:  # a chunk cut inside a value: read again with checked cuts
            builder = TableBuilder()
            header = _read(path, builder)
    except FileNotFoundError:
        raise TraceError(path, "no such file", ExitCode.NOT_FOUND) from None
    except PermissionError:
        raise TraceError(path, "permission denied", ExitCode.NOT_FOUND) from None
    except StreamError as exc:
        error = _error(path, exc)
        if not (isinstance(error, NotATrace) and "JSON array" in error.problem):
            raise error from None
        builder, header = TableBuilder(), Trace(traceEvents=[], traceName=ort.SOURCE)
        try:
            found = ort.events(path)
        except (msgspec.DecodeError, msgspec.ValidationError):
            found = None
        if found is None:
            raise NotATrace(path, "a JSON array of events, not a PyTorch profiler trace nor an ONNX Runtime "
                                  "profile (a trace from another tool?)") from None
        builder.add(found)
    tables = _tables(path, builder, header)
    if tables.gpu_ops.empty and tables.host_calls.empty and tables.cpu_ops.empty:
        raise NotATrace(path, f"none of its {builder.events} events is a PyTorch profiler event "
                              "(cpu_op, kernel, cuda_runtime...): a trace from another tool?")
    return tables


def _depth(cpu: pd.DataFrame) -> np.ndarray:
    """Nesting depth of each CPU op within its thread: how many ops of the same
    thread are open when it starts (CPU ops of one thread nest properly).

    With ops sorted by (thread, start, longer first), an op's depth is the ops
    started before it in its thread minus those that ended by its start. Keys
    pack the thread in the high bits of integer nanoseconds, so one sort of
    starts and one of ends serve every thread at once: counts from threads
    sorted earlier cancel. Returns an int64 array aligned with ``cpu``.
    """
    if cpu.empty:
        return np.zeros(0, dtype=np.int64)
    pid, tid = pd.factorize(cpu["pid"])[0], pd.factorize(cpu["tid"])[0]
    thread = (pid.astype(np.int64) * (tid.max() + 1) + tid) << 44
    t0 = cpu["ts"].min()
    start = thread + np.round((cpu["ts"].to_numpy() - t0) * 1e3).astype(np.int64)   # ns, < 2**44 (4.9 h)
    end = thread + np.round((cpu["end"].to_numpy() - t0) * 1e3).astype(np.int64)
    order = np.lexsort((-cpu["dur"].to_numpy(), start))
    depth = np.empty(len(cpu), dtype=np.int64)
    depth[order] = np.arange(len(cpu)) - np.searchsorted(np.sort(end), start[order], side="right")
    return np.maximum(depth, 0)


def _tables(path: Path, builder: TableBuilder, header: Trace) -> EventTables:
    gpu_ops = builder.table("gpu", GPU_COLUMNS)
    host_calls = builder.table("host", HOST_COLUMNS)
    cpu_ops = builder.table("cpu", CPU_COLUMNS)
    cpu_ops["depth"] = _depth(cpu_ops)
    flows = builder.table("flows", FLOW_COLUMNS, end=False)
    # Nested ProfilerStep ranges of the same step (cpu_op and user_annotation) collapse to one.
    markers = builder.table("markers", MARKER_COLUMNS).drop_duplicates("step").reset_index(drop=True)
    meta = {"trace_name": header.traceName, "source": ort.SOURCE if header.traceName == ort.SOURCE else "pytorch", "cuda_runtime_version": header.cuda_runtime_version,
            "cuda_driver_version": header.cuda_driver_version, "events": builder.events,
            "problems": [f"{n} {what}" for what, n in sorted(builder.problems.items()) if n],
            "distributed": header.distributedInfo if isinstance(header.distributedInfo, dict) else {}}
    return EventTables(path=path, gpu_ops=gpu_ops, host_calls=host_calls, cpu_ops=cpu_ops,
                       syncs=builder.table("syncs", GPU_COLUMNS),
                       markers=markers, flows=flows,
                       devices=pd.DataFrame([msgspec.structs.asdict(d) for d in header.deviceProperties]),
                       meta=meta, comms=builder.table("comms", COMM_COLUMNS))

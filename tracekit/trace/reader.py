"""Read a Kineto / Chrome trace file into typed columnar event tables.

Every analyzer reads :class:`EventTables`, never raw JSON. Timestamps stay
float µs as Kineto writes them.
"""

from __future__ import annotations

import ctypes
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from tracekit.errors import ExitCode
from tracekit.trace import decode, ort, stream
from tracekit.trace.columns import Chunk, build_chunk, tabulate
from tracekit.trace.decode import StreamError, merge_header
from tracekit.trace.schema import Trace
from tracekit.trace.stream import iter_events, read_head, split_file

if TYPE_CHECKING:  # pandas is imported when the tables are made, after the workers have started
    from concurrent.futures import Future

    import pandas as pd

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

    String columns (kind, api, cat, name, pid, tid, ph) are categorical, their
    categories sorted. Rows are sorted by ts (stable: file order for equal ts).

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
    meta:       trace_name, source, versions, events, categories (events per ``cat``),
                problems and problem_counts (damage mended or dropped), and ``distributed``
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
    comms: pd.DataFrame
    meta: dict = field(default_factory=dict)
    derived: dict = field(default_factory=dict, repr=False, compare=False)  # see memo

    def memo(self, key: str, source: pd.DataFrame, make):
        """``make()``, computed once while ``source`` (one of these tables) is the same frame:
        what several analyses derive from a table (the CPU-op nest, the launch index)."""
        hit = self.derived.get(key)
        if hit is None or hit[0] is not source:
            self.derived[key] = hit = (source, make())
        return hit[1]

    def forget(self, key: str) -> None:
        """Drop what :meth:`memo` keeps under ``key``, once no analysis needs it (its memory)."""
        self.derived.pop(key, None)

    @property
    def has_gpu(self) -> bool:
        """True when the trace holds at least one GPU op (kernel, memcpy, memset)."""
        return len(self.gpu_ops) > 0


def is_trace_file(path: Path) -> bool:
    """True for names Kineto and Chrome traces use: ``*.json`` or ``*.json.gz``."""
    return path.name.endswith(TRACE_SUFFIXES) and not path.name.endswith("run.json")


def trace_files(folder: Path) -> list[Path]:
    """The trace files directly in ``folder`` (:func:`is_trace_file`), sorted by name."""
    return sorted(p for p in folder.iterdir() if p.is_file() and is_trace_file(p))


def _error(path: Path, exc: StreamError) -> TraceError:
    """The user-facing error for a decode failure (msgspec's message in brackets)."""
    msg = str(exc.__cause__ or exc)
    low = msg.lower()
    if exc.problem == stream.EMPTY:
        return TraceError(path, "empty file (no JSON in it)", ExitCode.NOT_JSON)
    if isinstance(exc.__cause__, RecursionError):
        return TraceError(path, "JSON nested deeper than the decoder allows: not a trace it can read",
                          ExitCode.BAD_CONTENT)
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
PARALLEL_CHUNK_BYTES = 8 << 20  # a worker's chunk: its text and decoded events are all it holds at once
GZIP_RATIO = 8                  # Kineto JSON compresses about 8-15x; a conservative guess of the size


class _BadCut(Exception):
    pass


def _mmap_threshold(size: int) -> None:
    """Have glibc's malloc serve blocks of ``size`` bytes and more by mmap, returned to the
    system when freed. While chunks come in it is 64 KiB (``MMAP_WHILE_READING``): otherwise
    malloc raises its threshold as blocks are freed (up to 32 MiB) and keeps the freed
    columns of hundreds of chunks in its heap, resident beside the tables made of them
    (about 100 MB more at 1 GB of trace). Once every chunk is in it is 32 MiB
    (``MMAP_AFTER_READING``, glibc's own ceiling): the large arrays of the tables and of the
    analyses are then reused from the heap instead of being mapped, zeroed and unmapped one
    by one (at 1 GB, 1 s of the analyses' 4, 0.3 s of the tables' making). No-op where malloc
    is not glibc's."""
    try:
        ctypes.CDLL(None).mallopt(-3, size)  # M_MMAP_THRESHOLD (glibc malloc.h)
    except (OSError, AttributeError):
        pass


MMAP_WHILE_READING, MMAP_AFTER_READING = 64 << 10, 32 << 20


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _workers(path: Path) -> int:
    """Processes to decode with: one per usable core for a large file, else 1."""
    size = path.stat().st_size * (GZIP_RATIO if _is_gzip(path) else 1)
    if size < PARALLEL_MIN_BYTES or not hasattr(os, "fork"):
        return 1
    return min(len(os.sched_getaffinity(0)), 8)


class _Chunks:
    """The chunks of one file as they are tabulated (here or in workers), and its header."""

    def __init__(self):
        self.chunks: list[Chunk] = []
        self.header: Trace | None = None

    def add(self, events: list) -> None:
        self.chunks.append(tabulate(events))


def _read(path: Path) -> _Chunks:
    out = _Chunks()
    for item in iter_events(path):
        if isinstance(item, Trace):
            out.header = item
        else:
            out.add(item)
    return out


def _read_parallel(path: Path, workers: int) -> _Chunks:
    """Decode and tabulate the file's chunks in ``workers`` processes.

    A plain file is cut by offsets only; each worker maps its ranges itself
    (the last one with the keys after the events), so no text passes between
    processes and this one reads just the keys before the events. A gzip file
    is gunzipped and cut here, with at most ``workers + 1`` chunks of text in
    flight. Raises _BadCut when a cut fell inside a value.
    """
    import multiprocessing  # here: only a large file needs them (start-up stays lean)
    from concurrent.futures import ProcessPoolExecutor

    out = _Chunks()

    def take(future: Future) -> None:
        try:
            out.chunks.append(future.result())
        except StreamError as exc:
            raise _BadCut from exc

    # fork: workers inherit the imported modules, and nothing re-runs __main__
    # (forkserver/spawn re-import it, which breaks under `python -m` and stdin).
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        pending: deque[Future] = deque()
        if _is_gzip(path):  # this process gunzips and cuts; workers decode
            for item in iter_events(path, min(stream.CHUNK_BYTES, PARALLEL_CHUNK_BYTES), raw=True):
                if isinstance(item, bytes):
                    pending.append(pool.submit(build_chunk, item))
                    while len(pending) > workers:
                        take(pending.popleft())
                elif isinstance(item, Trace):
                    out.header = item
                else:
                    while pending:  # keep the file's order
                        take(pending.popleft())
                    out.add(item)
        else:  # workers map the file themselves; this process reads only the keys before the events
            try:
                # about eight chunks a worker, so they finish together and hold little at a time
                size = path.stat().st_size
                chunk = min(max(size // (8 * workers), min(4 << 20, stream.CHUNK_BYTES)), PARALLEL_CHUNK_BYTES)
                ranges, key_at, tail_at = split_file(path, chunk)
            except StreamError:
                return _read(path)  # the serial read gives the precise error
            pending.extend(pool.submit(build_chunk, (path, a, b)) for a, b in ranges)
            pending.append(pool.submit(build_chunk, (path, tail_at)))
            try:
                head = read_head(path, key_at)
            except StreamError as exc:
                raise _BadCut from exc
            import pandas  # noqa: F401 - while the workers decode, for the tables after them
            while pending:
                take(pending.popleft())
            out.header = merge_header(head, out.chunks[-1].header)
    return out


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
        if workers > 1:
            _mmap_threshold(MMAP_WHILE_READING)
        decode.Strict.on = decode.Strict.lean = True
        try:
            read = _read_parallel(path, workers) if workers > 1 else _read(path)
        except _BadCut:  # a chunk cut inside a value: read again with checked cuts
            read = _read(path)
    except FileNotFoundError:
        raise TraceError(path, "no such file", ExitCode.NOT_FOUND) from None
    except PermissionError:
        raise TraceError(path, "permission denied", ExitCode.NOT_FOUND) from None
    except StreamError as exc:
        error = _error(path, exc)
        if not (isinstance(error, NotATrace) and "JSON array" in error.problem):
            raise error from None
        read = _Chunks()
        read.header = Trace(traceEvents=[], traceName=ort.SOURCE)
        try:
            found = ort.events(path)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            found = None
        if found is None:
            raise NotATrace(path, "a JSON array of events, not a PyTorch profiler trace nor an ONNX Runtime "
                                  "profile (a trace from another tool?)") from None
        read.add(found)
    if workers > 1:
        _mmap_threshold(MMAP_AFTER_READING)
    tables = _tables(path, read)
    if tables.gpu_ops.empty and tables.host_calls.empty and tables.cpu_ops.empty:
        raise NotATrace(path, f"none of its {tables.meta['events']} events is a PyTorch profiler event "
                              "(cpu_op, kernel, cuda_runtime...): a trace from another tool?")
    return tables


def _tables(path: Path, read: _Chunks) -> EventTables:
    import pandas as pd

    from tracekit.trace.tables import TableBuilder, depth, markers

    builder = TableBuilder()
    for chunk in read.chunks:
        builder.merge(chunk)
    read.chunks = []
    gpu_ops = builder.table("gpu")
    host_calls = builder.table("host")
    cpu_ops = builder.table("cpu", extra=lambda cols: {"depth": depth(cols)})
    header = read.header
    meta = {"trace_name": header.traceName, "source": ort.SOURCE if header.traceName == ort.SOURCE else "pytorch",
            "cuda_runtime_version": header.cuda_runtime_version,
            "cuda_driver_version": header.cuda_driver_version, "events": builder.events,
            "categories": dict(builder.categories.most_common()),
            "distributed": header.distributedInfo if isinstance(header.distributedInfo, dict) else {}}
    tables = EventTables(path=path, gpu_ops=gpu_ops, host_calls=host_calls, cpu_ops=cpu_ops,
                         syncs=builder.table("syncs"), markers=markers(cpu_ops),
                         flows=builder.table("flows", end=False),
                         devices=pd.DataFrame([msgspec.structs.asdict(d) for d in header.deviceProperties]),
                         meta=meta, comms=builder.table("comms"))
    meta["problem_counts"] = {what: n for what, n in sorted(builder.problems.items()) if n}
    meta["problems"] = [f"{n} {what}" for what, n in meta["problem_counts"].items()]
    return tables

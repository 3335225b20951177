"""Read a Kineto / Chrome trace file into typed columnar event tables.

Every analyzer reads :class:`EventTables`, never raw JSON. Timestamps stay
float µs as Kineto writes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from tracekit.errors import ExitCode
from tracekit.trace import decode, ort, stream
from tracekit.trace.chunks import BadCut, Chunks, read_parallel, read_serial, workers_for
from tracekit.trace.decode import StreamError
from tracekit.trace.file_kinds import unreadable_file
from tracekit.trace.malloc import MMAP_AFTER_READING, MMAP_WHILE_READING, mmap_threshold, release_freed
from tracekit.trace.schema import Trace

if TYPE_CHECKING:  # pandas is imported when the tables are made, after the workers have started
    import pandas as pd

TRACE_SUFFIXES = (".json", ".json.gz")
# The name of a copy with tracekit's tracks (tracekit.trace.annotate), before ".gz": not a run of its own.
ANNOTATED = ".annotated.pt.trace.json"
CAPTURE_PATH = ".capture-path.pt.trace.json.gz"   # an eager run's steps as if captured


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
                top-level op of its thread, 1 for one inside it, ...; int8, or a wider int
                where ops nest deeper than 127 levels); sorted by ts.
    syncs:      GPU-side synchronization waits (Kineto "cuda_sync": Stream Sync,
                Event Sync, Context Sync, Stream Wait Event; MTIA's ``event_record`` and
                ``event_wait``, see :func:`mtia_ops`), same columns as gpu_ops.
    markers:    iteration markers: step, ts, dur, end (µs); sorted by ts.
    devices:    one row per GPU in ``deviceProperties``: id, name, numSms, ...
    comms:      the kernels and CPU ops named like a collective (NCCL/RCCL kernels,
                record_param_comms, nccl:*, gloo:*, c10d::*), also in gpu_ops/cpu_ops,
                with their collective metadata: table ('gpu_ops'|'cpu_ops'), name, pid,
                tid, ts, dur, end (µs), correlation, external_id, collective, in_msg_nelems,
                out_msg_nelems, group_size, dtype, pg_name, pg_desc, pg_ranks, seq (NaN or
                None where the event has no such arg); sorted by ts.
    meta:       trace_name, source, versions, events, categories (events per ``cat``),
                unknown_device_events (events of categories Kineto does not write that name a device
                or stream, by category: left out of every table),
                problems and problem_counts (damage mended or dropped), and ``distributed``
                (Kineto's distributedInfo: rank, world_size, backend, ...; {} if absent).
    """

    path: Path
    gpu_ops: pd.DataFrame
    host_calls: pd.DataFrame
    cpu_ops: pd.DataFrame
    syncs: pd.DataFrame
    markers: pd.DataFrame
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
    """True for names Kineto and Chrome traces use: ``*.json`` or ``*.json.gz``; not for
    ``run.json`` nor for tracekit's annotated copies (``*.annotated.pt.trace.json.gz``: the
    trace beside them is the run's) nor for an eager run's steps as if captured
    (``*.capture-path.pt.trace.json.gz``: :mod:`tracekit.capture.capture_path`, which only
    ``tracekit whatif --cuda-graphs`` reads)."""
    name = path.name
    return name.endswith(TRACE_SUFFIXES) and not name.endswith(("run.json", ANNOTATED, ANNOTATED + ".gz",
                                                                  CAPTURE_PATH))


def trace_files(folder: Path) -> list[Path]:
    """The trace files directly in ``folder`` (:func:`is_trace_file`), sorted by name."""
    return sorted(p for p in folder.iterdir() if not p.is_dir() and is_trace_file(p))


def _in_file(msg: str, base: int) -> str:
    """msgspec's message with its "(byte N)", counted from the text it decoded, counted from the
    start of the file's text instead (``base``: where that text starts)."""
    return re.sub(r"\(byte (\d+)\)", lambda m: f"(byte {int(m.group(1)) + base:,} of the file's text)", msg)


def _error(path: Path, exc: StreamError) -> TraceError:
    """The user-facing error for a decode failure (msgspec's message in brackets, with the offset
    in the file where it names one)."""
    msg = _in_file(str(exc.__cause__ or exc), exc.base)
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
        found = stream.bad_utf8_at(path)
        where = f"byte 0x{found[1]:02x} at offset {found[0]:,} of the file's text" if found else msg
        return TraceError(path, f"not valid UTF-8 JSON ({where})", ExitCode.NOT_JSON)
    if isinstance(exc.__cause__, msgspec.ValidationError):
        return TraceError(path, f"unexpected trace content ({msg})", ExitCode.BAD_CONTENT)
    return TraceError(path, f"not valid JSON ({msg})", ExitCode.NOT_JSON)


def load(path: Path | str, workers: int | None = None) -> EventTables:
    """Read one trace file (``.json`` or ``.json.gz``) into :class:`EventTables`.

    The file is streamed in chunks (:mod:`tracekit.trace.stream`), so memory
    holds a few chunks of text at a time plus the columns kept. A large file
    (over ``PARALLEL_MIN_BYTES`` of JSON) is decoded by one worker process per
    core (``workers`` overrides the count; 1 decodes here).

    Raises:
        TraceError: the file is missing, not a regular file (a broken or looping link, a FIFO, a
            device, a folder: :func:`tracekit.trace.file_kinds.unreadable_file`, never opened),
            unreadable, empty, not gzip/JSON, truncated, or not a Chrome trace object with
            ``traceEvents`` (:class:`NotATrace` for the last); every event damaged and dropped.
    """
    path = Path(path)
    if (problem := unreadable_file(path)) is not None:
        raise TraceError(path, problem, ExitCode.NOT_FOUND)
    try:
        if path.stat().st_size == 0 and _empty(path):
            raise TraceError(path, "empty file", ExitCode.NOT_JSON)
        workers = workers_for(path) if workers is None else workers
        if workers > 1:
            mmap_threshold(MMAP_WHILE_READING)
        decode.Strict.on = decode.Strict.lean = True
        try:
            read = read_parallel(path, workers) if workers > 1 else read_serial(path)
        except BadCut:  # a chunk cut inside a value: read again with checked cuts
            read = read_serial(path)
    except FileNotFoundError:
        raise TraceError(path, "no such file", ExitCode.NOT_FOUND) from None
    except PermissionError:
        raise TraceError(path, "permission denied", ExitCode.NOT_FOUND) from None
    except OSError as exc:   # an I/O error, a file of /proc that cannot be read...
        raise TraceError(path, f"cannot be read ({(exc.strerror or str(exc)).lower()})", ExitCode.NOT_FOUND) from None
    except StreamError as exc:
        error = _error(path, exc)
        if not (isinstance(error, NotATrace) and "JSON array" in error.problem):
            raise error from None
        read = Chunks()
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
        mmap_threshold(MMAP_AFTER_READING)
    tables = _tables(path, read)
    if workers > 1:
        release_freed()
    if tables.gpu_ops.empty and tables.host_calls.empty and tables.cpu_ops.empty:
        if any("dropped" in p for p in tables.meta["problems"]):
            raise TraceError(path, f"all its PyTorch profiler events were damaged and dropped ("
                                   f"{'; '.join(tables.meta['problems'])})", ExitCode.BAD_CONTENT)
        raise NotATrace(path, f"none of its {tables.meta['events']} events is a PyTorch profiler event "
                              "(cpu_op, kernel, cuda_runtime...): a trace from another tool?")
    return tables


def _empty(path: Path) -> bool:
    """Whether a file of size 0 holds nothing: some (of /proc) have a size of 0 but text to read,
    or fail when read (OSError)."""
    with open(path, "rb") as f:
        return not f.read(1)


def _tables(path: Path, read: Chunks) -> EventTables:
    import pandas as pd

    from tracekit.trace.dataframes import TableBuilder, depth, markers

    builder = TableBuilder()
    for chunk in read.chunks:
        builder.merge(chunk)
    read.chunks = []
    gpu_ops = builder.table("gpu")
    host_calls = builder.table("host")
    nest_order = []

    def nesting(cols: dict) -> dict:
        found, order = depth(cols)
        nest_order.append(order)
        return {"depth": found}
    cpu_ops = builder.table("cpu", extra=nesting)
    header = read.header
    meta = {"trace_name": header.traceName, "source": ort.SOURCE if header.traceName == ort.SOURCE else "pytorch",
            "cuda_runtime_version": header.cuda_runtime_version,
            "cuda_driver_version": header.cuda_driver_version, "events": builder.events,
            "categories": dict(builder.categories.most_common()),
            "unknown_device_events": dict(builder.unknown_device.most_common()),
            "distributed": header.distributedInfo if isinstance(header.distributedInfo, dict) else {}}
    syncs = builder.table("syncs")
    if "mtia_ccp_events" in builder.categories:
        gpu_ops, syncs = mtia_ops(gpu_ops, syncs)
    tables = EventTables(path=path, gpu_ops=gpu_ops, host_calls=host_calls, cpu_ops=cpu_ops,
                         syncs=syncs, markers=markers(cpu_ops, builder.problems),
                         devices=pd.DataFrame([msgspec.structs.asdict(d) for d in header.deviceProperties]),
                         meta=meta, comms=builder.table("comms"))
    if nest_order:  # the CPU ops by (thread, start, longer first), for the nest (tracekit.analysis.metrics.nest)
        tables.derived["nest_order"] = (cpu_ops, nest_order[0])
    meta["problem_counts"] = {what: n for what, n in sorted(builder.problems.items()) if n}
    meta["problems"] = [f"{n} {what}" for what, n in meta["problem_counts"].items()]
    return tables


# MTIA's device events (Kineto category mtia_ccp_events) hold its kernels and, by name, its DMA
# transfers and the device side of its events (recorded, waited on): copies and syncs, not kernels.
MTIA_COPIES, MTIA_SYNCS = ("dma_request",), ("event_record", "event_wait")


def mtia_ops(gpu_ops: pd.DataFrame, syncs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The GPU ops and syncs of a trace with MTIA device events: ops named ``dma_request*``
    become ``memcpy`` (a DMA transfer), ops named ``event_record*`` / ``event_wait*`` move to
    the syncs (kind ``sync``), both tables still sorted by ts."""
    import pandas as pd

    names = gpu_ops["name"].astype(str)
    moved = names.str.startswith(MTIA_SYNCS).to_numpy()
    copies = names.str.startswith(MTIA_COPIES).to_numpy()
    if not (moved.any() or copies.any()):
        return gpu_ops, syncs
    kind = gpu_ops["kind"].astype(str).where(~copies, "memcpy")
    gpu_ops = gpu_ops.assign(kind=pd.Categorical(kind, categories=sorted(set(kind))))
    if moved.any():
        syncs = pd.concat([syncs, gpu_ops[moved].assign(kind="sync")], ignore_index=True).sort_values(
            "ts", kind="stable", ignore_index=True)
        gpu_ops = gpu_ops[~moved].reset_index(drop=True)
    return gpu_ops, syncs

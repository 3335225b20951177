"""Read a Kineto / Chrome trace file into typed columnar event tables.

Every analyzer reads :class:`EventTables`, never raw JSON. Timestamps stay
float µs as Kineto writes them.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from tracekit.trace.schema import Args, Event, Trace

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
# torch.profiler's schedule wraps each step in a "ProfilerStep#N" range.
ITERATION_MARKER = re.compile(r"^ProfilerStep#(\d+)$")

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


def _read_bytes(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceError(path, "is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceError(path, f"corrupt or truncated gzip ({exc})") from None
    return raw


def _decode(path: Path, data: bytes) -> Trace:
    if not data.strip():
        raise TraceError(path, "empty file")
    try:
        return msgspec.json.decode(data, type=Trace)
    except msgspec.ValidationError as exc:
        if "traceEvents" in str(exc) and "missing required field" in str(exc).lower():
            raise NotATrace(path, "JSON without 'traceEvents': not a Kineto/Chrome trace") from None
        if "Expected `object`, got `array`" in str(exc):
            raise NotATrace(path, "a JSON array, not a Kineto trace object "
                                   "(an ONNX Runtime profile? read it with the onnx backend)") from None
        raise TraceError(path, f"unexpected trace content ({exc})") from None
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc).lower():
            raise TraceError(path, "truncated JSON (was the trace cut off mid-write?)") from None
        raise TraceError(path, f"not valid JSON ({exc})") from None


def _int(value, default: int = -1) -> int:
    """An integer field: ints pass, hex/decimal strings ("0x0") parse, else ``default``."""
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return default
    return default


def _num(value) -> float | None:
    """A numeric field (ts, dur, ...): numbers and numeric strings, else None."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _dims(value) -> list:
    """grid/block as three ints, or three Nones where Kineto gave none."""
    if isinstance(value, list) and len(value) >= 3:
        return value[:3]
    return [None, None, None]


_NO_ARGS = Args()


def load(path: Path | str) -> EventTables:
    """Read one trace file (``.json`` or ``.json.gz``) into :class:`EventTables`.

    Raises:
        TraceError: the file is missing, unreadable, not gzip/JSON, truncated,
            or not a Chrome trace object with ``traceEvents``.
    """
    path = Path(path)
    trace = _decode(path, _read_bytes(path))
    return tables_from_events(path, trace.traceEvents, meta={
        "trace_name": trace.traceName,
        "cuda_runtime_version": trace.cuda_runtime_version,
        "cuda_driver_version": trace.cuda_driver_version,
    }, devices=[msgspec.structs.asdict(d) for d in trace.deviceProperties])


def tables_from_events(path: Path, events: list[Event], meta: dict | None = None,
                       devices: list[dict] | None = None) -> EventTables:
    """Split decoded events into the typed tables of :class:`EventTables`.

    Complete events (``ph == 'X'``) without a numeric ``ts`` are dropped; a
    missing ``dur`` counts as 0 µs.
    """
    gpu, host, cpu, markers, flows = [], [], [], [], []
    for ev in events:
        ph, cat = ev.ph, ev.cat
        if ph == "X":
            ts = _num(ev.ts)
            if ts is None:
                continue
            dur = _num(ev.dur) or 0.0
            a = ev.args or _NO_ARGS
            kind = GPU_OP_KINDS.get(cat)
            if kind is not None:
                gpu.append((
                    kind, ev.name, _int(a.device, _int(ev.pid, 0)), _int(a.stream, _int(ev.tid)),
                    ts, dur, _int(a.correlation), _int(a.external_id),
                    *_dims(a.grid), *_dims(a.block),
                    _num(a.registers), _num(a.shared_memory), _num(a.occupancy_pct), _num(a.bytes),
                ))
            elif (api := HOST_CALL_KINDS.get(cat)) is not None:
                host.append((api, ev.name, str(ev.pid), str(ev.tid), ts, dur,
                             _int(a.correlation), _int(a.external_id)))
            elif cat in CPU_OP_CATS:
                cpu.append((cat, ev.name, str(ev.pid), str(ev.tid), ts, dur, _int(a.external_id)))
                if m := ITERATION_MARKER.match(ev.name):
                    markers.append((int(m.group(1)), ts, dur))
        elif ph in ("s", "f") and cat == "ac2g" and (ts := _num(ev.ts)) is not None:
            flows.append((str(ev.id), ph, str(ev.pid), str(ev.tid), ts))

    gpu_ops = _frame(gpu, ["kind", "name", "device", "stream", "ts", "dur", "correlation", "external_id",
                           "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
                           "registers", "shared_memory", "occupancy_pct", "bytes"])
    host_calls = _frame(host, ["api", "name", "pid", "tid", "ts", "dur", "correlation", "external_id"])
    cpu_ops = _frame(cpu, ["cat", "name", "pid", "tid", "ts", "dur", "external_id"])
    marker_df = _frame(markers, ["step", "ts", "dur"])
    # Nested ProfilerStep ranges of the same step (cpu_op and user_annotation) collapse to one.
    marker_df = marker_df.drop_duplicates("step").reset_index(drop=True)
    flow_df = pd.DataFrame(flows, columns=["id", "ph", "pid", "tid", "ts"])
    for df in (gpu_ops, host_calls, cpu_ops, marker_df):
        df["end"] = df["ts"] + df["dur"]
    for col in ("device", "stream", "correlation", "external_id"):
        gpu_ops[col] = gpu_ops[col].astype(np.int64)
    for col in ("correlation", "external_id"):
        host_calls[col] = host_calls[col].astype(np.int64)
    return EventTables(path=path, gpu_ops=gpu_ops, host_calls=host_calls, cpu_ops=cpu_ops,
                       markers=marker_df, flows=flow_df, devices=pd.DataFrame(devices or []),
                       meta=meta or {})


def _frame(rows: list[tuple], columns: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    for col in ("ts", "dur"):
        df[col] = df[col].astype(np.float64)
    return df.sort_values("ts", kind="stable").reset_index(drop=True)

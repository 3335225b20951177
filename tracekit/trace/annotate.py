"""Write a copy of a trace with extra tracks: ``tracekit analyze --annotate``.

Writing a trace is the trace layer's work, like reading one: the copy holds the original
file's bytes unchanged (a stream copy, in bounded memory, whatever the trace's size) with
extra Chrome Trace Event Format events put at the front of its ``traceEvents`` array.
What the tracks show is computed elsewhere (:mod:`tracekit.analysis.annotation_tracks`) and given
here as tables; this module knows only the format.

The extra events are complete events (``ph: "X"``) of category ``"tracekit"``, which no
reader routes to a table (:data:`tracekit.trace.event_columns.ROUTES`; TensorBoard's profiler
plugin and HolisticTraceAnalysis leave unknown categories out too), with no ``stream``,
``device`` or ``correlation`` arg (HTA takes any event with a ``stream`` arg as GPU work).
They sit in a process of their own (:data:`PID`, named "tracekit" by ``M`` metadata
events), one thread per track, named by ``thread_name``: Perfetto and chrome://tracing show
each as a named track.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from itertools import repeat
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from tracekit.trace.decode import StreamError
from tracekit.trace.reader import ANNOTATED, TraceError
from tracekit.trace.stream import _KEY, _VALUE, _open, _read

CAT = "tracekit"
# Above any real process id (Linux's PID_MAX_LIMIT is 2**22) and any device index Kineto uses
# as the pid of a GPU's events, so the tracks never join a process of the trace.
PID = 1 << 30
# First in chrome://tracing's process order (Kineto sorts a CPU process by its pid, GPU d at 5000000 + d).
SORT_INDEX = -1
COMPRESSLEVEL = 3   # gzip level of the copy: on trace JSON about as fast as level 1 and twice level 6 (~30% larger)
_HEAD_BYTES = 1 << 20
_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")


def annotated_path(trace: Path | str, out: Path | str | None = None) -> Path:
    """Where the annotated copy of ``trace`` goes: ``<name>.annotated.pt.trace.json.gz`` in
    ``out`` (default: beside the trace), ``<name>`` being the file name less its trace suffix."""
    trace = Path(trace)
    name = trace.name
    stem = next((name[: -len(s)] for s in _SUFFIXES if name.endswith(s)), name)
    return Path(out if out is not None else trace.parent) / f"{stem}{ANNOTATED}.gz"


def write(trace: Path | str, tracks: dict[str, pd.DataFrame], dest: Path | str) -> Path:
    """Write ``dest`` (gzipped): ``trace``'s bytes with the events of ``tracks`` added.

    Args:
        trace: a trace file (``.json`` or ``.json.gz``; the JSON Object Format with a
            ``traceEvents`` array, or the JSON Array Format).
        tracks: track name -> its slices, in track order: one row per slice, columns
            ``name``, ``start_us``, ``end_us`` (µs, the trace's clock) and any others, which
            become the slice's ``args`` (less None and "" values). A track with no rows is left out.
        dest: the file to write (replaced whole, never left half-written).

    Returns:
        ``dest``.

    Raises:
        TraceError: ``trace`` is unreadable or has no ``traceEvents`` array; ``dest`` cannot
            be written.
    """
    trace, dest = Path(trace), Path(dest)
    extra = events(tracks)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
        try:
            with _open(trace) as src, os.fdopen(fd, "wb") as raw, \
                    gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=COMPRESSLEVEL) as out:
                head, at = _head(trace, src)
                out.write(head[:at])
                out.write(extra)
                if head[at:].lstrip()[:1] != b"]":
                    out.write(b",")
                out.write(head[at:])
                shutil.copyfileobj(src, out, 1 << 20)
            shutil.copymode(trace, tmp)
            os.replace(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except StreamError as exc:
        raise TraceError(trace, exc.problem) from None
    except OSError as exc:
        raise TraceError(dest, f"cannot write the annotated copy ({exc.strerror or exc})") from None
    return dest


def _head(trace: Path, src) -> tuple[bytes, int]:
    """The file's first bytes, up to the first value in its event array, and the index just
    after that array's ``[`` (the first ``traceEvents`` key's, or the top-level array's)."""
    buf = b""
    while True:
        block = _read(src, _HEAD_BYTES)
        buf += block
        text = buf.lstrip(b"\xef\xbb\xbf \t\r\n")
        if text.startswith(b"["):
            at = len(buf) - len(text) + 1
        elif (key := buf.find(_KEY)) >= 0 and (m := _VALUE.match(buf, key + len(_KEY))) and m.group(1) == b"[":
            at = m.end()
        else:
            at = None
        if at is not None and (buf[at:].strip() or not block):
            return buf, at
        if not block:
            raise TraceError(trace, "no traceEvents array: nothing to add tracks to")


def events(tracks: dict[str, pd.DataFrame]) -> bytes:
    """The JSON text of the extra events of ``tracks`` (see :func:`write`), comma-separated: the
    ``M`` events naming the process and each track (tid 1, 2... in order), then each track's
    ``X`` events. Times are rounded to whole ns, and written as the shortest decimal of their
    double (three decimals below 2**43 µs: exact)."""
    out: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": CAT}},
        {"ph": "M", "name": "process_sort_index", "pid": PID, "tid": 0, "args": {"sort_index": SORT_INDEX}}]
    kept = [(name, t) for name, t in tracks.items() if len(t)]
    for tid, (name, _) in enumerate(kept, 1):
        out += [{"ph": "M", "name": "thread_name", "pid": PID, "tid": tid, "args": {"name": name}},
                {"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": tid, "args": {"sort_index": tid}}]
    for tid, (_, t) in enumerate(kept, 1):
        start = np.round(t["start_us"].to_numpy(float) * 1000)
        end = np.maximum(np.round(t["end_us"].to_numpy(float) * 1000), start)
        keys = [c for c in t.columns if c not in ("name", "start_us", "end_us")]
        values = zip(*(t[c].tolist() for c in keys)) if keys else repeat((), len(t))   # native Python values
        out += [{"ph": "X", "cat": CAT, "pid": PID, "tid": tid, "name": name, "ts": ts, "dur": dur,
                 "args": {k: v for k, v in zip(keys, row) if v is not None and v != ""}}
                for name, ts, dur, row in zip(t["name"].astype(str).tolist(), (start / 1000).tolist(),
                                              ((end - start) / 1000).tolist(), values)]
    return msgspec.json.encode(out)[1:-1]

"""A trace file's chunks decoded and tabulated, in this process or in one worker process
per core (:func:`read_parallel`). :mod:`tracekit.trace.reader` makes the tables of the
chunks; :mod:`tracekit.trace.malloc` says how malloc is set for it."""

from __future__ import annotations

import os
from pathlib import Path

from tracekit.trace import stream
from tracekit.trace.decode import StreamError, merge_header
from tracekit.trace.event_columns import Chunk, tabulate
from tracekit.trace.schema import Trace
from tracekit.trace.stream import iter_events, read_head, split_file

PARALLEL_MIN_BYTES = 64 << 20  # below this (uncompressed), worker start-up costs more than it saves
# A worker's chunk: its text and decoded events are all it holds at once. At 4 MiB they stay in the core's
# caches and the fewest fresh pages are faulted in per chunk: 7-10% more MB/s a core than 8 MiB, 20% more
# than 16 MiB (each a file's chunks in turn, benchmarks/loadbench.py's 1 GB trace); 2 MiB gains nothing more.
PARALLEL_CHUNK_BYTES = 4 << 20
GZIP_RATIO = 8                  # Kineto JSON compresses about 8-15x; a conservative guess of the size


class BadCut(Exception):
    """A chunk cut inside a value (a cut is unchecked): read the file again serially."""


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def workers_for(path: Path) -> int:
    """Processes to decode with: one per usable core for a large file, else 1."""
    size = path.stat().st_size * (GZIP_RATIO if _is_gzip(path) else 1)
    if size < PARALLEL_MIN_BYTES or not hasattr(os, "fork"):
        return 1
    return min(len(os.sched_getaffinity(0)), 8)


class Chunks:
    """The chunks of one file as they are tabulated (here or in workers), and its header."""

    def __init__(self):
        self.chunks: list[Chunk] = []
        self.header: Trace | None = None

    def add(self, events: list) -> None:
        self.chunks.append(tabulate(events))


def read_serial(path: Path) -> Chunks:
    """Decode and tabulate the file's chunks in this process."""
    out = Chunks()
    for item in iter_events(path):
        if isinstance(item, Trace):
            out.header = item
        else:
            out.add(item)
    return out


def read_parallel(path: Path, workers: int) -> Chunks:
    """Decode and tabulate the file's chunks in ``workers`` processes (:class:`pool.Workers`).

    A plain file is cut by offsets only; each worker maps its ranges itself
    (the last one with the keys after the events), so no text passes between
    processes and this one reads just the keys before the events. A gzip file
    is gunzipped and cut here, with at most ``workers + 1`` chunks of text in
    flight.

    Raises:
        BadCut: a cut fell inside a value, or a worker process ended early (read
            serially instead).
        StreamError: the keys before the events do not decode (from the serial read
            when the file cannot be cut).
    """
    from tracekit.trace.pool import WorkerDied, Workers

    out = Chunks()
    try:
        with Workers(workers) as pool:
            if _is_gzip(path):  # this process gunzips and cuts; workers decode
                for item in iter_events(path, min(stream.CHUNK_BYTES, PARALLEL_CHUNK_BYTES), raw=True):
                    if isinstance(item, bytes):
                        pool.submit(item)
                        while pool.pending > workers:
                            out.chunks.append(pool.next())
                    elif isinstance(item, Trace):
                        out.header = item
                    else:
                        while pool.pending:  # keep the file's order
                            out.chunks.append(pool.next())
                        out.add(item)
                return out
            # workers map the file themselves; this process reads only the keys before the events
            try:
                ranges, key_at, tail_at = split_file(path, min(PARALLEL_CHUNK_BYTES, stream.CHUNK_BYTES))
            except StreamError:
                return read_serial(path)  # the serial read gives the precise error
            for a, b in ranges:
                pool.submit((path, a, b))
            pool.submit((path, tail_at))
            head = read_head(path, key_at)
            import pandas  # noqa: F401 - while the workers decode, for the tables after them
            while pool.pending:
                out.chunks.append(pool.next())
            out.header = merge_header(head, out.chunks[-1].header)
            return out
    except (StreamError, WorkerDied) as exc:
        raise BadCut from exc

"""The reader's worker processes: chunks of a trace file decoded and tabulated, one process per core.

Not :class:`concurrent.futures.ProcessPoolExecutor`: its workers send each result themselves
and wait, through a 64 KiB pipe, until the reading process has taken all of it (at 1 GB of
trace, 0.32 s of each worker's 2.9 s). Here a worker hands its chunk to a
:class:`multiprocessing.Queue`, whose feeder thread sends it while the worker decodes the
next; the tasks wait in another Queue, so a worker is never short of one.
"""

from __future__ import annotations

import queue
import signal

from tracekit.trace.decode import StreamError
from tracekit.trace.event_columns import Chunk, build_chunk
from tracekit.trace.malloc import MMAP_AFTER_READING, mmap_threshold

POLL_S = 1.0                # how often a wait for a result checks that the workers are alive


class WorkerDied(Exception):
    """A worker process ended before it sent the result it owed (killed: out of memory?)."""


def _serve(tasks, results) -> None:
    """A worker's loop: (index, data) tasks in, (index, Chunk or the error) out, until None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the reading process's to handle
    # A worker frees each chunk's arrays before it decodes the next, so its own heap serves them
    # again (the threshold the reading process takes once every chunk is in): with its 64 KiB one (inherited by fork) every array was mapped,
    # page-faulted in and unmapped anew (at 1 GB, 1.7x the page faults, 11% more CPU).
    mmap_threshold(MMAP_AFTER_READING)
    while (task := tasks.get()) is not None:
        index, data = task
        try:
            out = build_chunk(data)
        except StreamError as exc:
            out = exc
        except Exception as exc:  # noqa: BLE001 - sent back as one that surely pickles
            out = RuntimeError(f"{type(exc).__name__}: {exc}")
        results.put((index, out))
    results.close()
    results.join_thread()  # everything sent before the process ends


class Workers:
    """``n`` forked worker processes running :func:`tracekit.trace.event_columns.build_chunk`;
    :meth:`submit` a chunk's data, :meth:`next` its Chunk (in the order submitted).
    A context manager: leaving it stops the workers."""

    def __init__(self, n: int):
        import multiprocessing  # here: only a large file needs it (start-up stays lean)

        # fork: workers inherit the imported modules, and nothing re-runs __main__ (forkserver and
        # spawn re-import it, which breaks under `python -m` and stdin). Started before anything is
        # queued, so no thread of this process runs while they fork.
        ctx = multiprocessing.get_context("fork")
        self._tasks, self._results = ctx.Queue(), ctx.Queue()
        self._procs = [ctx.Process(target=_serve, args=(self._tasks, self._results), daemon=True)
                       for _ in range(n)]
        for p in self._procs:
            p.start()
        self._sent = self._taken = 0
        self._early: dict[int, Chunk | Exception] = {}

    def submit(self, data: bytes | tuple) -> None:
        """Queue one chunk's data for :func:`build_chunk` (returns at once)."""
        self._tasks.put((self._sent, data))
        self._sent += 1

    @property
    def pending(self) -> int:
        """Chunks submitted and not yet taken by :meth:`next`."""
        return self._sent - self._taken

    def next(self) -> Chunk:
        """The Chunk of the oldest submission not yet taken (waits for it).

        Raises:
            StreamError: its data did not decode (a bad cut), as the worker found.
            RuntimeError: anything else went wrong in the worker (its type and message).
            WorkerDied: a worker process ended before sending its results.
        """
        while self._taken not in self._early:
            try:
                index, result = self._results.get(timeout=POLL_S)
            except queue.Empty:
                ended = [p.exitcode for p in self._procs if p.exitcode is not None]
                if ended:
                    raise WorkerDied(f"a reader worker process ended (exit code {ended[0]})") from None
                continue
            self._early[index] = result
        result = self._early.pop(self._taken)
        self._taken += 1
        if isinstance(result, Exception):
            raise result
        return result

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            for _ in self._procs:
                self._tasks.put(None)
            for p in self._procs:
                p.join(timeout=5)
        for p in self._procs:
            if p.is_alive():
                p.terminate()
                p.join()
        self._tasks.cancel_join_thread()  # tasks no worker took are dropped, not waited on at exit
        self._tasks.close()
        self._results.close()

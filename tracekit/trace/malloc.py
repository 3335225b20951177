"""How glibc's malloc is set while a trace is read (:func:`mmap_threshold`) and after it
(:func:`release_freed`): by the reading process (:mod:`tracekit.trace.reader`) and by its
worker processes (:mod:`tracekit.trace.pool`)."""

from __future__ import annotations

import ctypes


def mmap_threshold(size: int) -> None:
    """Have glibc's malloc serve blocks of ``size`` bytes and more by mmap, returned to the
    system when freed, and keep up to twice that freed at the top of its heap for the next
    blocks (``M_TRIM_THRESHOLD``; glibc's own sliding threshold pairs them so, malloc/malloc.c,
    but setting the first stops it sliding and left the second at 128 KiB: the analyses' large
    scratch arrays were given back and page-faulted in anew one after another, 0.3 s of the
    4.7 s at 1 GB). While chunks come in it is 64 KiB (``MMAP_WHILE_READING``): otherwise
    malloc raises its threshold as blocks are freed (up to 32 MiB) and keeps the freed
    columns of hundreds of chunks in its heap, resident beside the tables made of them
    (about 100 MB more at 1 GB of trace). Once every chunk is in it is 32 MiB
    (``MMAP_AFTER_READING``, glibc's own ceiling): the large arrays of the tables and of the
    analyses are then reused from the heap instead of being mapped, zeroed and unmapped one
    by one (at 1 GB, 1 s of the analyses' 4, 0.3 s of the tables' making). No-op where malloc
    is not glibc's."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, size)      # M_MMAP_THRESHOLD (glibc malloc.h)
        libc.mallopt(-1, 2 * size)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def release_freed() -> None:
    """Give the memory glibc's malloc holds freed in its heaps back to the system (``malloc_trim``):
    after a large trace is read, the chunks' columns freed in the heap of the thread that received
    them (about 120 MB at 1 GB of trace, resident until trimmed; 10 ms). No-op elsewhere."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


MMAP_WHILE_READING, MMAP_AFTER_READING = 64 << 10, 32 << 20

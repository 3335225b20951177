"""Decode a trace file in bounded memory: the ``traceEvents`` array in chunks.

A Kineto trace is one JSON object whose ``traceEvents`` array holds nearly all
of its bytes. Instead of holding the whole text and a Python object per event
at once, the file is read (and gunzipped) as a stream; each block of whole
events is cut at an event boundary, decoded by msgspec into gc-untracked
structs (:mod:`tracekit.trace.decode`), handed to the caller, and dropped. Peak memory is then one chunk of
text and its structs plus whatever the caller keeps.

Cutting: an event boundary is ``}`` ``,`` ``{`` with optional whitespace. The
same bytes can occur inside a string or a nested ``args`` value; a cut there
leaves the chunk's JSON unbalanced, so msgspec rejects it and the next earlier
boundary is tried. A chunk that still fails is decoded with the whole rest of
the file, so the error reported is the real one (truncation, bad JSON).
"""

from __future__ import annotations

import codecs
import gzip
import mmap
import re
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator

from tracekit.trace.decode import DECODE_ERRORS, StreamError, decode_events, decode_whole, merge_header, no_gc
from tracekit.trace.schema import Event, Trace

CHUNK_BYTES = 32 << 20   # decode this much text at a time (bytes)
_KEY = b'"traceEvents"'
_WS = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark, which some editors and tools write first


def _open(path: Path) -> BinaryIO:
    f = open(path, "rb")
    if f.read(2) == b"\x1f\x8b":
        f.seek(0)
        return gzip.GzipFile(fileobj=f)
    f.seek(0)
    return f


def _read(stream: BinaryIO, n: int) -> bytes:
    """The next ``n`` bytes (of the gunzipped text for a .gz). A gzip that cannot be read is a
    StreamError; another OSError (an I/O error of the disk) is raised as it is."""
    try:
        return stream.read(n)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise StreamError(f"corrupt or truncated gzip ({exc})") from None


def bad_utf8_at(path: Path) -> tuple[int, int] | None:
    """(offset, byte) of the first byte of the file's text (gunzipped) that is not UTF-8, or None
    where it all decodes: where msgspec's error, relative to the string it decoded, does not say."""
    decoder, at = codecs.getincrementaldecoder("utf-8")(), 0
    with _open(path) as stream:
        while block := _read(stream, CHUNK_BYTES):
            pending = len(decoder.getstate()[0])   # an incomplete character kept from the block before
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                where = at - pending + exc.start
                return where, (exc.object[exc.start])
            at += len(block)
    return None


def _last_boundary(buf: bytearray, end: int) -> tuple[int, int] | None:
    """The last ``}``-``,``-``{`` before ``end``: (index after ``}``, index of ``{``)."""
    while True:
        j = buf.rfind(b"{", 0, end)
        if j <= 0:
            return None
        k = j - 1
        while k >= 0 and buf[k] in _WS:
            k -= 1
        if k > 0 and buf[k] == ord(","):
            m = k - 1
            while m >= 0 and buf[m] in _WS:
                m -= 1
            if m >= 0 and buf[m] == ord("}"):
                return m + 1, j
        end = j


EMPTY = "empty (no JSON in it)"


def _array_at(buf: bytearray, at: int) -> int | None:
    """Where the value after the key ending at ``at`` starts if it is an array ('['), -1 if
    it is something else, None if ``buf`` ends before telling."""
    m = _VALUE.match(buf, at)
    if m is None:
        return None if len(buf) - at < 4096 and not buf[at:].strip(b" \t\r\n:") else -1
    return m.end() - 1 if m.group(1) == b"[" else -1


def iter_events(path: Path, chunk_bytes: int | None = None,
                raw: bool = False) -> Iterator[list[Event] | bytes | Trace]:
    """Yield the trace's events chunk by chunk, then its header as a ``Trace``
    whose ``traceEvents`` is empty (deviceProperties, versions, ...).

    With ``raw=True`` the chunks before the last are yielded undecoded, as
    JSON array text (``bytes``) cut at a likely event boundary, for decoding
    elsewhere (another process); a cut there is not checked, so a decode
    failure of such a chunk means "cut inside a value": read again without raw.

    Raises:
        StreamError: unreadable gzip, invalid or truncated JSON, or JSON that
            is not a trace; ``__cause__`` holds msgspec's error where there is one.
    """
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    with no_gc(), _open(path) as stream:
        buf = bytearray(_read(stream, chunk_bytes))
        base = len(_BOM) if buf.startswith(_BOM) else 0   # where buf[0] is in the file's text
        del buf[:base]
        while (i := buf.find(_KEY)) < 0 or (j := _array_at(buf, i + len(_KEY))) is None:
            block = _read(stream, chunk_bytes)
            if not block:  # no traceEvents array: decode as is, for the real error
                if not buf.strip():
                    raise StreamError(EMPTY)
                trace = decode_whole(bytes(buf), base)
                yield trace.traceEvents
                yield trace
                return
            buf += block
        if j < 0:  # "traceEvents" holds no array (or the key was inside a string): decode it all
            while block := _read(stream, chunk_bytes):
                buf += block
            trace = decode_whole(bytes(buf), base)
            yield trace.traceEvents
            yield trace
            return
        prefix = bytes(buf[:i])
        rest = buf
        del rest[:j]  # keep the array's '[' at the front (front deletion is O(1))
        at = base + j   # where rest[0] is in the file's text
        cut = _cut_raw if raw else _cut
        while block := _read(stream, chunk_bytes):
            rest += block
            if len(rest) < chunk_bytes:
                continue
            before = len(rest)
            events, rest = cut(rest)
            at += before - len(rest)
            if events is not None:
                yield events
        # What is left: the last events, ']' and the keys after the array.
        key = b'{"traceEvents":'
        tail = decode_whole(key + rest, at - len(key))
        yield tail.traceEvents
        del rest
        head = decode_whole(prefix + b'"traceEvents":[]}', base)
        yield merge_header(head, tail)


_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_VALUE = re.compile(rb"\s*:\s*(.)", re.DOTALL)
_WINDOW = 1 << 20  # how far past a split point to look for an event boundary (bytes)


def split_file(path: Path, chunk_bytes: int | None = None) -> tuple[list[tuple[int, int]], int, int]:
    """Plan a parallel read of an uncompressed trace without reading most of it.

    Returns:
        (ranges, key_at, tail_at): ``ranges`` are (open, close) byte offsets
        such that the text from ``open`` to ``close`` inclusive, with those two
        bytes replaced by '[' and ']', is a JSON array of whole events (see
        :func:`decode_range`); the cuts are unchecked (see :func:`iter_events`).
        ``key_at`` is where the "traceEvents" key starts (see :func:`read_head`)
        and ``tail_at`` where the events after the last range start (see
        :func:`decode_tail`).

    Raises:
        StreamError: no "traceEvents" array in the file.
    """
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        key = mm.find(_KEY)
        if key < 0:
            raise StreamError("no 'traceEvents' key")  # read serially for the precise error
        m = _VALUE.match(mm, key + len(_KEY))
        if m is None or m.group(1) != b"[":
            raise StreamError("no 'traceEvents' array")
        start = m.end() - 1
        ranges = []
        while start + chunk_bytes + _WINDOW < len(mm):
            m = _BOUNDARY.search(mm, start + chunk_bytes, start + chunk_bytes + _WINDOW)
            if m is None:
                break
            comma = mm.find(b",", m.start())
            ranges.append((start, comma))
            start = comma
    return ranges, key, start


def read_head(path: Path, key_at: int) -> Trace:
    """The keys written before "traceEvents" (``key_at`` from :func:`split_file`), as a ``Trace``.

    Raises:
        StreamError: the text does not decode.
    """
    with open(path, "rb") as f:
        head = f.read(key_at)
        return decode_whole(head.removeprefix(_BOM) + b'"traceEvents":[]}')


def decode_tail(path: Path, tail_at: int) -> Trace:
    """The events from ``tail_at`` (from :func:`split_file`) to the end of the array, and the
    keys written after it, as a ``Trace``.

    Raises:
        StreamError: the text does not decode (truncated, or a bad last cut).
    """
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm, no_gc():
        return decode_whole(b'{"traceEvents":[' + mm[tail_at + 1:])


def decode_range(path: Path, open_at: int, close_at: int, lean: bool = False) -> list[Event]:
    """Decode the events between two offsets from :func:`split_file`, in place
    (a private copy-on-write mapping: only the two bracket bytes are copied);
    ``lean``: see :func:`tracekit.trace.decode.decode_events`.

    Raises:
        StreamError: the range is not a JSON array of events (a bad cut).
    """
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) as mm:
        mm[open_at] = ord("[")
        mm[close_at] = ord("]")
        try:
            with no_gc(), memoryview(mm) as view, view[open_at:close_at + 1] as part:
                return decode_events(part, lean)
        except DECODE_ERRORS as exc:
            raise StreamError(str(exc)) from exc


def _drop_front(rest: bytearray, start: int) -> bytearray:
    """Make the byte before the next event the new '[' and drop what precedes it."""
    rest[start - 1] = ord("[")
    del rest[:start - 1]
    return rest


def _cut_raw(rest: bytearray) -> tuple[bytes | None, bytearray]:
    """The whole events at the front of ``rest`` as array text; an unchecked cut."""
    cut = _last_boundary(rest, len(rest))
    if cut is None:
        return None, rest
    comma = rest.index(b",", cut[0])
    text = bytes(rest[:comma]) + b"]"
    return text, _drop_front(rest, cut[1])


def _cut(rest: bytearray, tries: int = 4) -> tuple[list[Event] | None, bytearray]:
    """Decode the whole events at the front of ``rest`` (which starts with '[').

    The comma after the last whole event is overwritten with ']' so the front
    decodes in place (no copy); the byte before the next event becomes the new
    '[' and everything before it is dropped. Returns (events or None, rest).
    """
    end = len(rest)
    for _ in range(tries):
        cut = _last_boundary(rest, end)
        if cut is None:
            break
        comma = rest.index(b",", cut[0])
        rest[comma] = ord("]")
        try:
            with memoryview(rest) as view, view[:comma + 1] as part:
                events = decode_events(part)
        except DECODE_ERRORS:
            rest[comma] = ord(",")
            end = cut[1] - 1  # a cut inside a string or nested value: try an earlier one
            continue
        return events, _drop_front(rest, cut[1])
    return None, rest  # decode with more data (or at the end, with the real error)

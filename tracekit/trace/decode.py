"""Decode trace JSON with msgspec: arrays of events (as :class:`StrictEvent` while they
fit, else as :class:`Event`), a trace's header keys, and the one error both raise
(:class:`StreamError`). :mod:`tracekit.trace.stream` cuts a file's text into the pieces
decoded here."""

from __future__ import annotations

import gc
from contextlib import contextmanager

import msgspec

from tracekit.trace.schema import Event, LeanEvent, StrictEvent, Trace

_events_decoder = msgspec.json.Decoder(list[Event])
_strict_decoder = msgspec.json.Decoder(list[StrictEvent])
_lean_decoder = msgspec.json.Decoder(list[LeanEvent])
# RecursionError: JSON nested deeper than msgspec's decoder allows.
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError)
_trace_decoder = msgspec.json.Decoder(Trace)


class StreamError(Exception):
    """The bytes could not be read or decoded; ``problem`` says why in a few words."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


@contextmanager
def no_gc():
    """Pause the cyclic garbage collector: decoding allocates millions of objects
    that hold no cycles, and each collection pass would rescan all of them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Strict:
    """Whether this process still decodes into :class:`StrictEvent` first, and as
    :class:`LeanEvent` where asked (until a chunk holds a collective); reset per file."""

    on = True
    lean = True


def decode_events(text, lean: bool = False) -> list[Event | StrictEvent]:
    """A JSON array of events: as :class:`StrictEvent` (:class:`LeanEvent` with ``lean``, while
    ``Strict.lean``) when it fits, else as :class:`Event` (and the rest of this file too,
    without trying the strict type again).

    Raises:
        msgspec.DecodeError: not JSON (or cut inside a value); msgspec.ValidationError:
            not an array of event objects.
    """
    if Strict.on:
        try:
            return (_lean_decoder if lean and Strict.lean else _strict_decoder).decode(text)
        except msgspec.ValidationError:
            Strict.on = False
    return _events_decoder.decode(text)


def decode_whole(text: bytes) -> Trace:
    """A whole trace's JSON text (or its header keys with an empty ``traceEvents``) as a ``Trace``.

    Raises:
        StreamError: invalid or truncated JSON, or JSON that is not a trace; ``__cause__``
            holds msgspec's error.
    """
    try:
        return _trace_decoder.decode(text)
    except DECODE_ERRORS as exc:
        raise StreamError(str(exc)) from exc


def decode_chunk(data: bytes, lean: bool = False) -> list[Event]:
    """Decode a chunk from ``iter_events(raw=True)`` (``lean``: see :func:`decode_events`).

    Raises:
        StreamError: the chunk is not a JSON array of events (a bad cut).
    """
    try:
        with no_gc():
            return decode_events(data, lean)
    except DECODE_ERRORS as exc:
        raise StreamError(str(exc)) from exc


def merge_header(head: Trace, tail: Trace) -> Trace:
    """The header: keys written before ``traceEvents`` (head) and after it (tail)."""
    fields = {f: getattr(tail, f) if getattr(tail, f) not in (None, []) else getattr(head, f)
              for f in Trace.__struct_fields__ if f != "traceEvents"}
    return Trace(traceEvents=[], **fields)

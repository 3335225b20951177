"""Decode trace JSON with msgspec: arrays of events (as :class:`StrictEvent` while they
fit, else as :class:`Event`), a trace's header keys, and the one error both raise
(:class:`StreamError`). :mod:`tracekit.trace.stream` cuts a file's text into the pieces
decoded here."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Any

import msgspec

from tracekit.trace.schema import NO_ARGS, Args, Event, LeanEvent, RawTrace, StrictEvent, Trace

_events_decoder = msgspec.json.Decoder(list[Event])
_event_decoder = msgspec.json.Decoder(Event)
_raw_events_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_raw_trace_decoder = msgspec.json.Decoder(RawTrace)
_any_decoder = msgspec.json.Decoder()
_strict_decoder = msgspec.json.Decoder(list[StrictEvent])
_lean_decoder = msgspec.json.Decoder(list[LeanEvent])
# RecursionError: JSON nested deeper than msgspec's decoder allows.
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError)
_trace_decoder = msgspec.json.Decoder(Trace)


class StreamError(Exception):
    """The bytes could not be read or decoded; ``problem`` says why in a few words; ``base``: the
    offset in the file's text of the text decoded, which msgspec's "(byte N)" counts from."""

    def __init__(self, problem: str, base: int = 0):
        super().__init__(problem)
        self.problem = problem
        self.base = base


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
    without trying the strict type again); where even that fails, each event on its own
    (:func:`lenient_event`).

    Raises:
        msgspec.DecodeError: not JSON (or cut inside a value); msgspec.ValidationError: not an array.
    """
    if Strict.on:
        try:
            return (_lean_decoder if lean and Strict.lean else _strict_decoder).decode(text)
        except msgspec.ValidationError:
            Strict.on = False
    try:
        return _events_decoder.decode(text)
    except msgspec.ValidationError:
        return [lenient_event(raw) for raw in _raw_events_decoder.decode(text)]


# The category given to an item of ``traceEvents`` that is no JSON object: the reader drops and counts it.
NOT_AN_EVENT = "(not an event object)"
_SCALAR_ARGS = {f.encode_name for f in msgspec.structs.fields(Args) if f.name not in ("grid", "block")} - {
    f.encode_name for f in msgspec.structs.fields(Args) if f.type is Any}


def _scalar(v) -> bool:
    return v is None or (isinstance(v, (int, float, str)) and not isinstance(v, bool))


def _fits(key: str, v) -> bool:
    """Whether ``v`` has a type :class:`Args` takes for the arg named ``key``."""
    if key in _SCALAR_ARGS:
        return _scalar(v)
    if key in ("grid", "block"):
        return v is None or isinstance(v, str) or (isinstance(v, list) and all(
            isinstance(i, int) and not isinstance(i, bool) for i in v))
    return True   # collective metadata (any type) and args the reader does not read


def _args(value) -> Args:
    """An event's ``args`` as :class:`Args`, the values of the wrong type (a list for a number, a
    bool, an object) left out: each event's names and numbers are data, never an error."""
    if not isinstance(value, dict):
        return NO_ARGS
    try:
        return msgspec.convert({k: v for k, v in value.items() if _fits(k, v)}, Args)
    except msgspec.ValidationError:
        return NO_ARGS


def _text(v) -> str:
    return v if isinstance(v, str) else "" if v is None else str(v)


def lenient_event(raw: msgspec.Raw) -> Event:
    """One event's JSON as an :class:`Event` whatever its fields' types: ``ph``, ``cat`` and ``name``
    that are not strings become their text, ``pid``/``tid`` that are not an int or a string too, a
    ``ts`` or ``dur`` that is no number nor string None (the reader then drops or mends the event and
    counts it), ``args`` values of the wrong type left out; an item that is no object gets the
    category ``NOT_AN_EVENT``."""
    try:
        return _event_decoder.decode(raw)
    except msgspec.ValidationError:
        value = _any_decoder.decode(raw)
    if not isinstance(value, dict):
        return Event(cat=NOT_AN_EVENT)
    fields = {k: _text(value[k]) for k in ("ph", "cat", "name") if k in value}
    fields.update((k, v if isinstance(v, (int, str)) and not isinstance(v, bool) else str(v))
                  for k in ("pid", "tid") if (v := value.get(k)) is not None)
    fields.update((k, value[k] if _scalar(value[k]) else None) for k in ("ts", "dur") if k in value)
    return Event(**fields, args=_args(value.get("args")))


def decode_whole(text: bytes, base: int = 0) -> Trace:
    """A whole trace's JSON text (or its header keys with an empty ``traceEvents``) as a ``Trace``;
    ``base``: where ``text`` starts in the file's text (for the offset an error names).

    Raises:
        StreamError: invalid or truncated JSON, or JSON that is not a trace; ``__cause__``
            holds msgspec's error.
    """
    try:
        return _trace_decoder.decode(text)
    except msgspec.ValidationError as exc:   # some event's fields of the wrong types: each event on its own
        try:
            raw = _raw_trace_decoder.decode(text)
        except DECODE_ERRORS:
            raise StreamError(str(exc), base) from exc
        try:
            return msgspec.structs.replace(raw, traceEvents=[lenient_event(e) for e in raw.traceEvents])
        except DECODE_ERRORS as inner:   # an event's text that is not UTF-8, seen once its fields are read
            raise StreamError(str(inner), base) from inner
    except DECODE_ERRORS as exc:
        raise StreamError(str(exc), base) from exc


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

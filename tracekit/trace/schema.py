"""The subset of the Chrome trace-event / Kineto format that tracekit reads.

Kineto (PyTorch's profiler back end) writes Chrome trace-event JSON:
``{"traceEvents": [...], "deviceProperties": [...], ...}``. Each event has a
phase ``ph`` (``X`` complete event with ``dur``, ``s``/``f`` flow start/finish,
``i`` instant, ``M`` metadata) and a category ``cat``. Timestamps ``ts`` and
durations ``dur`` are float microseconds (µs).

Reference: the Trace Event Format document
(https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU)
and Kineto's ``ChromeTraceLogger`` (libkineto/src/output_json.cpp).

Only the fields analyzers use are declared; msgspec skips the rest while
decoding, so no Python dict is built per event.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec

# Tools disagree on types (ROCm writes ``"stream": "0x0"``, Inductor's cpu_op
# writes ``"grid": "grid(100,)"``): accept them all, coerce in the reader.
Scalar = int | float | str | None


class LeanArgs(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """The ``args`` of an event less the collective metadata of :class:`Args` (see
    :class:`LeanEvent`); names as Kineto writes them."""

    external_id: Scalar = msgspec.field(default=None, name="External id")
    # A CPU op's autograd sequence number: a backward node's is that of the forward op that made it.
    sequence: Scalar = msgspec.field(default=None, name="Sequence number")
    correlation: Scalar = None
    device: Scalar = None
    stream: Scalar = None
    grid: list[int] | str | None = None
    block: list[int] | str | None = None
    registers: Scalar = msgspec.field(default=None, name="registers per thread")
    shared_memory: Scalar = msgspec.field(default=None, name="shared memory")
    occupancy_pct: Scalar = msgspec.field(default=None, name="est. achieved occupancy %")
    bytes: Scalar = None
    bandwidth_GBps: Scalar = msgspec.field(default=None, name="memory bandwidth (GB/s)")
    # A "cuda_sync" event of a wait (Stream Wait Event, Event Sync) names the stream and the
    # cudaEventRecord call (its correlation id) it waits on (Kineto, enable_cuda_sync_events).
    wait_on_stream: Scalar = None
    wait_on_correlation: Scalar = msgspec.field(default=None, name="wait_on_cuda_event_record_corr_id")


class Args(LeanArgs, frozen=True, omit_defaults=True, gc=False):
    """The ``args`` of an event; names as Kineto writes them."""

    # Collective metadata: torch's record_param_comms CPU op writes them (and Kineto copies them
    # onto NCCL kernels); names as torch/csrc/profiler/util.h spells them. Typed Any: their types
    # vary between torch versions ("Process Group Ranks" is a str or a list), coerced in the reader.
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_msg_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_msg_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    group_size: Any = msgspec.field(default=None, name="Group size")
    dtype: Any = None
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_desc: Any = msgspec.field(default=None, name="Process Group Description")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    seq: Any = msgspec.field(default=None, name="Seq")


class Event(msgspec.Struct, frozen=True, gc=False):
    """One trace event. ``ts``/``dur`` in µs; ``pid``/``tid`` int or label."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: Scalar = None
    dur: Scalar = None
    args: Args | None = None


# The phases of the Trace Event Format document, and the categories Kineto writes
# (libkineto ActivityType names; the capitalised ones of torch < 1.11; its "Trace"
# span, "ac2g" launch flows and "fwdbwd" forward-backward flows).
Phase = Literal["B", "E", "X", "i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M", "R",
                "(", ")", "v", "V", "c", ""]
Category = Literal[
    "cpu_op", "user_annotation", "gpu_user_annotation", "gpu_memcpy", "gpu_memset", "kernel",
    "external_correlation", "cuda_runtime", "cuda_driver", "cpu_instant_event", "python_function", "overhead",
    "mtia_runtime", "mtia_ccp_events", "mtia_insight", "cuda_sync", "cuda_event", "glow_runtime",
    "cuda_profiler_range", "hpu_op", "xpu_runtime", "xpu_driver", "collective_comm", "privateuse1_runtime",
    "privateuse1_driver", "Trace", "ac2g", "fwdbwd", "Kernel", "Memcpy", "Memset", "Runtime", "Driver",
    "Operator", "Python", "Memory", ""]
NO_ARGS, NO_LEAN_ARGS = Args(), LeanArgs()


class StrictEvent(msgspec.Struct, frozen=True, gc=False):
    """An :class:`Event` typed as well-formed Kineto traces write it: decoding into it
    allocates no string for ``ph`` and ``cat`` (known values are shared) and no
    None for a missing ``ts``/``dur``/``args``, so it is faster to decode and to
    tabulate. A chunk it rejects (another category, a null, a numeric string) is
    decoded as :class:`Event`, which accepts anything; both give the same tables.
    """

    ph: Phase = ""
    cat: Category = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = math.nan
    dur: float = math.nan
    args: Args = NO_ARGS


class DeviceProperties(msgspec.Struct, frozen=True, gc=False):
    """One entry of Kineto's ``deviceProperties`` list."""

    id: int = 0
    name: str = ""
    totalGlobalMem: int | None = None
    computeMajor: int | None = None
    computeMinor: int | None = None
    numSms: int | None = None


class Trace(msgspec.Struct, frozen=True):
    """A whole Kineto trace file (the top-level JSON object)."""

    traceEvents: list[Event]
    deviceProperties: list[DeviceProperties] = []
    schemaVersion: int | None = None
    cuda_runtime_version: int | None = None
    cuda_driver_version: int | None = None
    traceName: str | None = None
    # Written by Kineto when torch.distributed is initialized: rank, world_size, backend, pg_config.
    distributedInfo: dict[str, Any] | None = None


class LeanEvent(StrictEvent, frozen=True, gc=False):
    """A :class:`StrictEvent` without the collective metadata in its args: 9 fields fewer
    to fill per event make decoding about 15% faster. Only for chunks without collectives:
    the reader decodes a chunk whose events are named like one again as
    :class:`StrictEvent` (:func:`tracekit.trace.event_columns.build_chunk`)."""

    args: LeanArgs = NO_LEAN_ARGS


class RawTrace(Trace, frozen=True):
    """A :class:`Trace` whose events are left undecoded (each one's JSON text), for a trace some of
    whose events have fields of the wrong types: each is then decoded on its own
    (:func:`tracekit.trace.decode.lenient_event`)."""

    traceEvents: list[msgspec.Raw]

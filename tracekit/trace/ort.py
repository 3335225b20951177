"""ONNX Runtime profiles (``SessionOptions.enable_profiling``) as Kineto-like events.

ONNX Runtime writes Chrome trace events in a JSON array
(onnxruntime/core/common/profiler.cc): ``cat`` "Session" for session-level
spans (``model_loading_uri``, ``session_initialization``, one ``model_run`` per
``InferenceSession.run``), "Node" for each operator execution
(``<node>_kernel_time``, with ``args.op_name`` and ``args.provider``; also
``_fence_before``/``_fence_after`` markers), and, with the CUDA execution
provider, "Kernel" for GPU kernels. They map onto our tables as:

* "Node" ``*_kernel_time``  -> CPU op named by its ONNX op type (cat ``cpu_op``);
* "Session" ``model_run``   -> iteration marker (``ProfilerStep#N``, N from 1);
* "Kernel"                  -> GPU kernel (device 0 unless ``args.device``).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from tracekit.trace.schema import Args, Event, Scalar
from tracekit.trace.stream import _open


class OrtArgs(msgspec.Struct, gc=False):
    op_name: str | None = None
    provider: str | None = None
    stream: Scalar = None
    device: Scalar = None


class OrtEvent(msgspec.Struct, gc=False):
    cat: str = ""
    name: str = ""
    ph: str = "X"
    pid: int | str = 0
    tid: int | str = 0
    ts: Scalar = None
    dur: Scalar = None
    args: OrtArgs | None = None


ORT_CATS = {"Session", "Node", "Kernel"}
SOURCE = "onnxruntime"  # EventTables.meta["source"] of a trace read from an ONNX Runtime profile


def events(path: Path) -> list[Event] | None:
    """The ONNX Runtime profile at ``path`` as Kineto-like events, or None when
    the JSON array is not an ONNX Runtime profile.

    Raises:
        msgspec.DecodeError, msgspec.ValidationError: not a JSON array of events.
    """
    with _open(path) as f:
        raw = msgspec.json.decode(f.read(), type=list[OrtEvent])
    if not raw or not {e.cat for e in raw} & ORT_CATS or not any(e.name == "model_run" for e in raw):
        return None
    out, step = [], 0
    for e in sorted(raw, key=lambda e: e.ts if isinstance(e.ts, (int, float)) else 0):
        a = e.args or OrtArgs()
        if e.cat == "Node" and e.name.endswith("_kernel_time"):
            out.append(Event(ph="X", cat="cpu_op", name=a.op_name or e.name, pid=e.pid, tid=e.tid,
                             ts=e.ts, dur=e.dur, args=Args()))
        elif e.cat == "Session" and e.name == "model_run":
            step += 1
            out.append(Event(ph="X", cat="user_annotation", name=f"ProfilerStep#{step}", pid=e.pid, tid=e.tid,
                             ts=e.ts, dur=e.dur, args=Args()))
        elif e.cat == "Kernel":
            out.append(Event(ph="X", cat="kernel", name=e.name, pid=e.pid, tid=e.tid, ts=e.ts, dur=e.dur,
                             args=Args(device=a.device if a.device is not None else 0, stream=a.stream)))
    return out


def drop_first_runs(raw: list[dict], n: int) -> list[dict]:
    """The events of a decoded ORT profile from the end of its ``n``-th ``model_run`` on.

    The warm-up runs, and the model loading and session set-up before them,
    are dropped, as torch.profiler's schedule leaves its warm-up steps out of
    its trace. Unchanged when the profile has ``n`` runs or fewer.
    """
    ends = sorted(e["ts"] + e.get("dur", 0) for e in raw if e.get("cat") == "Session" and e.get("name") == "model_run")
    if n < 1 or len(ends) <= n:
        return raw
    return [e for e in raw if e.get("ts", 0) >= ends[n - 1]]

"""A ``cuda-graphs`` prediction with the kernels the capture runs, where the run traced them (issue 39).

An eager run whose step takes another path while told a CUDA graph captures it traces its steps
so, beside its own trace (:mod:`tracekit.capture.capture_path`: run.json ``capture_path.trace``).
On an H200 a Hugging Face decoder (transformers 5.24) builds its causal mask there, about 70 aten
calls a step more, which eager skips after reading the mask: the replay runs those kernels, and a
prediction from eager's kernels alone came out 11-17% short (reports/h200/predict-more).

The prediction then keeps the eager run's calibration (its host and GPU factors, fitted to its
unprofiled latency) and adds what the capture path changes, modelled the same way on both traces:
the ``cuda-graphs`` edit applied to the capture path's trace and to the eager trace, each as traced
(uncalibrated), and their difference added to the calibrated prediction and its interval. The
capture path's kernels are measured (run eagerly, profiled like the run's), the replay of them
modelled; the note says so. The reasons the eager trace gave for low confidence (its reads, its
path) are what this answers, and are dropped; a capture path that failed gives no trace and keeps
them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from tracekit.analysis.critical_path import reasons as why
from tracekit.analysis.critical_path.uncertainty import Interval
from tracekit.trace.reader import TraceError, load

ANSWERED = (why.CAPTURE_READS, why.CAPTURE_MASK, why.CAPTURE_PATH)   # the eager trace's doubts a capture path settles


def capture_trace(ranks, name: str | None) -> Path | None:
    """The capture path's trace of a one-trace run: ``name`` (run.json ``capture_path.trace``, a
    file name) in the folder of its trace, where it is a file there; else None (for a name with a
    folder in it too)."""
    if not name or len(ranks) != 1 or Path(name).name != name or ranks[0][1].path is None:
        return None
    path = Path(ranks[0][1].path).parent / name
    return path if path.is_file() else None


def with_capture_kernels(result, ranks, name: str | None, edits, as_traced: Callable[[list], float]):
    """``result`` (a :class:`~tracekit.analysis.critical_path.predict.WhatIf` of ``ranks``, a run's
    calibrated ``cuda-graphs`` prediction) moved by what the run's capture path changes (the module
    docstring; ``name``: run.json ``capture_path.trace``, :func:`capture_trace`; ``as_traced``: the
    edits' prediction of a run's (rank, tables) as traced, ms), in place and returned; unchanged where
    the edits make no CUDA graph or the run has no capture path's trace. A trace that cannot be read
    or modelled is a note (``CAPTURE_KERNELS`` with ``problem``), the prediction kept."""
    path = capture_trace(ranks, name)
    if path is None or not any(e.kind == "cuda-graphs" for e in edits):
        return result
    try:
        eager, captured = as_traced(ranks), as_traced([(ranks[0][0], load(path))])
    except Exception as exc:  # noqa: BLE001 - a damaged or odd capture trace costs its kernels, not the prediction
        text = str(exc) if isinstance(exc, TraceError) else f"{type(exc).__name__}: {exc}"
        result.notes.append({"code": why.CAPTURE_KERNELS, "trace": path.name, "problem": text[:300]})
        return result
    delta = captured - eager
    result.predicted_ms += delta
    if result.interval is not None:
        iv = result.interval
        result.interval = Interval(iv.low_ms + delta, iv.high_ms + delta, iv.sources)
    result.notes = [n for n in result.notes if n.get("code") not in ANSWERED]
    result.notes.insert(0, {"code": why.CAPTURE_KERNELS, "trace": path.name, "delta_ms": delta,
                            "eager_ms": eager, "captured_ms": captured})
    result.confidence = "normal"
    return result

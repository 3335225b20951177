"""Whether a step takes another path while a CUDA graph is captured (issue 39).

A ``cuda-graphs`` prediction keeps the eager trace's kernels, which is wrong where the program asks
whether it is being captured and does other work then. Hugging Face transformers does
(``transformers.utils.import_utils.is_tracing`` includes ``torch.cuda.is_current_stream_capturing()``;
``masking_utils`` then builds an attention mask it skips in eager), and so does ``torch.optim``
(``Optimizer.step`` checks that a step captured is ``capturable``). Seen on an H200
(reports/h200/predict-more): with transformers 5.17 bert replayed the unfused math attention with a
built mask (GPU busy +74%); transformers 5.24 builds no mask for an encoder without one, but still
builds one for a decoder whose mask eager reads: predicted from eager's kernels, its Mistral and
Qwen2 decoders came out 11-18% short; with the kernels of their capture path, 1.2-6.1%.

:func:`check` asks the program itself: one step as it runs, and one with
``torch.cuda.is_current_stream_capturing`` returning True (nothing captured: the step runs eagerly,
on any device, the CPU too), each step's aten ops counted by a ``TorchDispatchMode`` (the ops below
autograd, as the profiler names them: ``aten::add``). Where the two differ, or the second raises,
the captured program is another one, and ``tracekit whatif --cuda-graphs`` says so
(:mod:`tracekit.analysis.critical_path.capture_risk`). Where they differ and the step runs,
:func:`profile` traces its steps as if captured (:func:`record`: both), beside the run's trace
(``<worker>.capture-path.pt.trace.json.gz``, which no analysis takes for the run's: only the what-if
reads it), so that the prediction replays the kernels the capture runs
(:mod:`tracekit.analysis.critical_path.capture_kernels`). It runs after the profiled window, so the run's
own figures are untouched; what it cannot see is code that asks otherwise (a flag of its own, or
``is_current_stream_capturing`` imported by name before the run).
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Callable
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tracekit.capture.profiling import profiler
from tracekit.capture.quiet import kineto_lines_dropped
from tracekit.trace.reader import CAPTURE_PATH, trace_files

SHOWN = 12   # the ops of each side kept in the record, most calls first


class _Count(TorchDispatchMode):
    """Counts each aten op called inside it (``aten::<name>``, overloads together)."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[f"aten::{func.overloadpacket.__name__}"] += 1
        return func(*args, **(kwargs or {}))


@contextmanager
def capturing():
    """Inside it ``torch.cuda.is_current_stream_capturing()`` says True (nothing is captured)."""
    with mock.patch.object(torch.cuda, "is_current_stream_capturing", return_value=True):
        yield


def _ops(step: Callable[[], object], device: str) -> Counter:
    with _Count() as counted:
        step()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return counted.ops


def check(step: Callable[[], object], device: str) -> dict:
    """One call of ``step`` as it runs and one while ``torch.cuda.is_current_stream_capturing()``
    says True (the module docstring).

    Returns:
        ``{"differs": bool, "added": {op: calls}, "removed": {op: calls}, "calls_added": int,
        "calls_removed": int, "error": str | None}``: the aten ops the capturing call made more
        (added) and fewer (removed) than the plain one (calls per step, the ``SHOWN`` most of each;
        all of them in the two totals), and the capturing call's error, one line (then ``differs``
        is True and the counts are empty). An error of the plain call is raised.
    """
    plain = _ops(step, device)
    try:
        with capturing():
            told = _ops(step, device)
    except Exception as exc:  # noqa: BLE001 - the capture path's failure is the finding
        text = str(exc).strip().splitlines()
        return {"differs": True, "added": {}, "removed": {}, "calls_added": 0, "calls_removed": 0,
                "error": f"{type(exc).__name__}: {text[0] if text else ''}"[:300]}
    added, removed = told - plain, plain - told
    return {"differs": bool(added or removed), "added": dict(added.most_common(SHOWN)),
            "removed": dict(removed.most_common(SHOWN)), "calls_added": sum(added.values()),
            "calls_removed": sum(removed.values()), "error": None}


def profile(step: Callable[[], object], device: str, folder: Path, worker: str, iterations: int) -> str:
    """Trace ``iterations`` steps as if captured (:func:`capturing`), after one warm-up step, as the
    profiled window traces the run's (:func:`tracekit.capture.profiling.profiler`, one
    ``ProfilerStep#N`` each), into ``folder/<worker>.capture-path.pt.trace.json.gz``; return that
    file's name. Raises what the step or the profiler raise."""
    window = torch.profiler.schedule(wait=0, warmup=1, active=iterations, repeat=1)
    with tempfile.TemporaryDirectory(prefix="tracekit-capture-path-") as tmp:
        with capturing(), kineto_lines_dropped(), profiler(device, Path(tmp), worker, window) as prof:
            for i in range(1 + iterations):
                step()
                if i in (0, iterations) and device.startswith("cuda"):
                    torch.cuda.synchronize()   # as the profiled window: each step's kernels inside it
                prof.step()
        [written] = trace_files(Path(tmp))
        name = f"{worker}{CAPTURE_PATH}"
        shutil.move(str(written), Path(folder) / name)
    return name


def record(step: Callable[[], object], device: str, folder: Path, worker: str, iterations: int) -> dict:
    """:func:`check`'s record of ``step``, with ``trace``: where the two paths differ and the step
    runs as if captured, the file :func:`profile` wrote (``iterations`` steps in ``folder``), else
    None. Raises what they raise."""
    found = check(step, device)
    found["trace"] = profile(step, device, folder, worker, iterations) \
        if found["differs"] and not found["error"] else None
    return found

"""Whether a step takes another path while a CUDA graph is captured (issue 39).

A ``cuda-graphs`` prediction keeps the eager trace's kernels, which is wrong where the program asks
whether it is being captured and does other work then. Hugging Face transformers does
(``transformers.utils.import_utils.is_tracing`` includes ``torch.cuda.is_current_stream_capturing()``;
``masking_utils`` then builds an attention mask it skips in eager), and so does ``torch.optim``
(``Optimizer.step`` checks that a step captured is ``capturable``). Seen on an H200
(reports/h200/predict-more): with transformers 5.17 bert replayed the unfused math attention with a
built mask (GPU busy +74%); transformers 5.24 builds no mask for an encoder without one, but still
builds one for a decoder whose mask eager reads.

:func:`check` asks the program itself: one step as it runs, and one with
``torch.cuda.is_current_stream_capturing`` returning True (nothing captured: the step runs eagerly,
on any device, the CPU too), each step's aten ops counted by a ``TorchDispatchMode`` (the ops below
autograd, as the profiler names them: ``aten::add``). Where the two differ, or the second raises,
the captured program is another one, and ``tracekit whatif --cuda-graphs`` says so
(:mod:`tracekit.analysis.critical_path.capture_risk`). It runs after the profiled window, so the
run's own figures are untouched; what it cannot see is code that asks otherwise (a flag of its own).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SHOWN = 12   # the ops of each side kept in the record, most calls first


class _Count(TorchDispatchMode):
    """Counts each aten op called inside it (``aten::<name>``, overloads together)."""

    def __init__(self):
        super().__init__()
        self.ops = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[f"aten::{func.overloadpacket.__name__}"] += 1
        return func(*args, **(kwargs or {}))


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
        with mock.patch.object(torch.cuda, "is_current_stream_capturing", return_value=True):
            capturing = _ops(step, device)
    except Exception as exc:  # noqa: BLE001 - the capture path's failure is the finding
        text = str(exc).strip().splitlines()
        return {"differs": True, "added": {}, "removed": {}, "calls_added": 0, "calls_removed": 0,
                "error": f"{type(exc).__name__}: {text[0] if text else ''}"[:300]}
    added, removed = capturing - plain, plain - capturing
    return {"differs": bool(added or removed), "added": dict(added.most_common(SHOWN)),
            "removed": dict(removed.most_common(SHOWN)), "calls_added": sum(added.values()),
            "calls_removed": sum(removed.values()), "error": None}

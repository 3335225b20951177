"""Torch-TensorRT (https://pytorch.org/TensorRT/): ``torch_tensorrt.compile(ir="dynamo")``.

Used when ``torch_tensorrt`` imports; otherwise the run is skipped with how to install it.
"""

from __future__ import annotations

import importlib.util

from tracekit.backends.backend import Backend, Prepared, needs_cuda, register
from tracekit.models.family import DTYPES

INSTALL = ("pip install torch-tensorrt (the release matching your torch and CUDA; "
           "see https://pytorch.org/TensorRT/getting_started/installation.html)")


def unavailable(spec) -> str | None:
    if importlib.util.find_spec("torch_tensorrt") is None:
        return f"torch_tensorrt not installed: {INSTALL}"
    return needs_cuda(spec)


def prepare(module, inputs, spec) -> Prepared:
    import torch_tensorrt

    trt = torch_tensorrt.compile(module, ir="dynamo", inputs=list(inputs),
                                 enabled_precisions={DTYPES[spec.dtype]})
    return Prepared(trt, "cuda", {"torch_tensorrt": torch_tensorrt.__version__})


register(Backend("tensorrt", "Torch-TensorRT (dynamo IR)", prepare, unavailable=unavailable,
                 phases=frozenset({"inference"})))

"""TorchScript: ``torch.jit.trace``, then, for inference, ``freeze`` and
``optimize_for_inference`` (https://pytorch.org/docs/stable/generated/torch.jit.optimize_for_inference.html).

TorchScript is deprecated in recent PyTorch; a model it cannot trace becomes a
failed run with the tracer's message, not a crash.
"""

from __future__ import annotations

import warnings

import torch

from tracekit.backends.backend import Backend, Prepared, register


def prepare(module, inputs, spec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TorchScript's deprecation notices
        traced = torch.jit.trace(module, inputs, check_trace=False)
        if spec.phase != "inference":
            return Prepared(traced, spec.device.split(":")[0], {"torchscript": "torch.jit.trace"})
        optimized = torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval()))
    return Prepared(optimized, spec.device.split(":")[0],
                    {"torchscript": "torch.jit.trace + freeze + optimize_for_inference"})


register(Backend("jit", "TorchScript (torch.jit.trace; frozen and optimize_for_inference for inference)", prepare))

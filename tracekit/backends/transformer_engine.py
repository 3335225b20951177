"""NVIDIA TransformerEngine FP8 (https://github.com/NVIDIA/TransformerEngine).

Each eligible ``nn.Linear`` becomes ``transformer_engine.pytorch.Linear`` (same
weights) and the model runs under ``te.fp8_autocast`` with TE's default
delayed-scaling recipe. Used when ``transformer_engine`` imports; otherwise
skipped with how to install it (its wheels need a matching CUDA toolkit).
"""

from __future__ import annotations

import importlib.util

import torch

from tracekit.backends.backend import Backend, Prepared, register
from tracekit.backends.fp8 import convert, fp8_unavailable

INSTALL = "pip install transformer_engine[pytorch] (needs CUDA 12+ and a GPU of compute capability 8.9+ for FP8)"


def unavailable(spec) -> str | None:
    if importlib.util.find_spec("transformer_engine") is None:
        return f"transformer_engine not installed: {INSTALL}"
    return fp8_unavailable(spec)


def prepare(module, inputs, spec) -> Prepared:
    import transformer_engine.pytorch as te

    def make(linear):
        new = te.Linear(linear.in_features, linear.out_features, bias=linear.bias is not None,
                        params_dtype=linear.weight.dtype, device=linear.weight.device)
        with torch.no_grad():
            new.weight.copy_(linear.weight)
            if linear.bias is not None:
                new.bias.copy_(linear.bias)
        return new

    converted = convert(module, make)

    def run(*xs):
        with te.fp8_autocast(enabled=True):
            return module(*xs)
    return Prepared(run, "cuda", {"te_linears": len(converted), "fp8_recipe": "TE DelayedScaling (default)"})


register(Backend("te-fp8", "TransformerEngine Linear layers under fp8_autocast", prepare, unavailable=unavailable,
                 module_scopes=True))

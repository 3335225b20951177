"""FP8 linears through torchao (https://github.com/pytorch/ao), for inference and training.

``torchao-fp8``: each eligible ``nn.Linear`` (:func:`tracekit.backends.fp8.eligible`)
becomes torchao's ``Float8Linear`` through ``torchao.float8.convert_to_float8_training``
with its default recipe: dynamic per-tensor ("tensorwise") scaling, e4m3 for inputs and
weights, e5m2 for gradients (torchao/float8/README.md; "FP8 Formats for Deep Learning",
Micikevicius et al., 2022, arXiv:2209.05433). The rest of the model runs eagerly in its
own dtype. ``torchao-fp8-surgical``: the same FP8 linears, eager, with the model family's
``compile_targets`` (or ``--compile-only``) compiled, as the published TransformerEngine
study compiled RoPE and the QKV reshape around TE's FP8 linears. ``torchao-fp8-compile``:
the FP8 model under ``torch.compile`` (mode=default), as torchao's float8 README
recommends, so Inductor fuses the scaling and casts into few kernels.

Skipped, with how to install it, where torchao does not import; skipped where the GPU
cannot run FP8 GEMMs (compute capability below 8.9) or there is no GPU.
"""

from __future__ import annotations

import importlib.util

import torch

from tracekit.backends.backend import Backend, Prepared, register
from tracekit.backends.fp8 import eligible, fp8_unavailable
from tracekit.backends.surgical import compile_submodules

INSTALL = "pip install torchao (0.17 or later for torch 2.11 or later)"
RECIPE = "torchao Float8Linear, dynamic tensorwise scaling (e4m3 forward, e5m2 gradients)"


def unavailable(spec) -> str | None:
    """None where torchao imports and the device can run FP8 GEMMs, else why not and the fix."""
    if importlib.util.find_spec("torchao") is None:
        return f"torchao not installed: {INSTALL}"
    return fp8_unavailable(spec)


def to_float8(module):
    """Swap ``module``'s eligible linears for torchao ``Float8Linear`` in place.

    Returns:
        (the module, names of the converted linears, torchao's version).
    Raises:
        tracekit.models.Unavailable: no linear is eligible.
    """
    import torchao
    from torchao.float8 import convert_to_float8_training

    names = set(eligible(module))
    converted = convert_to_float8_training(module, module_filter_fn=lambda mod, fqn: fqn in names)
    return converted, sorted(names), torchao.__version__


def _prepared(fn, spec, names: list[str], version: str, **info) -> Prepared:
    return Prepared(fn, spec.device.split(":")[0],
                    {"fp8_linears": len(names), "fp8_recipe": RECIPE, "torchao": version, **info})


def prepare(module, inputs, spec) -> Prepared:
    module, names, version = to_float8(module)
    return _prepared(module, spec, names, version)


def prepare_surgical(module, inputs, spec) -> Prepared:
    module, names, version = to_float8(module)
    chosen, patterns = compile_submodules(module, spec)
    return _prepared(module, spec, names, version, compiled=chosen, patterns=patterns)


def prepare_compiled(module, inputs, spec) -> Prepared:
    module, names, version = to_float8(module)
    return _prepared(torch.compile(module), spec, names, version)


register(Backend("torchao-fp8", "torchao Float8Linear layers (dynamic scaling; Ada/Hopper), inference and "
                 "training", prepare, unavailable=unavailable, module_scopes=True))
register(Backend("torchao-fp8-surgical", "torchao FP8 linears, eager, with chosen submodules compiled "
                 "(--compile-only, default the family's targets)", prepare_surgical, unavailable=unavailable,
                 module_scopes=True))
register(Backend("torchao-fp8-compile", "torchao FP8 linears, the whole model under torch.compile (mode=default)",
                 prepare_compiled, unavailable=unavailable))

"""Workload registry: model name -> (nn.Module, example inputs), in pure torch.

Each family lives in its own module and registers itself with :func:`register`
at import. A family matches names by a regular expression, so parametrised
names such as ``vit16x6x384`` need no table of sizes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import torch

from tracekit.spec import DTYPES as DTYPE_NAMES

# The torch dtype of each dtype name (tracekit.spec.DTYPES).
DTYPES = dict(zip(DTYPE_NAMES, (torch.float32, torch.bfloat16, torch.float16), strict=True))


@dataclass(frozen=True)
class Family:
    """A model family: the names it accepts and how to build one."""

    pattern: re.Pattern
    example: str  # a valid name, shown in error messages and `tracekit models`
    default_batch: int
    builder: Callable[..., tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]
    description: str
    compile_targets: str = ""  # default name patterns for surgical compile
    # cost(match, batch, element_bytes) -> {"flop": ..., "bytes": ...}: the arithmetic and the
    # fewest DRAM bytes one call needs, for achieved TFLOP/s and GB/s (single-op workloads);
    # optionally "op": the model whose op a variant computes (softmax4096-triton: softmax4096).
    cost: Callable[..., dict] | None = None


FAMILIES: dict[str, Family] = {}


class UnknownModel(ValueError):
    """A model name no family accepts; the message lists the valid ones."""


class Unavailable(RuntimeError):
    """A workload that cannot run here (a package or a device missing); the message says
    why and how to fix it. Raised by a builder or a forward; the runner records the run
    as "skipped" with that reason."""


def register(key: str, pattern: str, example: str, default_batch: int, description: str,
             compile_targets: str = "", cost: Callable[..., dict] | None = None):
    """Decorator: add ``builder(match, batch) -> (module, inputs)`` to the registry."""
    def wrap(builder):
        FAMILIES[key] = Family(re.compile(pattern), example, default_batch, builder, description, compile_targets,
                               cost)
        return builder
    return wrap


def cost(name: str, batch: int, dtype: str) -> dict | None:
    """{"flop", "bytes"} of one call of a single-op workload, or None (see Family.cost)."""
    family, match = lookup(name)
    if family.cost is None:
        return None
    return family.cost(match, batch or family.default_batch, DTYPES[dtype].itemsize)


def lookup(name: str) -> tuple[Family, re.Match]:
    """The family that accepts ``name`` and the regex match of it.

    Raises:
        UnknownModel: no family accepts ``name``.
    """
    for family in FAMILIES.values():
        if m := family.pattern.fullmatch(name):
            return family, m
    valid = ", ".join(f.example if f.example == k else f"{k} (e.g. {f.example})" for k, f in FAMILIES.items())
    raise UnknownModel(f"unknown model {name!r}; valid models: {valid}")


def build(name: str, batch: int | None = None, dtype: str = "fp32", device: str = "cpu",
          seed: int = 0) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Build a model in eval mode and its example inputs, on ``device`` in ``dtype``.

    Args:
        name: a registered model name (``vit16x6x384``, ``mlp``, ...).
        batch: batch size; None takes the family's default.
        dtype: one of ``DTYPES`` (fp32, bf16, fp16).
        device: a torch device string ("cpu", "cuda", "cuda:1").
        seed: seeds weights and inputs, so two builds are identical.

    Raises:
        UnknownModel: unknown ``name``.
        ValueError: unknown ``dtype`` or a non-positive batch.
    """
    family, match = lookup(name)
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; valid dtypes: {', '.join(DTYPES)}")
    batch = family.default_batch if batch is None else batch
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    torch.manual_seed(seed)
    module, inputs = family.builder(match, batch)
    module = module.to(device=device, dtype=DTYPES[dtype]).eval()
    inputs = tuple(x.to(device=device, dtype=DTYPES[dtype]) if x.is_floating_point() else x.to(device)
                   for x in inputs)
    return module, inputs


def default_batch(name: str) -> int:
    """The batch size ``build`` uses for ``name`` when none is given."""
    return lookup(name)[0].default_batch


from tracekit.models import conv, lm, mlp, ops, rope, transformer, vit  # noqa: E402,F401  (register the families)

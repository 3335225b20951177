"""Phases of a run: what one timed iteration does with the prepared model.

* ``inference`` (default): forward under ``torch.no_grad``.
* ``forward``: forward with autograd recording (activations kept for backward).
* ``forward-backward``: forward, then backward of a synthetic loss (mean of the
  squared output, so every output element gets a gradient); gradients are
  reset (to None) before each iteration.
* ``train-step``: forward-backward, then one AdamW step (lr 1e-4) on the
  module's parameters.

The model stays in eval mode in every phase (no dropout), so a compiled
backend computes the same function as eager and outputs compare.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from tracekit.spec import PHASES

TRAINING = frozenset(PHASES) - {"inference"}


def _loss(out) -> torch.Tensor:
    if isinstance(out, (tuple, list)):
        return sum(_loss(o) for o in out)
    return out.float().pow(2).mean()


def make_step(fn: Callable, module: torch.nn.Module, phase: str) -> Callable[[tuple], Any]:
    """A callable ``step(inputs) -> output`` doing one iteration of ``phase``.

    Args:
        fn: the prepared model (eager module, compiled module, session...).
        module: the eager module whose parameters ``fn`` shares (trained in place).
        phase: one of ``PHASES``.

    Raises:
        ValueError: unknown phase.
    """
    if phase == "inference":
        def step(inputs):
            with torch.no_grad():
                return fn(*inputs)
        return step
    if phase == "forward":
        def step(inputs):
            with torch.enable_grad():
                return fn(*inputs)
        return step
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; valid phases: {', '.join(PHASES)}")
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-4) if phase == "train-step" else None

    def step(inputs):
        with torch.enable_grad():
            module.zero_grad(set_to_none=True)
            out = fn(*inputs)
            _loss(out).backward()
            if optimizer is not None:
                optimizer.step()
        return out
    return step

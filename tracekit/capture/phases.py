"""Phases of a run: what one timed iteration does with the prepared model.

* ``inference`` (default): forward under ``torch.no_grad``.
* ``forward``: forward with autograd recording (activations kept for backward).
* ``forward-backward``: forward, then backward of the model's own loss when its
  output has one (a ``loss`` field: transformers models given labels), else of a
  synthetic loss (the sum over floating output tensors of the mean of their
  squares, so every output element gets a gradient); gradients are reset (to
  None) before each iteration.
* ``train-step``: forward-backward, then one AdamW step (lr 1e-4) on the
  module's parameters.
* ``decode`` (causal LMs): one decode step under ``torch.no_grad``: the model over its static
  KV cache makes the next token's logits for each sequence (the prepared callable: eager,
  compiled or a CUDA graph replay), then the greedy token becomes the next input and the
  position advances (:meth:`tracekit.models.kv_cache.DecodeStep.advance`, outside the
  prepared callable, as serving engines sample outside their captured step).

The model stays in eval mode in every phase (no dropout), so a compiled
backend computes the same function as eager and outputs compare.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import torch

from tracekit.capture.outputs import tensors
from tracekit.manifest.spec import PHASES

TRAINING = frozenset(PHASES) - {"inference", "decode"}   # the phases with autograd on


def model_loss(out) -> torch.Tensor | None:
    """The model's own loss in its output (a one-element ``loss`` entry or field), or None."""
    loss = out.get("loss") if isinstance(out, Mapping) else getattr(out, "loss", None)
    return loss if isinstance(loss, torch.Tensor) and loss.numel() == 1 else None


def _loss(out) -> torch.Tensor:
    own = model_loss(out)
    if own is not None:
        return own
    return sum(t.float().pow(2).mean() for t in tensors(out) if t.is_floating_point())


def make_step(fn: Callable, module: torch.nn.Module, phase: str, capturable: bool = False) -> Callable[[tuple], Any]:
    """A callable ``step(inputs) -> output`` doing one iteration of ``phase``.

    Args:
        fn: the prepared model (eager module, compiled module, session...).
        module: the eager module whose parameters ``fn`` shares (trained in place); for decode the
            :class:`tracekit.models.kv_cache.DecodeStep`, whose buffers ``inputs`` are (it is rewound
            to the prompt's end here: the reference output and a backend's warm-up calls went past it).
        phase: one of ``PHASES``.
        capturable: the step will be captured in a CUDA graph: AdamW keeps its step count on
            the GPU (``capturable=True``, torch.optim.AdamW's documentation).

    Raises:
        ValueError: unknown phase.
    """
    if phase == "inference":
        def step(inputs):
            with torch.no_grad():
                return fn(*inputs)
        return step
    if phase == "decode":
        module.rewind()

        def step(inputs):
            with torch.no_grad():
                logits = fn(*inputs)
                module.advance(logits)
            return logits
        return step
    if phase == "forward":
        def step(inputs):
            with torch.enable_grad():
                return fn(*inputs)
        return step
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; valid phases: {', '.join(PHASES)}")
    optimizer = (torch.optim.AdamW(module.parameters(), lr=1e-4, capturable=capturable)
                 if phase == "train-step" else None)

    def step(inputs):
        with torch.enable_grad():
            module.zero_grad(set_to_none=True)
            out = fn(*inputs)
            _loss(out).backward()
            if optimizer is not None:
                optimizer.step()
        return out
    return step

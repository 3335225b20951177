"""Surgical compile: ``torch.compile`` only the submodules whose names match
patterns (``fnmatch`` on names from ``named_modules()``), the rest stays eager.

Patterns come from ``--compile-only`` (RunSpec.compile_only), else from the
model family's ``compile_targets`` (e.g. RoPE and the QKV reshape of the
``ropetx`` transformer). run.json lists what was compiled.
"""

from __future__ import annotations

from fnmatch import fnmatch

import torch

from tracekit import models
from tracekit.backends.backend import Backend, Prepared, register


def targets(module: torch.nn.Module, patterns: list[str]) -> list[str]:
    """Names of the outermost submodules matching any pattern."""
    chosen: list[str] = []
    for name, _ in module.named_modules():
        if name and any(fnmatch(name, p) for p in patterns) and not any(name.startswith(c + ".") for c in chosen):
            chosen.append(name)
    return chosen


def compile_submodules(module: torch.nn.Module, spec) -> tuple[list[str], list[str]]:
    """``torch.compile`` in place the outermost submodules of ``module`` whose names match
    ``spec.compile_only`` (else the model family's ``compile_targets``).

    Returns:
        (names compiled, patterns used).
    Raises:
        ValueError: no submodule matches (the message lists some names).
    """
    text = spec.compile_only or models.lookup(spec.model)[0].compile_targets
    patterns = [p.strip() for p in text.split(",") if p.strip()]
    chosen = targets(module, patterns)
    if not chosen:
        names = [n for n, _ in module.named_modules() if n][:20]
        raise ValueError(f"no submodule matches {patterns}; some names: {', '.join(names)}")
    for name in chosen:
        parent, _, attr = name.rpartition(".")
        holder = module.get_submodule(parent) if parent else module
        setattr(holder, attr, torch.compile(getattr(holder, attr)))
    return chosen, patterns


def prepare(module, inputs, spec) -> Prepared:
    chosen, patterns = compile_submodules(module, spec)
    return Prepared(module, spec.device.split(":")[0], {"compiled": chosen, "patterns": patterns})


register(Backend("surgical", "torch.compile of chosen submodules only (--compile-only patterns)", prepare,
                 module_scopes=True))

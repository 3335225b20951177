"""torch.compile with the Inductor back end, one registered mode per ``mode=``.

Modes as documented for torch.compile
(https://pytorch.org/docs/stable/generated/torch.compile.html):
``default``; ``reduce-overhead`` (CUDA graphs to cut launch overhead);
``max-autotune`` (Triton/template autotuning plus CUDA graphs);
``max-autotune-no-cudagraphs``. Every phase, decode too: its step (the model over the static KV
cache, :class:`tracekit.models.kv_cache.DecodeStep`) compiled as gpt-fast and transformers' static-cache
recipe compile it.
"""

from __future__ import annotations

import torch

from tracekit.backends.backend import Backend, register
from tracekit.manifest.spec import PHASES

CUDAGRAPH_MODES = {"reduce-overhead", "max-autotune"}


def mark_step(fn):
    """Wrap ``fn`` so each call starts a new CUDA-graph-trees iteration: the previous
    iteration's outputs may then be overwritten (torch.compiler.cudagraph_mark_step_begin)."""
    def call(*args):
        torch.compiler.cudagraph_mark_step_begin()
        return fn(*args)
    return call


def _prepare(mode: str):
    def prepare(module, inputs, spec):
        compiled = torch.compile(module, mode=None if mode == "default" else mode)
        return mark_step(compiled) if mode in CUDAGRAPH_MODES else compiled
    return prepare


def _note(mode: str):
    def note(device: str) -> str:
        if mode in CUDAGRAPH_MODES and device != "cuda":
            return f"mode={mode} uses CUDA graphs only on CUDA; on {device} it runs without them"
        return ""
    return note


for _mode, _text in [
    ("default", "torch.compile, Inductor, mode=default (fusion, Triton/C++ kernels)"),
    ("reduce-overhead", "torch.compile mode=reduce-overhead (Inductor; CUDA graphs on CUDA)"),
    ("max-autotune", "torch.compile mode=max-autotune (autotuned kernels; CUDA graphs on CUDA)"),
    ("max-autotune-no-cudagraphs", "torch.compile mode=max-autotune-no-cudagraphs"),
]:
    register(Backend(_mode, _text, _prepare(_mode), note=_note(_mode), phases=frozenset(PHASES),
                     graph_capture="warmup" if _mode in CUDAGRAPH_MODES else ""))

"""Module scopes: a ``record_function`` range ``module::<path>`` around each call of each
module (forward pre/post hooks), so the trace says which module every GPU op ran in
(:mod:`tracekit.analysis.attribution.gpu_ops` reads them). For modes that run the model's Python
eagerly; installed for the profiled window only (:class:`tracekit.capture.provenance.ProvenanceRecorder`)."""

from __future__ import annotations

from contextlib import contextmanager

import torch

from tracekit.analysis.attribution.opnames import SCOPE_PREFIX


def _optimized_module():
    try:
        from torch._dynamo.eval_frame import OptimizedModule
    except ImportError:  # a torch without Dynamo
        return ()
    return OptimizedModule


def _scoped_modules(module: torch.nn.Module, prefix: str = ""):
    """(path, module) of ``module`` and its descendants, stopping below compiled submodules
    (an ``OptimizedModule`` gets a scope; what it compiled runs without Python hooks)."""
    yield prefix, module
    if isinstance(module, _optimized_module()):
        return
    for name, child in module.named_children():
        yield from _scoped_modules(child, f"{prefix}.{name}" if prefix else name)


@contextmanager
def module_scopes(module: torch.nn.Module):
    """A ``module::<path>`` range (``module::`` for the root) around every call of
    ``module`` and its submodules while the context is open.

    Ranges are opened in forward pre-hooks and closed in forward hooks (run even when
    forward raises), so they nest like the calls. Shared modules get their first path.
    """
    fast = getattr(torch._C._profiler, "_RecordFunctionFast", None)
    open_ranges: list = []

    def enter(name: str):
        def hook(_module, _args):
            scope = fast(name) if fast else torch.autograd.profiler.record_function(name)
            scope.__enter__()
            open_ranges.append(scope)
        return hook

    def leave(_module, _args, _output):
        if open_ranges:
            open_ranges.pop().__exit__(None, None, None)

    handles, seen = [], set()
    for path, sub in _scoped_modules(module):
        if id(sub) in seen:
            continue
        seen.add(id(sub))
        handles.append(sub.register_forward_pre_hook(enter(SCOPE_PREFIX + path)))
        handles.append(sub.register_forward_hook(leave, always_call=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()

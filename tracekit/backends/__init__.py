"""Backend registry: mode name -> how to turn an eager module into something to time.

Each backend module registers its modes with :func:`register` (from
:mod:`tracekit.backends.registry`) at import; this package imports them, in the
order ``tracekit backends`` lists them.
"""

from __future__ import annotations

from tracekit.backends.registry import (BACKENDS, Backend, Prepared, UnknownMode, get, listing, needs_cuda,
                                        register, why_not)

# Register the modes; this order is the order `tracekit backends` lists them in.
from tracekit.backends import eager, torch_compile  # noqa: F401,I001
from tracekit.backends import cudagraphs, jit, onnx, tensorrt, fp8, transformer_engine, surgical  # noqa: F401,I001
from tracekit.backends import torchao_fp8  # noqa: F401,I001

__all__ = ["BACKENDS", "Backend", "Prepared", "UnknownMode", "get", "listing", "needs_cuda", "register", "why_not"]

"""Backend registry: mode name -> how to turn an eager module into something to time.

Each backend module registers its modes with :func:`register` (from
:mod:`tracekit.backends.backend`) at import; this package imports them, in the
order ``tracekit backends`` lists them.
"""

from __future__ import annotations

# Register the modes; this order is the order `tracekit backends` lists them in.
from tracekit.backends import (  # noqa: F401,I001  # noqa: F401,I001
                                        cudagraphs,
                                        eager,
                                        fp8,
                                        jit,
                                        onnx,
                                        surgical,
                                        tensorrt,
                                        torch_compile,
                                        torchao_fp8,  # noqa: F401,I001
                                        transformer_engine,
)
from tracekit.backends.backend import (
                                        BACKENDS,
                                        Backend,
                                        Prepared,
                                        UnknownMode,
                                        get,
                                        listing,
                                        needs_cuda,
                                        register,
                                        why_not,
)

__all__ = ["BACKENDS", "Backend", "Prepared", "UnknownMode", "get", "listing", "needs_cuda", "register", "why_not"]

"""One matrix multiply, to measure achieved FLOP/s: ``gemm{M}x{N}x{K}``.

``torch.mm(a, b)`` with ``a`` of M x K and ``b`` of K x N: 2*M*N*K floating-point
operations (one multiply and one add per term). Batch multiplies M (default 1).
Distinct from ``matmul`` workloads elsewhere: this is a bare cuBLAS GEMM.
"""

from __future__ import annotations

import torch
from torch import nn

from tracekit.models import register


class MM(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)


def flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of an M x K by K x N matrix product: 2*M*N*K."""
    return 2 * m * n * k


@register("gemm", r"gemm(\d+)x(\d+)x(\d+)", "gemm8192x8192x8192", default_batch=1,
          description="torch.mm of (M x K) by (K x N): gemm{M}x{N}x{K}")
def build_gemm(match, batch: int):
    m, n, k = (int(g) for g in match.groups())
    if min(m, n, k) < 1:
        raise ValueError(f"{match.group(0)}: M, N and K must be at least 1")
    return MM(), (torch.randn(batch * m, k), torch.randn(k, n))

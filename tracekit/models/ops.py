"""Single operations, for measuring achieved TFLOP/s and GB/s against the device's peak.

* ``matmul{N}``: batch x (N x N) @ (N x N). FLOP 2N^3 a matrix; bytes 3N^2 elements.
* ``softmax{N}``: softmax over rows of N elements, batch rows (default 4096).
  Bytes: one read and one write of the input.
* ``layernorm{N}``: LayerNorm over width N, batch rows (default 8192).
  Bytes: one read and one write of the input, plus weight and bias.
* ``sdpa{S}``: scaled-dot-product attention, batch 8 x 16 heads x S x 64.
  FLOP 4 B H S^2 D (QK^T and PV, non-causal); bytes: read q, k, v, write o.
* ``mul{M}``: an M MiB tensor times a scalar (``mul1024`` is the 1 GiB multiply).
  Bytes: one read and one write.

The FLOP and byte counts are the minimum one call needs (each input read once,
each output written once), the usual basis of achieved throughput.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from tracekit.models import register

SDPA_HEADS, SDPA_HEAD_DIM = 16, 64


class MatMul(nn.Module):
    def forward(self, a, b):
        return a @ b


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class SDPA(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


class Scale(nn.Module):
    def forward(self, x):
        return x * 1.5


def _elements(match) -> int:
    """Elements of an M MiB fp32 tensor (mul{M})."""
    return int(match.group(1)) * 2**20 // 4


@register("matmul", r"matmul(\d+)", "matmul4096", default_batch=1,
          description="matmul{N}: batch x (N x N) @ (N x N)",
          cost=lambda m, b, e: {"flop": 2 * b * int(m[1]) ** 3, "bytes": 3 * b * int(m[1]) ** 2 * e})
def build_matmul(match, batch: int):
    n = int(match.group(1))
    shape = (batch, n, n) if batch > 1 else (n, n)
    return MatMul(), (torch.randn(shape), torch.randn(shape))


@register("softmax", r"softmax(\d+)", "softmax4096", default_batch=4096,
          description="softmax{N}: softmax over batch rows of N elements",
          cost=lambda m, b, e: {"flop": 5 * b * int(m[1]), "bytes": 2 * b * int(m[1]) * e})
def build_softmax(match, batch: int):
    return Softmax(), (torch.randn(batch, int(match.group(1))),)


@register("layernorm", r"layernorm(\d+)", "layernorm1024", default_batch=8192,
          description="layernorm{N}: LayerNorm over width N, batch rows",
          cost=lambda m, b, e: {"flop": 8 * b * int(m[1]), "bytes": (2 * b + 2) * int(m[1]) * e})
def build_layernorm(match, batch: int):
    n = int(match.group(1))
    return nn.LayerNorm(n), (torch.randn(batch, n),)


@register("sdpa", r"sdpa(\d+)", "sdpa1024", default_batch=8,
          description=f"sdpa{{S}}: scaled_dot_product_attention, batch x {SDPA_HEADS} heads x S x {SDPA_HEAD_DIM}",
          cost=lambda m, b, e: {"flop": 4 * b * SDPA_HEADS * int(m[1]) ** 2 * SDPA_HEAD_DIM,
                                "bytes": 4 * b * SDPA_HEADS * int(m[1]) * SDPA_HEAD_DIM * e})
def build_sdpa(match, batch: int):
    s = int(match.group(1))
    return SDPA(), tuple(torch.randn(batch, SDPA_HEADS, s, SDPA_HEAD_DIM) for _ in range(3))


@register("mul", r"mul(\d+)", "mul1024", default_batch=1,
          description="mul{M}: an M MiB tensor times a scalar (mul1024: 1 GiB)",
          cost=lambda m, b, e: {"flop": b * _elements(m), "bytes": 2 * b * _elements(m) * e})
def build_mul(match, batch: int):
    # M MiB of fp32 elements (in another dtype the element count stays)
    return Scale(), (torch.randn(batch, _elements(match)),)

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
* ``softmax{N}-triton``: ``softmax{N}`` by a hand-written Triton kernel, one program
  per row holding the row in registers (the kernel of Triton's fused-softmax tutorial,
  https://triton-lang.org/main/getting-started/tutorials/02-fused-softmax.html), the
  contender beside eager and compiled softmax. Needs triton and a CUDA GPU, or
  ``TRITON_INTERPRET=1`` (Triton's CPU interpreter); otherwise the run is skipped with why.

The FLOP and byte counts are the minimum one call needs (each input read once,
each output written once), the usual basis of achieved throughput.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import torch
from torch import nn
from torch.nn import functional as F

from tracekit.models.family import Unavailable, register

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


@functools.cache
def _triton_softmax_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
        # One program per row; the row (padded to a power of two) stays in registers.
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        y = num / tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)

    return triton, softmax_kernel


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor by the hand-written Triton kernel.

    Raises:
        Unavailable: triton is not installed, or ``x`` is not on a CUDA GPU and
            Triton's interpreter (``TRITON_INTERPRET=1``) is off.
    """
    if importlib.util.find_spec("triton") is None:
        raise Unavailable("softmax-triton needs triton (pip install triton; CUDA builds of torch ship it)")
    if not x.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise Unavailable(f"softmax-triton needs a CUDA GPU (its input is on {x.device}); "
                          "TRITON_INTERPRET=1 runs it in Triton's CPU interpreter")
    triton, kernel = _triton_softmax_kernel()
    rows, n = x.shape
    block = triton.next_power_of_2(n)
    # More warps for longer rows keep the registers per thread bounded (block / threads values each).
    warps = 4 if block < 2048 else 8 if block < 4096 else 16 if block < 32768 else 32
    out = torch.empty_like(x)
    kernel[(rows,)](out, x, x.stride(0), out.stride(0), n, BLOCK=block, num_warps=warps)
    return out


class TritonSoftmax(nn.Module):
    def forward(self, x):
        return triton_softmax(x)


@register("softmax-triton", r"softmax(\d+)-triton", "softmax4096-triton", default_batch=4096,
          description="softmax{N}-triton: softmax{N} by a hand-written Triton kernel (needs triton and CUDA)",
          cost=lambda m, b, e: {"flop": 5 * b * int(m[1]), "bytes": 2 * b * int(m[1]) * e, "op": f"softmax{m[1]}"})
def build_softmax_triton(match, batch: int):
    return TritonSoftmax(), (torch.randn(batch, int(match.group(1))),)

"""Memory-streaming workloads: one elementwise op over large tensors, to measure DRAM bandwidth.

``mul{N}``: ``a * b`` over two tensors of N MiB each (at fp32; bf16/fp16 halve
the bytes) -> one elementwise kernel reading 2N MiB and writing N MiB.
``copy{N}``: ``a.clone()`` of one N MiB tensor -> in eager mode a device-to-device
copy (a ``Memcpy DtoD`` GPU op, not a kernel), N MiB read and N MiB written.
Batch multiplies the size (default 1).
"""

from __future__ import annotations

import torch
from torch import nn

from tracekit.models import register

MIB_FP32 = 2**20 // 4  # fp32 elements in one MiB


class Mul(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * b


class Copy(nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a.clone()


def _elements(match, batch: int) -> int:
    mib = int(match.group(1))
    if mib < 1:
        raise ValueError(f"{match.group(0)}: the size in MiB must be at least 1")
    return batch * mib * MIB_FP32


@register("mul", r"mul(\d+)", "mul1024", default_batch=1,
          description="elementwise a*b over two tensors of N MiB (fp32) each: mul{N}")
def build_mul(match, batch: int):
    n = _elements(match, batch)
    return Mul(), (torch.randn(n), torch.randn(n))


@register("copy", r"copy(\d+)", "copy1024", default_batch=1,
          description="clone of one N MiB (fp32) tensor, a device-to-device copy: copy{N}")
def build_copy(match, batch: int):
    return Copy(), (torch.randn(_elements(match, batch)),)

"""A workload with a Python loop (issue 39's predict suite): a residual MLP block applied
``steps`` times in a ``for`` loop, the same weights each time, as a user's hand-written
refinement loop would (a diffusion sampler's, an unrolled solver's). Eager launches every
iteration's kernels from Python; a CUDA graph captures the unrolled loop as one replay.

    tracekit trace --model workloads/loop_blocks.py:loop_blocks --mode cudagraphs --batch 4
"""

import torch
from torch import nn

from tracekit import workload


class LoopBlocks(nn.Module):
    """x <- x + MLP(LayerNorm(x)), ``steps`` times (width 512, 4x hidden)."""

    def __init__(self, width: int = 512, steps: int = 24):
        super().__init__()
        self.steps = steps
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.steps):
            x = x + self.mlp(self.norm(x))
        return x


@workload(batch=4, description="a residual MLP block applied 24 times in a Python loop (width 512)")
def loop_blocks(batch: int, dtype: torch.dtype, device: str):
    module = LoopBlocks().to(device=device, dtype=dtype)
    return module, (torch.randn(batch, 64, 512, device=device, dtype=dtype),)

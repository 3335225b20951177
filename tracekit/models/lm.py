"""Language-model workloads: attention alone, and GPT-2-style transformer LMs.

* ``attn{d}x{S}``: one attention layer written out (q, k, v projections of
  width d, softmax(QK^T / sqrt(d)) V with the S x S scores materialized, output
  projection), batch 8: the quadratic-memory baseline whose peak memory and
  out-of-memory points a compiler's attention fusion can move.
* ``lm-{size}-{ctx}``: decoder-only transformer LMs at GPT-2's widths and
  depths (Radford et al., 2019) plus 2.7B: small 768x12, medium 1024x24, large
  1280x36, xl 1600x48, 2.7b 2560x32, heads = width/64 (2.7b: 32 of 80), vocab 50257,
  context ctx, batch 4, pre-norm blocks, causal SDPA, tied LM head. ``tiny``
  (128x2) is for quick CPU runs. Random weights: no downloads.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from tracekit.models.family import register

VOCAB = 50257
SIZES = {"tiny": (128, 2), "small": (768, 12), "medium": (1024, 24), "large": (1280, 36), "xl": (1600, 48),
         "2.7b": (2560, 32)}


class Attention(nn.Module):
    """Single-head attention with the score matrix materialized (no fused kernel)."""

    def __init__(self, d: int):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1]), dim=-1)
        return self.o(scores @ v)


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Input (batch, ctx) token ids; output (batch, ctx, vocab) logits."""

    def __init__(self, width: int, depth: int, ctx: int):
        super().__init__()
        heads = 32 if width == 2560 else width // 64
        self.tok, self.pos = nn.Embedding(VOCAB, width), nn.Embedding(ctx, width)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(depth)])
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, VOCAB, bias=False)
        self.head.weight = self.tok.weight  # tied, as in GPT-2

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        return self.head(self.ln(self.blocks(x)))


@register("attn", r"attn(\d+)x(\d+)", "attn64x1024", default_batch=8,
          description="attn{d}x{S}: one attention layer, width d, sequence S, scores materialized")
def build_attn(match, batch: int):
    d, s = int(match.group(1)), int(match.group(2))
    return Attention(d), (torch.randn(batch, s, d),)


@register("lm", r"lm-(tiny|small|medium|large|xl|2\.7b)-(\d+)", "lm-small-1024", default_batch=4,
          description="lm-{size}-{ctx}: GPT-2-style LM (tiny/small/medium/large/xl/2.7b), context ctx")
def build_lm(match, batch: int):
    width, depth = SIZES[match.group(1)]
    ctx = int(match.group(2))
    return GPT(width, depth, ctx), (torch.randint(0, VOCAB, (batch, ctx)),)

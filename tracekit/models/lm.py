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

In the decode phase (issue 41) ``lm-{size}-{ctx}`` decodes after a prompt of ctx tokens over a
static KV cache of its own (:class:`LMDecodeStep`): keys and values of each block written in place
at the step's positions, attention over the whole cache masked to the positions written; the
position table then holds the prompt and the decode steps (random, as the rest).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from tracekit.models.family import Decoder, register
from tracekit.models.kv_cache import DecodeStep

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

    def forward(self, x: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None = None,
                position: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` (batch, t, width); with ``cache`` (keys, values: (batch, heads, cache tokens, width /
        heads)), this block's keys and values are written at ``position`` (t,) and attention reads the
        whole cache under ``mask`` (t, cache tokens; True where a query may attend)."""
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        if cache is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            keys, values = cache
            keys.index_copy_(2, position, k)
            values.index_copy_(2, position, v)
            a = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
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

    def decode(self, ids: torch.Tensor, position: torch.Tensor, caches: list, slots: torch.Tensor) -> torch.Tensor:
        """``ids`` (batch, t) at positions ``position`` (t,) through the blocks over their ``caches``
        ((keys, values) each); ``slots``: arange(cache tokens). Returns the logits (batch, vocab) after
        the last of the t tokens."""
        x = self.tok(ids) + self.pos(position)
        mask = slots[None, :] <= position[:, None]
        for block, cache in zip(self.blocks, caches):
            x = block(x, cache, position, mask)
        return self.head(self.ln(x[:, -1]))


class LMDecodeStep(DecodeStep):
    """A :class:`GPT`'s decode step over its own static KV cache: per block, keys and values
    (batch, heads, cache_tokens, width / heads) in the model's dtype, allocated by :meth:`allocate`
    (buffers, marked as static addresses for torch.compile's CUDA graphs, as transformers marks its
    own), and ``slots`` (arange of the cache's positions, for the mask)."""

    kind = "tracekit's (lm-*)"

    def __init__(self, model: GPT, batch: int, prompt_tokens: int, cache_tokens: int):
        super().__init__(model, batch, prompt_tokens, cache_tokens, VOCAB, takes_position=True)
        self.caches: list[tuple[torch.Tensor, torch.Tensor]] = []

    def _shape(self) -> tuple[int, int, int, int]:
        block = self.model.blocks[0]
        width = block.ln1.normalized_shape[0]
        return self.batch, block.heads, self.cache_tokens, width // block.heads

    def planned_bytes(self) -> int:
        b, h, n, d = self._shape()
        return 2 * len(self.model.blocks) * b * h * n * d * self.model.head.weight.element_size()

    def allocated_bytes(self) -> int | None:
        return sum(t.numel() * t.element_size() for kv in self.caches for t in kv) if self.caches else None

    def allocate(self) -> None:
        if self.caches:
            return
        w = self.model.head.weight
        self.register_buffer("slots", torch.arange(self.cache_tokens, device=w.device), persistent=False)
        for i in range(len(self.model.blocks)):
            for name in (f"keys{i}", f"values{i}"):
                self.register_buffer(name, torch.zeros(self._shape(), dtype=w.dtype, device=w.device),
                                     persistent=False)
                torch._dynamo.mark_static_address(getattr(self, name))
        self.caches = [(getattr(self, f"keys{i}"), getattr(self, f"values{i}")) for i in range(len(self.model.blocks))]

    def logits(self, ids, position):
        return self.model.decode(ids, position, self.caches, self.slots)

    def prompt_logits(self, prompt):
        self.allocate()
        return self.model.decode(prompt, torch.arange(self.prompt_tokens, device=prompt.device), self.caches,
                                 self.slots)


@register("attn", r"attn(\d+)x(\d+)", "attn64x1024", default_batch=8,
          description="attn{d}x{S}: one attention layer, width d, sequence S, scores materialized")
def build_attn(match, batch: int):
    d, s = int(match.group(1)), int(match.group(2))
    return Attention(d), (torch.randn(batch, s, d),)


def _decoder(match, batch: int, prompt_tokens: int, cache_tokens: int) -> LMDecodeStep:
    width, depth = SIZES[match.group(1)]
    return LMDecodeStep(GPT(width, depth, cache_tokens), batch, prompt_tokens, cache_tokens)


@register("lm", r"lm-(tiny|small|medium|large|xl|2\.7b)-(\d+)", "lm-small-1024", default_batch=4,
          description="lm-{size}-{ctx}: GPT-2-style LM (tiny/small/medium/large/xl/2.7b), context ctx "
          "(decode: a prompt of ctx tokens)",
          decoder=Decoder(_decoder, prompt=lambda match, seq: int(match.group(2)), positions=lambda match: None))
def build_lm(match, batch: int):
    width, depth = SIZES[match.group(1)]
    ctx = int(match.group(2))
    return GPT(width, depth, ctx), (torch.randint(0, VOCAB, (batch, ctx)),)

"""Rotary position embedding (RoPE; Su et al., 2021, arXiv:2104.09864) alone, and a
decoder-style transformer built on it, for the surgical-compile study.

* ``rope{S}``: RoPE applied to q and k of shape (batch, 16 heads, S, 128).
* ``ropetx{L}x{H}x{S}``: L pre-norm layers of width H, H/128 heads, FFN 2H,
  sequence S: LayerNorm -> qkv Linear -> ``qkv_reshape`` (split into heads) ->
  ``rope`` -> causal scaled-dot-product attention -> out Linear; LayerNorm ->
  MLP (GELU). ``ropetx4x2048x2048`` is the study's 4-layer model (16 heads,
  FFN 4096). The RoPE and QKV-reshape steps are submodules named ``rope`` and
  ``qkv_reshape`` so surgical compile can pick them by name.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from tracekit.models.family import register

HEAD_DIM = 128
ROPE_HEADS = 16
BASE = 10000.0  # RoPE frequency base, as in the paper and LLaMA


class RotaryEmbedding(nn.Module):
    """Rotate (..., S, D) tensors by position, half-split convention (GPT-NeoX, LLaMA)."""

    def __init__(self, dim: int, seq: int):
        super().__init__()
        inv_freq = 1.0 / BASE ** (torch.arange(0, dim, 2).float() / dim)
        angles = torch.outer(torch.arange(seq).float(), inv_freq)
        self.register_buffer("cos", torch.cat([angles.cos()] * 2, dim=-1), persistent=False)
        self.register_buffer("sin", torch.cat([angles.sin()] * 2, dim=-1), persistent=False)

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=-1)
        return torch.cat([-b, a], dim=-1)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.cos.to(q.dtype), self.sin.to(q.dtype)
        return q * cos + self._rotate_half(q) * sin, k * cos + self._rotate_half(k) * sin


class QKVReshape(nn.Module):
    """(batch, S, 3H) -> q, k, v of shape (batch, heads, S, H/heads)."""

    def __init__(self, heads: int):
        super().__init__()
        self.heads = heads

    def forward(self, qkv: torch.Tensor):
        b, s, three_h = qkv.shape
        return qkv.view(b, s, 3, self.heads, three_h // (3 * self.heads)).permute(2, 0, 3, 1, 4).unbind(0)


class Layer(nn.Module):
    def __init__(self, hidden: int, seq: int):
        super().__init__()
        heads = hidden // HEAD_DIM
        self.norm1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.qkv_reshape = QKVReshape(heads)
        self.rope = RotaryEmbedding(HEAD_DIM, seq)
        self.out = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(), nn.Linear(2 * hidden, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv_reshape(self.qkv(self.norm1(x)))
        q, k = self.rope(q, k)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(x.shape))
        return x + self.mlp(self.norm2(x))


class RopeTransformer(nn.Module):
    """Input (batch, S, H) hidden states; output the same shape."""

    def __init__(self, layers: int, hidden: int, seq: int):
        super().__init__()
        self.layers = nn.Sequential(*[Layer(hidden, seq) for _ in range(layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


@register("rope", r"rope(\d+)", "rope2048", default_batch=8,
          description=f"RoPE alone on q, k: batch x {ROPE_HEADS} heads x S x {HEAD_DIM} (rope{{S}})",
          compile_targets="")
def build_rope(match, batch: int):
    seq = int(match.group(1))
    q, k = (torch.randn(batch, ROPE_HEADS, seq, HEAD_DIM) for _ in range(2))
    return RotaryEmbedding(HEAD_DIM, seq), (q, k)


@register("ropetx", r"ropetx(\d+)x(\d+)x(\d+)", "ropetx4x2048x2048", default_batch=8,
          description="RoPE transformer ropetx{layers}x{hidden}x{seq}: hidden/128 heads, FFN 2x hidden",
          compile_targets="*.rope,*.qkv_reshape",
          check=lambda m: None if int(m[2]) % HEAD_DIM == 0 else
          f"the hidden size {m[2]} is not a multiple of the head size {HEAD_DIM}")
def build_ropetx(match, batch: int):
    layers, hidden, seq = (int(g) for g in match.groups())
    return RopeTransformer(layers, hidden, seq), (torch.randn(batch, seq, hidden),)

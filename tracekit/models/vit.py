"""Vision Transformer (Dosovitskiy et al., 2021, arXiv:2010.11929) in pure torch.

``vit{patch}x{depth}x{dim}``: patch size, encoder depth, width; heads = dim/64,
MLP ratio 4, 224x224 RGB images, 1000 classes, a class token, pre-norm blocks,
as in timm's VisionTransformer.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from tracekit.models.family import register

IMAGE = 224
CLASSES = 1000


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """Input (batch, 3, 224, 224) images; output (batch, 1000) logits."""

    def __init__(self, patch: int, depth: int, dim: int):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, (IMAGE // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, dim // 64) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, CLASSES)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def _check(match) -> str | None:
    patch, _, dim = (int(g) for g in match.groups())
    if dim % 64:
        return f"the width (dim) {dim} is not a multiple of 64 (one head per 64)"
    if IMAGE % patch:
        return f"the patch size {patch} does not divide the {IMAGE}-pixel image"
    return None


@register("vit", r"vit(\d+)x(\d+)x(\d+)", "vit16x6x384", default_batch=8,
          description="ViT vit{patch}x{depth}x{dim}: heads=dim/64, 224x224 images, 1000 classes",
          compile_targets="blocks.*.attn", check=_check)
def build_vit(match, batch: int):
    patch, depth, dim = (int(g) for g in match.groups())
    return VisionTransformer(patch, depth, dim), (torch.randn(batch, 3, IMAGE, IMAGE),)

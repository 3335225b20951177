"""A small transformer encoder: batch x 128 tokens x 256 wide, 2 layers, 4 heads, FFN 1024."""

from __future__ import annotations

import torch
from torch import nn

from tracekit.models.family import register

TOKENS, WIDTH, LAYERS, HEADS = 128, 256, 2, 4


@register("transformer", r"transformer", "transformer", default_batch=2,
          description=f"Transformer encoder: batch x {TOKENS} tokens x {WIDTH}, {LAYERS} layers, {HEADS} heads",
          compile_targets="layers.0")
def build_transformer(match, batch: int):
    layer = nn.TransformerEncoderLayer(WIDTH, HEADS, dim_feedforward=4 * WIDTH, batch_first=True)
    module = nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
    return module, (torch.randn(batch, TOKENS, WIDTH),)

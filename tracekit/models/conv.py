"""A small CNN: batch x 3x128x128 images, two conv blocks (conv3x3-BN-ReLU-maxpool), a 1x1 conv head."""

from __future__ import annotations

import torch
from torch import nn

from tracekit.models.family import register

SIZE, CLASSES = 128, 10


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2))


@register("conv", r"conv", "conv", default_batch=4,
          description=f"CNN: batch x 3x{SIZE}x{SIZE}, two conv blocks, 1x1 head, {CLASSES} classes",
          compile_targets="0")
def build_conv(match, batch: int):
    module = nn.Sequential(_block(3, 32), _block(32, 64), nn.Conv2d(64, CLASSES, 1),
                           nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return module, (torch.randn(batch, 3, SIZE, SIZE),)

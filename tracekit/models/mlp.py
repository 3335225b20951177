"""A small multilayer perceptron: batch x 256 features, two hidden layers of 512, 10 outputs."""

from __future__ import annotations

import torch
from torch import nn

from tracekit.models.family import register

FEATURES, HIDDEN, OUTPUTS = 256, 512, 10


@register("mlp", r"mlp", "mlp", default_batch=4,
          description=f"MLP: batch x {FEATURES} features, hidden {HIDDEN}, {OUTPUTS} outputs",
          compile_targets="2,3")
def build_mlp(match, batch: int):
    module = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                           nn.Linear(HIDDEN, OUTPUTS))
    return module, (torch.randn(batch, FEATURES),)

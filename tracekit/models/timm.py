"""timm image models with random weights: ``timm:<name>``.

``timm.create_model(name, pretrained=False)``: the architecture, no weights fetched.
Input: random images (batch, *input_size) with the model's own input size
(``pretrained_cfg["input_size"]``, 3x224x224 for most). Classifiers have no loss of
their own: a training phase uses the runner's synthetic loss.
"""

from __future__ import annotations

import torch

from tracekit.models.family import Family, UnknownModel, missing_library, register_source

DEFAULT_BATCH = 8
INSTALL = "pip install timm (it needs torchvision)"


def resolve(name: str) -> Family:
    """The Family of ``timm:<name>``.

    Raises:
        UnknownModel: timm has no model ``name`` (the message lists close names).
    """
    common = dict(pattern=None, example=f"timm:{name}", default_batch=DEFAULT_BATCH)
    source = {"kind": "library", "library": "timm", "name": name}
    if reason := missing_library("timm", INSTALL):
        return Family(builder=None, description=f"timm {name}", source=source, missing=f"timm:{name} {reason}",
                      **common)
    import timm

    if not timm.is_model(name):
        close = timm.list_models(f"*{name}*")[:8]
        raise UnknownModel(f"timm:{name}: timm {timm.__version__} has no model {name!r}"
                           + (f" (close: {', '.join(close)})" if close else ""))

    def builder(match, batch: int):
        model = timm.create_model(name, pretrained=False)
        size = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
        return model, (torch.randn(batch, *size),)

    return Family(builder=builder, description=f"timm {name}, random weights",
                  source={**source, "version": timm.__version__}, **common)


register_source("timm", resolve, "resnet50",
                "timm:<name>: timm.create_model(name, pretrained=False)")

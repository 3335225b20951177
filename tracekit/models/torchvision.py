"""torchvision classification models with random weights: ``torchvision:<name>``.

``torchvision.models.get_model(name, weights=None)``: the architecture, no weights
fetched; names are those of ``torchvision.models.list_models(module=torchvision.models)``
(the classification models). Input: random images (batch, 3, crop, crop) with the
crop size of the model's published weights' transforms (224 for most, 299 for
inception_v3; built without downloading anything), else 224. Classifiers have no
loss of their own: a training phase uses the runner's synthetic loss.
"""

from __future__ import annotations

import torch

from tracekit.models.family import Family, UnknownModel, missing_library, register_source

DEFAULT_BATCH = 8
INSTALL = "pip install torchvision (the build matching your torch: see https://pytorch.org/get-started/locally/)"


def _crop(models, name: str) -> int:
    try:
        return int(models.get_model_weights(name).DEFAULT.transforms().crop_size[0])
    except (ValueError, AttributeError, KeyError, IndexError, TypeError):
        return 224


def resolve(name: str) -> Family:
    """The Family of ``torchvision:<name>``.

    Raises:
        UnknownModel: not a torchvision classification model (the message lists close names).
    """
    common = dict(pattern=None, example=f"torchvision:{name}", default_batch=DEFAULT_BATCH)
    source = {"kind": "library", "library": "torchvision", "name": name}
    if reason := missing_library("torchvision", INSTALL):
        return Family(builder=None, description=f"torchvision {name}", source=source,
                      missing=f"torchvision:{name} {reason}", **common)
    import torchvision
    from torchvision import models

    names = models.list_models(module=models)
    if name not in names:
        close = [n for n in names if name in n][:8]
        raise UnknownModel(f"torchvision:{name}: not a torchvision classification model"
                           + (f" (close: {', '.join(close)})" if close else ""))

    def builder(match, batch: int):
        size = _crop(models, name)
        return models.get_model(name, weights=None), (torch.randn(batch, 3, size, size),)

    return Family(builder=builder, description=f"torchvision {name}, random weights",
                  source={**source, "version": torchvision.__version__}, **common)


register_source("torchvision", resolve, "resnet50",
                "torchvision:<name>: a classification model, get_model(name, weights=None)")

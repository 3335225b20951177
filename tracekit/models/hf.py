"""Hugging Face transformers architectures with random weights: ``hf:<type>[?key=value&...]``.

``<type>`` is a transformers model type (a key of its config mapping: ``gpt2``,
``bert``, ``llama``, ``t5``, ``vit``...). The model is built from the type's
config class with ``from_config``: the published architecture with random
(seeded) weights, nothing fetched from a hub. The config's defaults are the
published base size (``hf:gpt2`` is GPT-2 small, 124M parameters; ``hf:bert``
BERT-base; ``hf:llama`` LLaMA-7B); keys override them:

``layers``, ``hidden``, ``heads``, ``kv_heads``, ``ffn`` (the MLP's inner width),
``vocab``, ``positions`` (max position embeddings): integers, set through
transformers' standard attribute names (``num_hidden_layers``...), which each
config maps to its own (GPT-2's ``n_layer``). ``head`` picks the model class:
``causal-lm``, ``masked-lm``, ``seq2seq-lm``, ``image-classification`` or ``base``;
by default an encoder-decoder gets ``seq2seq-lm``, else the first of masked-lm,
causal-lm, image-classification that the type has (BERT a masked LM, GPT-2 and
Llama a causal LM, ViT a classifier), else the base model.

Inputs: token ids (batch, seq), seq 128 unless ``--seq`` (an encoder-decoder gets
the same ids as decoder inputs); an image model pixel values (batch, channels,
image_size, image_size). In a training phase the inputs add labels (the ids, or
random classes), so the model computes its own loss, which the backward uses.
The KV cache is off (``use_cache=False``): an iteration is one full forward. In the decode phase
(a causal-lm head only) the model decodes after a prompt of ``--seq`` tokens over transformers'
``StaticCache`` (:class:`tracekit.models.kv_cache.TransformersDecodeStep`); prompt and decode steps
must fit in the config's ``max_position_embeddings`` (``positions=``). A ``sliding_window`` no shorter
than that cache is dropped (``None``: every layer full attention, the same function while the
window holds the whole cache), so the cache keeps its count in a tensor that compiled and captured
steps follow (transformers' sliding static layers count in a Python int).
"""

from __future__ import annotations

import copy
import difflib
from urllib.parse import parse_qsl

import torch
from torch import nn

from tracekit.capture.phases import TRAINING
from tracekit.models.family import Decoder, Family, UnknownModel, missing_library, register_source

DEFAULT_BATCH = 8
DEFAULT_SEQ = 128
INSTALL = "pip install 'transformers>=4.40' (or pip install -e '.[models]')"
SIZES = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
         "kv_heads": "num_key_value_heads", "ffn": ("intermediate_size", "n_inner", "d_ff", "ffn_dim"),
         "vocab": "vocab_size", "positions": "max_position_embeddings"}
HEADS = {"causal-lm": ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "AutoModelForCausalLM"),
         "masked-lm": ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "AutoModelForMaskedLM"),
         "seq2seq-lm": ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "AutoModelForSeq2SeqLM"),
         "image-classification": ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "AutoModelForImageClassification"),
         "base": ("MODEL_MAPPING_NAMES", "AutoModel")}


class Keywords(nn.Module):
    """Calls a transformers model with keyword inputs from positional tensors (the runner
    calls ``module(*inputs)``): ``forward(*tensors) = model(**dict(zip(names, tensors)))``."""

    def __init__(self, model: nn.Module, names: tuple[str, ...]):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *tensors):
        return self.model(**dict(zip(self.names, tensors)))


def _parse(name: str) -> tuple[str, dict[str, str]]:
    kind, _, query = name.partition("?")
    try:
        options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=True)) if query else {}
    except ValueError:
        raise ValueError(f"hf:{name}: options are key=value pairs joined by & (hf:llama?layers=16&hidden=2048)") \
            from None
    if unknown := sorted(set(options) - set(SIZES) - {"head"}):
        raise ValueError(f"hf:{name}: unknown option {', '.join(unknown)}; valid: {', '.join([*SIZES, 'head'])}")
    for key, value in options.items():
        if key != "head" and not (value.isdigit() and int(value) > 0):
            raise ValueError(f"hf:{name}: {key} must be a positive integer, got {value!r}")
    if options.get("head", next(iter(HEADS))) not in HEADS:
        raise ValueError(f"hf:{name}: head must be one of {', '.join(HEADS)}")
    return kind, options


def _config(name: str, kind: str, options: dict[str, str]):
    """The config of ``kind`` with ``options`` applied, and the chosen head."""
    from transformers import AutoConfig
    from transformers.models.auto import configuration_auto, modeling_auto

    if kind not in configuration_auto.CONFIG_MAPPING_NAMES:
        close = difflib.get_close_matches(kind, configuration_auto.CONFIG_MAPPING_NAMES, n=5)
        raise UnknownModel(f"hf:{kind}: not a transformers model type" + (f" (close: {', '.join(close)})" if close
                                                                          else ""))
    default = AutoConfig.for_model(kind)
    given = {}  # the sizes under the config's own argument names (GPT-2: n_layer), passed to its __init__
    for key, value in options.items():
        if key == "head":
            continue
        names = SIZES[key] if isinstance(SIZES[key], tuple) else (SIZES[key],)
        attr = next((a for a in names if hasattr(default, a)), None)
        if attr is None:
            raise ValueError(f"hf:{name}: {type(default).__name__} has no {' or '.join(names)} (option {key})")
        given[default.attribute_map.get(attr, attr)] = int(value)
    # Built with the sizes rather than set afterwards, so derived sizes follow (Llama's head_dim = hidden / heads).
    config = AutoConfig.for_model(kind, **given, **({"use_cache": False} if hasattr(default, "use_cache") else {}))
    has = {h: kind in getattr(modeling_auto, table) for h, (table, _) in HEADS.items()}
    default = ("seq2seq-lm" if getattr(config, "is_encoder_decoder", False) and has["seq2seq-lm"] else
               next((h for h in ("masked-lm", "causal-lm", "image-classification") if has[h]), "base"))
    head = options.get("head", default)
    if not has[head]:
        raise ValueError(f"hf:{name}: transformers has no {head} model for {kind}; it has {[h for h in has if has[h]]}")
    cls = getattr(modeling_auto, HEADS[head][0])[kind]
    return config, head, cls if isinstance(cls, str) else cls[0]  # transformers 4.x lists some as tuples


def resolve(name: str) -> Family:
    """The Family of ``hf:<name>`` (see the module docstring).

    Raises:
        UnknownModel: not a transformers model type.
        ValueError: an unknown option, a non-integer size, or a size or head the type lacks.
    """
    kind, options = _parse(name)
    common = dict(pattern=None, example=f"hf:{name}", default_batch=DEFAULT_BATCH, options=("seq", "phase"))
    if reason := missing_library("transformers", INSTALL):
        return Family(builder=None, description=f"transformers {kind}", default_seq=DEFAULT_SEQ,
                      source={"kind": "library", "library": "transformers", "type": kind},
                      missing=f"hf:{kind} {reason}", **common)
    import transformers

    config, head, cls = _config(name, kind, options)
    image = head == "image-classification" or (head == "base" and hasattr(config, "image_size")
                                               and not hasattr(config, "vocab_size"))
    attrs = {k: next((a for a in (a if isinstance(a, tuple) else (a,)) if hasattr(config, a)), None)
             for k, a in SIZES.items()}
    sizes = {k: getattr(config, a) for k, a in attrs.items() if a is not None}

    def builder(match, batch: int, seq: int | None, phase: str):
        return _build(config, head, image, batch, seq, phase)

    def decoder(match, batch: int, prompt_tokens: int, cache_tokens: int):
        return _decoder(config, batch, prompt_tokens, cache_tokens)

    limit = getattr(config, "max_position_embeddings", None)
    decoding = (Decoder(decoder, prompt=lambda match, seq: seq, positions=lambda match: limit)
                if head == "causal-lm" else None)
    return Family(builder=builder, description=f"transformers {cls} ({head}), random weights",
                  default_seq=None if image else DEFAULT_SEQ, decoder=decoding,
                  source={"kind": "library", "library": "transformers", "version": transformers.__version__,
                          "type": kind, "class": cls, "head": head, "config": sizes, "options": options}, **common)


def _build(config, head: str, image: bool, batch: int, seq: int | None, phase: str):
    import transformers

    limit = getattr(config, "max_position_embeddings", None)
    if seq is not None and isinstance(limit, int) and seq > limit:
        raise ValueError(f"seq {seq} is over {config.model_type}'s {limit} positions "
                         f"(add positions={seq} to the name: hf:{config.model_type}?positions={seq})")
    model = getattr(transformers, HEADS[head][1]).from_config(copy.deepcopy(config))
    if image:
        size = config.image_size
        names, inputs = ["pixel_values"], [torch.randn(batch, config.num_channels, size, size)]
        labels = torch.randint(0, config.num_labels, (batch,))
    else:
        ids = torch.randint(0, config.vocab_size, (batch, seq))
        names, inputs, labels = ["input_ids"], [ids], ids
        if head == "seq2seq-lm":
            names.append("decoder_input_ids")
            inputs.append(ids)
    if phase in TRAINING and head != "base":
        names.append("labels")
        inputs.append(labels)
    return Keywords(model, tuple(names)), tuple(inputs)


def _decoder(config, batch: int, prompt_tokens: int, cache_tokens: int):
    import transformers

    from tracekit.models.kv_cache import TransformersDecodeStep

    config = copy.deepcopy(config)
    window = getattr(config, "sliding_window", None)
    if isinstance(window, int) and window >= cache_tokens:   # the module docstring says why
        config.sliding_window = None
        if isinstance(getattr(config, "layer_types", None), list):
            config.layer_types = ["full_attention" if t == "sliding_attention" else t for t in config.layer_types]
    model = transformers.AutoModelForCausalLM.from_config(config)
    return TransformersDecodeStep(model, batch, prompt_tokens, cache_tokens)


register_source("hf", resolve, "gpt2",
                "hf:<type>[?layers=N&hidden=N&heads=N&kv_heads=N&ffn=N&vocab=N&positions=N&head=H]: a transformers "
                "model type (gpt2, bert, llama, t5, vit...) from its config class, random weights; token inputs "
                f"of --seq tokens (default {DEFAULT_SEQ})")

"""The model registry's primitives, imported by each model family's module (one file per
family or library, :mod:`tracekit.models`): :class:`Family`, the registries filled at import
(:data:`FAMILIES`, :data:`SOURCES`), :func:`register`, :func:`register_source`, and the errors
a family raises. The package :mod:`tracekit.models` imports the family modules and resolves names."""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass, field
from typing import Callable

import torch

from tracekit.manifest.spec import DTYPES as DTYPE_NAMES

# The torch dtype of each dtype name (tracekit.manifest.spec.DTYPES).
DTYPES = dict(zip(DTYPE_NAMES, (torch.float32, torch.bfloat16, torch.float16), strict=True))
BUILD_OPTIONS = ("dtype", "device", "seq", "phase")


@dataclass(frozen=True)
class Decoder:
    """How a causal LM family runs the decode phase (issue 41).

    build(match, batch, prompt_tokens, cache_tokens) -> a :class:`tracekit.models.kv_cache.DecodeStep`
    in fp32 on torch's default device (:func:`tracekit.models.build_decoder` makes it the run's);
    prompt(match, seq) -> the prompt's tokens (``--seq`` for ``hf:``, the name's context for ``lm-*``);
    positions(match) -> the most tokens the model's positions hold (prompt + decode steps must fit),
    None where the model is sized to fit.
    """

    build: Callable[..., torch.nn.Module]
    prompt: Callable[[re.Match | None, int | None], int]
    positions: Callable[[re.Match | None], int | None]


@dataclass(frozen=True)
class Family:
    """A model family: the names it accepts and how to build one.

    builder(match, batch, **options) -> (module, inputs): ``match`` is the regex
    match of the name (None for library and workload-file families); ``options``
    are the :data:`BUILD_OPTIONS` the family lists in ``options`` (dtype as a
    ``torch.dtype``). A family whose options include ``device`` builds the model
    where it belongs itself; the others are built on the CPU in fp32 and moved.
    """

    pattern: re.Pattern | None
    example: str  # a valid name, shown in error messages and `tracekit models`
    default_batch: int
    builder: Callable[..., tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]
    description: str
    compile_targets: str = ""  # default name patterns for surgical compile
    # cost(match, batch, element_bytes) -> {"flop": ..., "bytes": ...}: the arithmetic and the
    # fewest DRAM bytes one call needs, for achieved TFLOP/s and GB/s (single-op workloads);
    # optionally "op": the model whose op a variant computes (softmax4096-triton: softmax4096).
    cost: Callable[..., dict] | None = None
    default_seq: int | None = None  # the sequence length of token inputs (--seq); None: the family takes none
    options: tuple[str, ...] = ()
    # Where the model comes from, recorded in run.json: kind (built-in, library, file, module, python),
    # and file, module, function, library and version as they apply.
    source: dict = field(default_factory=dict)
    missing: str | None = None  # why it cannot be built here (a library not installed) and how to fix it
    # check(match) -> why the sizes in a name that fits the pattern cannot be built, or None
    check: Callable[[re.Match], str | None] | None = None
    decoder: Decoder | None = None  # a causal LM's decode phase; None: the family runs no decode


FAMILIES: dict[str, Family] = {}
SOURCES: dict[str, Callable[[str], Family]] = {}  # library prefix -> resolve(name after the prefix)
SOURCE_HELP: dict[str, tuple[str, str]] = {}  # library prefix -> (an example name after it, what names it takes)
PROVIDED: dict[str, Family] = {}  # names given a module directly (tracekit.profile), for the runs it makes


class UnknownModel(ValueError):
    """A model name no family accepts, or whose sizes its family cannot build
    (``vit16x6x38``); the message says why and gives valid names."""


class Unavailable(RuntimeError):
    """A workload that cannot run here (a package or a device missing); the message says
    why and how to fix it. Raised by a builder or a forward; the runner records the run
    as "skipped" with that reason."""


def register(key: str, pattern: str, example: str, default_batch: int, description: str,
             compile_targets: str = "", cost: Callable[..., dict] | None = None,
             check: Callable[[re.Match], str | None] | None = None, decoder: Decoder | None = None):
    """Decorator: add ``builder(match, batch) -> (module, inputs)`` to the registry.
    ``check(match)``: why a name that fits ``pattern`` cannot be built (None if it can),
    asked before anything runs or is written; ``decoder``: the family's decode phase (causal LMs)."""
    def wrap(builder):
        FAMILIES[key] = Family(re.compile(pattern), example, default_batch, builder, description, compile_targets,
                               cost, source={"kind": "built-in", "module": builder.__module__}, check=check,
                               decoder=decoder)
        return builder
    return wrap


def register_source(prefix: str, resolve: Callable[[str], Family], example: str, names: str) -> None:
    """Names ``prefix:<rest>`` resolve to ``resolve(rest)``, which raises UnknownModel for a
    name the library does not have, and returns a Family with ``missing`` set when the
    library is not installed (the run is then "skipped" with the install command).
    ``example`` (a name after the prefix) and ``names`` (what it accepts) are for ``tracekit models``."""
    SOURCES[prefix] = resolve
    SOURCE_HELP[prefix] = (example, names)


def missing_library(library: str, install: str) -> str | None:
    """Why ``library`` cannot be used here (not installed, or failing to import, as a
    torchvision built for another torch does), with ``install``; None when it imports."""
    if importlib.util.find_spec(library) is None:
        return f"needs {library}, not installed here: {install}"
    try:
        importlib.import_module(library)
    except Exception as exc:  # noqa: BLE001 - any import failure makes the library unusable
        return f"{library} does not import here ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); {install}"
    return None

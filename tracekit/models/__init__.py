"""Workload registry: model name -> (nn.Module, example inputs).

Three kinds of names, each resolved by :func:`lookup` to a :class:`Family`:

* built-in families in pure torch, one module each, registered with :func:`register`
  at import and matched by a regular expression, so parametrised names such as
  ``vit16x6x384`` need no table of sizes;
* library architectures with random weights, ``<prefix>:<name>``, one module per
  library registered with :func:`register_source`: ``hf:<type>`` (transformers),
  ``timm:<name>``, ``torchvision:<name>``;
* workload files (:mod:`tracekit.models.workloads`): ``path/to/file.py:fn``,
  ``package.module:fn``, or a function's bare name when a file in ``workloads/``
  defines it (built-in names win).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from dataclasses import dataclass, field
from typing import Callable

import torch

from tracekit.spec import DTYPES as DTYPE_NAMES
from tracekit.spec import RunSpec, resolve

# The torch dtype of each dtype name (tracekit.spec.DTYPES).
DTYPES = dict(zip(DTYPE_NAMES, (torch.float32, torch.bfloat16, torch.float16), strict=True))
BUILD_OPTIONS = ("dtype", "device", "seq", "phase")


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
             check: Callable[[re.Match], str | None] | None = None):
    """Decorator: add ``builder(match, batch) -> (module, inputs)`` to the registry.
    ``check(match)``: why a name that fits ``pattern`` cannot be built (None if it can),
    asked before anything runs or is written."""
    def wrap(builder):
        FAMILIES[key] = Family(re.compile(pattern), example, default_batch, builder, description, compile_targets,
                               cost, source={"kind": "built-in", "module": builder.__module__}, check=check)
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


def cost(name: str, batch: int, dtype: str) -> dict | None:
    """{"flop", "bytes"} of one call of a single-op workload, or None (see Family.cost)."""
    family, match = lookup(name)
    if family.cost is None:
        return None
    return family.cost(match, batch or family.default_batch, DTYPES[dtype].itemsize)


def lookup(name: str) -> tuple[Family, re.Match | None]:
    """The family that accepts ``name`` and the regex match of it (None for a library
    or workload-file name).

    Raises:
        UnknownModel: no family accepts ``name``, or a size in it is 0 or one its
            family's ``check`` rejects (``vit16x6x38``: width not a multiple of 64); a ValueError.
        tracekit.models.workloads.WorkloadError: a workload file that cannot be used
            (not found, import error, no such function, wrong signature; a ValueError).
        ValueError: a malformed library name (``hf:llama?layers=x``).
    """
    if name in PROVIDED:
        return PROVIDED[name], None
    prefix, sep, rest = name.partition(":")
    if sep and prefix in SOURCES:
        return SOURCES[prefix](rest), None
    if sep:
        return workloads.load(name), None
    for family in FAMILIES.values():
        if m := family.pattern.fullmatch(name):
            sizes = [g for g in m.groups() if g is not None and g.isdigit()]
            problem = ("every size in the name must be at least 1" if any(int(g) < 1 for g in sizes)
                       else family.check(m) if family.check else None)
            if problem:
                raise UnknownModel(f"model {name!r} cannot be built: {problem} (e.g. {family.example}; "
                                   "`tracekit models` lists the families)")
            return family, m
    if found := workloads.find(name):
        return found, None
    valid = ", ".join(f.example if f.example == k else f"{k} (e.g. {f.example})" for k, f in FAMILIES.items())
    raise UnknownModel(f"unknown model {name!r}; valid models: {valid}; or {', '.join(f'{p}:<name>' for p in SOURCES)}, "
                       f"path/to/file.py:function, package.module:function, or a function of "
                       f"{workloads.folder()}/*.py (`tracekit models` lists them)")


def check_seq(family: Family, name: str, seq: int | None) -> int | None:
    """The sequence length a build of ``name`` uses: ``seq``, else the family's default.

    Raises:
        ValueError: ``seq`` given for a model without token inputs, or not positive.
    """
    if seq is None:
        return family.default_seq
    if family.default_seq is None:
        raise ValueError(f"model {name!r} takes no sequence length (--seq is for token inputs, e.g. hf:gpt2)")
    if seq < 1:
        raise ValueError(f"seq must be at least 1, got {seq}")
    return seq


def build(name: str, batch: int | None = None, dtype: str = "fp32", device: str = "cpu",
          seed: int = 0, seq: int | None = None, phase: str = "inference",
          ) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Build a model in eval mode and its example inputs, on ``device`` in ``dtype``.

    Args:
        name: a model name (``vit16x6x384``, ``mlp``, ``hf:gpt2``, ``path/to/file.py:fn``, ...).
        batch: batch size; None takes the family's default.
        dtype: one of ``DTYPES`` (fp32, bf16, fp16).
        device: a torch device string ("cpu", "cuda", "cuda:1").
        seed: seeds weights and inputs, so two builds are identical.
        seq: sequence length of token inputs; None takes the family's default.
        phase: the phase it will run (a training phase gives ``hf:`` models labels, so
            they compute their own loss).

    Raises:
        UnknownModel: unknown ``name``.
        Unavailable: the family's library is not installed.
        tracekit.models.workloads.WorkloadError: a workload file that cannot be used,
            or a workload function that raised or returned something else than
            (nn.Module, tuple of tensors).
        ValueError: unknown ``dtype``, a non-positive batch or seq, or seq for a model without one.
    """
    family, match = lookup(name)
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; valid dtypes: {', '.join(DTYPES)}")
    batch = family.default_batch if batch is None else batch
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    seq = check_seq(family, name, seq)
    if family.missing:
        raise Unavailable(family.missing)
    torch.manual_seed(seed)
    given = {"dtype": DTYPES[dtype], "device": device, "seq": seq, "phase": phase}
    module, inputs = family.builder(match, batch, **{k: given[k] for k in family.options})
    if "device" not in family.options:
        module = module.to(device=device, dtype=DTYPES[dtype])
        inputs = tuple(x.to(device=device, dtype=DTYPES[dtype]) if x.is_floating_point() else x.to(device)
                       for x in inputs)
    return module.eval(), inputs


def catalog() -> list[dict]:
    """What ``tracekit models`` lists: one dict per built-in family, library and
    workload function, with ``kind`` ("built-in", "library", "workload file"),
    ``name``, ``batch``, ``seq``, ``description`` and ``source`` (as run.json records
    it); a library not installed has ``missing`` (with the install command), a
    workload file that cannot be imported ``problem``."""
    rows = [{"kind": "built-in", "name": f.example, "batch": f.default_batch, "seq": f.default_seq,
             "description": f.description, "source": f.source} for f in FAMILIES.values()]
    for prefix, source in SOURCES.items():
        example, names = SOURCE_HELP[prefix]
        f = source(example)
        rows.append({"kind": "library", "name": f"{prefix}:{example}", "batch": f.default_batch,
                     "seq": f.default_seq, "description": names,
                     "source": {k: v for k, v in f.source.items() if k in ("kind", "library", "version")},
                     **({"missing": f.missing} if f.missing else {})})
    return rows + [{"kind": "workload file", **row} for row in workloads.discover()]


def default_batch(name: str) -> int:
    """The batch size ``build`` uses for ``name`` when none is given."""
    return lookup(name)[0].default_batch


def resolved(spec: RunSpec, device: str) -> tuple[Family, RunSpec]:
    """The family of ``spec.model`` and ``spec`` with its defaults filled as a run records them
    (:func:`tracekit.spec.resolve`: the family's batch and sequence length, ``device`` where
    the spec names none). Raises what :func:`lookup` raises."""
    family = lookup(spec.model)[0]
    return family, resolve(spec, family.default_batch, device, family.default_seq)


from tracekit.models import conv, lm, mlp, ops, rope, transformer, vit  # noqa: E402,F401  (register the families)
from tracekit.models import hf, timm, torchvision, workloads  # noqa: E402,F401,I001  (the sources)

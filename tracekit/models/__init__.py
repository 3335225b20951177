"""Workload registry: model name -> (nn.Module, example inputs).

Three kinds of names, each resolved by :func:`lookup` to a :class:`Family` (the registry's
primitives, which each family's module imports, are in :mod:`tracekit.models.family`):

* built-in families in pure torch, one module each, registered with :func:`register`
  at import and matched by a regular expression, so parametrised names such as
  ``vit16x6x384`` need no table of sizes;
* library architectures with random weights, ``<prefix>:<name>``, one module per
  library registered with :func:`register_source`: ``hf:<type>`` (transformers),
  ``timm:<name>``, ``torchvision:<name>``;
* workload files (:mod:`tracekit.models.workload_files`): ``path/to/file.py:fn``,
  ``package.module:fn``, or a function's bare name when a file in ``workloads/``
  defines it (built-in names win).
"""

from __future__ import annotations

import re

import torch

# Register the families (each module registers itself at import) and the library sources.
from tracekit.models import conv, hf, lm, mlp, ops, rope, timm, torchvision, transformer, vit, workload_files  # noqa: F401,I001  # noqa: F401,I001
from tracekit.models.family import (DTYPES, FAMILIES, PROVIDED, SOURCE_HELP, SOURCES, Family, Unavailable, UnknownModel,
                                    missing_library, register, register_source)

__all__ = ["DTYPES", "FAMILIES", "PROVIDED", "SOURCES", "Family", "Unavailable", "UnknownModel", "build",
           "build_decoder", "build_from", "catalog", "check_decode", "check_seq", "cost", "cost_from", "default_batch",
           "lookup", "missing_library", "register", "register_source"]


def cost(name: str, batch: int, dtype: str) -> dict | None:
    """{"flop", "bytes"} of one call of a single-op workload, or None (see Family.cost)."""
    return cost_from(*lookup(name), batch, dtype)


def cost_from(family: Family, match: re.Match | None, batch: int | None, dtype: str) -> dict | None:
    """:func:`cost` of a name already looked up (:func:`lookup`'s family and match)."""
    if family.cost is None:
        return None
    return family.cost(match, batch or family.default_batch, DTYPES[dtype].itemsize)


def lookup(name: str) -> tuple[Family, re.Match | None]:
    """The family that accepts ``name`` and the regex match of it (None for a library
    or workload-file name).

    Raises:
        UnknownModel: no family accepts ``name``, or a size in it is 0 or one its
            family's ``check`` rejects (``vit16x6x38``: width not a multiple of 64); a ValueError.
        tracekit.models.workload_files.WorkloadError: a workload file that cannot be used
            (not found, import error, no such function, wrong signature; a ValueError).
        ValueError: a malformed library name (``hf:llama?layers=x``).
    """
    if name in PROVIDED:
        return PROVIDED[name], None
    prefix, sep, rest = name.partition(":")
    if sep and prefix in SOURCES:
        return SOURCES[prefix](rest), None
    if sep:
        return workload_files.load(name), None
    for family in FAMILIES.values():
        if m := family.pattern.fullmatch(name):
            sizes = [g for g in m.groups() if g is not None and g.isdigit()]
            problem = ("every size in the name must be at least 1" if any(int(g) < 1 for g in sizes)
                       else family.check(m) if family.check else None)
            if problem:
                raise UnknownModel(f"model {name!r} cannot be built: {problem} (e.g. {family.example}; "
                                   "`tracekit models` lists the families)")
            return family, m
    if found := workload_files.find(name):
        return found, None
    valid = ", ".join(f.example if f.example == k else f"{k} (e.g. {f.example})" for k, f in FAMILIES.items())
    raise UnknownModel(f"unknown model {name!r}; valid models: {valid}; or {', '.join(f'{p}:<name>' for p in SOURCES)}, "
                       f"path/to/file.py:function, package.module:function, or a function of "
                       f"{workload_files.folder()}/*.py (`tracekit models` lists them)")


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
        tracekit.models.workload_files.WorkloadError: a workload file that cannot be used,
            or a workload function that raised or returned something else than
            (nn.Module, tuple of tensors).
        ValueError: unknown ``dtype``, a non-positive batch or seq, or seq for a model without one.
    """
    return build_from(*lookup(name), name, batch, dtype, device, seed, seq, phase)


def _batch(family: Family, batch: int | None, dtype: str) -> int:
    """The batch of a build (the family's default where None), its ``dtype`` checked.

    Raises:
        ValueError: an unknown dtype, a batch below 1.
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; valid dtypes: {', '.join(DTYPES)}")
    batch = family.default_batch if batch is None else batch
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    return batch


def build_from(family: Family, match: re.Match | None, name: str, batch: int | None = None, dtype: str = "fp32",
               device: str = "cpu", seed: int = 0, seq: int | None = None, phase: str = "inference",
               ) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """:func:`build` of a name already looked up (:func:`lookup`'s family and match): no second
    lookup (an ``hf:`` name's config, a workload file's hash). Raises what :func:`build` raises
    but UnknownModel."""
    batch = _batch(family, batch, dtype)
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


def check_decode(family: Family, match: re.Match | None, name: str, seq: int | None, steps: int) -> int:
    """The prompt's tokens of a decode run of ``name`` (``seq``: its ``--seq``, or the family's default)
    whose cache holds ``steps`` decode steps after the prompt (:func:`tracekit.manifest.spec.decode_steps`).

    Raises:
        ValueError: the model is no causal LM the decode phase runs (the message names the models that
            do and the phases this one runs), or the prompt and the steps are more tokens than the
            model's positions (the message names the limit and how to raise it).
    """
    if family.decoder is None and family.missing:   # a library not installed: the run is skipped, saying so
        return seq or 0
    if family.decoder is None:
        built_in = ", ".join(f.description.split(":")[0] for f in FAMILIES.values() if f.decoder is not None)
        raise ValueError(f"model {name!r} is not a causal LM: phase decode runs hf:<type> with a causal-lm head "
                         f"(hf:gpt2, hf:llama, hf:mistral, hf:qwen2...) and the built-in LMs {built_in}; {name} "
                         "runs phases inference, forward, forward-backward and train-step")
    prompt = family.decoder.prompt(match, seq)
    limit, need = family.decoder.positions(match), prompt + steps
    if limit is not None and need > limit:
        more = ""
        if name.startswith("hf:"):   # the name with positions=need, in place of the one it gives
            more = re.sub(r"([?&])positions=\d+", rf"\g<1>positions={need}", name) if "positions=" in name \
                else f"{name}{'&' if '?' in name else '?'}positions={need}"
        raise ValueError(f"{name} has {limit} positions: a {prompt}-token prompt and {steps} decode steps (first call, "
                         f"warm-up, timed and profiled) need {need}; give a shorter --seq or fewer --iters"
                         + (f", or more positions ({more})" if more else ""))
    return prompt


def build_decoder(family: Family, match: re.Match | None, name: str, batch: int | None, dtype: str, device: str,
                  seed: int, seq: int | None, steps: int) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A decode run's step (:class:`tracekit.models.kv_cache.DecodeStep`, eval mode, on ``device`` in
    ``dtype``; its KV cache not yet allocated) and its inputs (its buffers), the cache sized for the
    prompt and ``steps`` decode steps (:func:`check_decode`; seeded as :func:`build`).

    Raises:
        ValueError: what :func:`check_decode` raises; an unknown dtype, a batch below 1.
        Unavailable: the family's library is not installed.
    """
    batch = _batch(family, batch, dtype)
    prompt = check_decode(family, match, name, check_seq(family, name, seq), steps)
    if family.missing:
        raise Unavailable(family.missing)
    torch.manual_seed(seed)
    with torch.device(device):   # built where it runs (a 1B model's random init takes seconds on a CPU)
        step = family.decoder.build(match, batch, prompt, prompt + steps)
    step = step.to(device=device, dtype=DTYPES[dtype])
    return step.eval(), step.inputs


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
    return rows + [{"kind": "workload file", **row} for row in workload_files.discover()]


def default_batch(name: str) -> int:
    """The batch size ``build`` uses for ``name`` when none is given."""
    return lookup(name)[0].default_batch

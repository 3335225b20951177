"""RunSpec: everything that defines one run (model, mode, sizes, iteration counts)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import PurePath

DEFAULT_WARMUP = 5       # calls after the first; covers Inductor's and CUDA-graph recording's warm-up runs
DEFAULT_ITERS = 50       # unprofiled timed iterations
DEFAULT_PROFILE_ITERS = 10  # iterations in the profiled window


@dataclass(frozen=True)
class RunSpec:
    """One run: a workload (model, batch, dtype, device) on one backend mode.

    batch None means the model family's default. device None means "cuda" when
    a GPU is visible, else "cpu" (resolved by :func:`resolve`). seq: the sequence
    length of models that take token inputs (``hf:gpt2``); None means the
    family's default, and models without one take none.
    """

    model: str
    mode: str = "eager"
    batch: int | None = None
    dtype: str = "fp32"
    device: str | None = None
    phase: str = "inference"
    compile_only: str = ""   # surgical mode: comma-separated name patterns of submodules to compile
    warmup: int = DEFAULT_WARMUP
    iters: int = DEFAULT_ITERS
    profile_iters: int = DEFAULT_PROFILE_ITERS
    seed: int = 0
    seq: int | None = None

    def to_dict(self) -> dict:
        """The spec as run.json records it; ``seq`` only when set, so the specs of models
        without a sequence length equal those written before it existed."""
        data = asdict(self)
        if data["seq"] is None:
            del data["seq"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "RunSpec":
        """Build from a dict, ignoring keys RunSpec does not know (newer manifests)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def label(self, default_batch: int, default_device: str, default_seq: int | None = None) -> str:
        """The workload folder name: the model (as :func:`folder_name`), plus each setting
        that is not the default.

        ``vit16x6x384`` at its default batch 8 in fp32 is ``vit16x6x384``; at batch 1
        in bf16 it is ``vit16x6x384-b1-bf16``; ``hf:gpt2`` at sequence 512 is
        ``hf-gpt2-s512``; a training step adds ``-train-step``.
        """
        parts = [folder_name(self.model)]
        if self.batch is not None and self.batch != default_batch:
            parts.append(f"b{self.batch}")
        if self.seq is not None and self.seq != default_seq:
            parts.append(f"s{self.seq}")
        if self.dtype != "fp32":
            parts.append(self.dtype)
        if self.device is not None and self.device.split(":")[0] != default_device:
            parts.append(self.device.replace(":", ""))
        if self.phase != "inference":
            parts.append(self.phase)
        return "-".join(parts)


def folder_name(model: str) -> str:
    """A filesystem-safe, readable folder name for a model name.

    Built-in names stay as they are (``vit16x6x384``, ``lm-2.7b-1024``). A file
    reference keeps the file's stem and the function (``path/to/net.py:build`` ->
    ``net-build``); otherwise ``key=value`` becomes ``keyvalue`` and every other
    character outside ``[A-Za-z0-9._-]`` a dash (``hf:llama?layers=16&hidden=2048`` ->
    ``hf-llama-layers16-hidden2048``, ``pkg.mod:fn`` -> ``pkg.mod-fn``).
    """
    source, sep, name = model.rpartition(":")
    if sep and source.endswith(".py"):
        model = f"{PurePath(source).stem}-{name}"
    model = re.sub(r"=", "", model)
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.") or "model"


def resolve(spec: RunSpec, default_batch: int, default_device: str, default_seq: int | None = None) -> RunSpec:
    """Fill batch, device and sequence-length defaults so the manifest records concrete values."""
    return replace(spec, batch=spec.batch or default_batch, device=spec.device or default_device,
                   seq=spec.seq or default_seq)

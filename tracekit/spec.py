"""RunSpec: everything that defines one run (model, mode, sizes, iteration counts)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

DEFAULT_WARMUP = 5       # calls after the first; covers Inductor's and CUDA-graph recording's warm-up runs
DEFAULT_ITERS = 50       # unprofiled timed iterations
DEFAULT_PROFILE_ITERS = 10  # iterations in the profiled window
_LATER = {"threads": None, "repeats": 1}  # fields added by issue 17, with their defaults


@dataclass(frozen=True)
class RunSpec:
    """One run: a workload (model, batch, dtype, device) on one backend mode.

    batch None means the model family's default. device None means "cuda" when
    a GPU is visible, else "cpu" (resolved by :func:`resolve`). threads: torch's
    intra-op threads (``torch.set_num_threads``; None: torch's default, recorded
    as ``environment.cpu_threads`` either way). repeats: the run is made in that
    many processes, one after the other, and reported as the median process
    with the spread across them (:mod:`tracekit.repeats`).
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
    threads: int | None = None
    repeats: int = 1

    def to_dict(self) -> dict:
        """The fields as a dict; fields added after run.json files were first written
        (``_LATER``) only where they differ from their default, so the spec of an
        older run still equals the same spec now (the bench's "done" check)."""
        return {k: v for k, v in asdict(self).items() if k not in _LATER or v != _LATER[k]}

    @classmethod
    def from_dict(cls, data: dict) -> "RunSpec":
        """Build from a dict, ignoring keys RunSpec does not know (newer manifests)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def label(self, default_batch: int, default_device: str) -> str:
        """The workload folder name: the model, plus each setting that is not the default.

        ``vit16x6x384`` at its default batch 8 in fp32 is ``vit16x6x384``; at batch 1
        in bf16 it is ``vit16x6x384-b1-bf16``; a training step adds ``-train-step``;
        a set thread count ``-t1`` (the number of processes is no part of it).
        """
        parts = [self.model]
        if self.batch is not None and self.batch != default_batch:
            parts.append(f"b{self.batch}")
        if self.dtype != "fp32":
            parts.append(self.dtype)
        if self.device is not None and self.device.split(":")[0] != default_device:
            parts.append(self.device.replace(":", ""))
        if self.phase != "inference":
            parts.append(self.phase)
        if self.threads is not None:
            parts.append(f"t{self.threads}")
        return "-".join(parts)


def validate(spec: RunSpec) -> None:
    """Check the counts of ``spec`` before anything runs or is written.

    Raises:
        ValueError: a batch below 1 (0 is not "the default": None is), fewer
            than 1 timed or profiled iteration, thread or process, or negative
            warm-up calls.
    """
    for name, least in (("batch", 1), ("iters", 1), ("profile_iters", 1), ("warmup", 0), ("threads", 1),
                        ("repeats", 1)):
        value = getattr(spec, name)
        if value is not None and value < least:
            raise ValueError(f"{name} must be at least {least}, got {value}")


def resolve(spec: RunSpec, default_batch: int, default_device: str) -> RunSpec:
    """Fill batch and device defaults so the manifest records concrete values."""
    return replace(spec, batch=default_batch if spec.batch is None else spec.batch,
                   device=spec.device or default_device)

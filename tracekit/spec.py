"""RunSpec: everything that defines one run (model, mode, sizes, iteration counts), and the
names its fields take (no torch here: the CLI's choices come from these lists)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

DTYPES = ("fp32", "bf16", "fp16")  # tracekit.models.DTYPES maps each to its torch dtype
PHASES = ("inference", "forward", "forward-backward", "train-step")  # what each does: tracekit.phases

DEFAULT_WARMUP = 5       # calls after the first; covers Inductor's and CUDA-graph recording's warm-up runs
DEFAULT_ITERS = 50       # unprofiled timed iterations
DEFAULT_PROFILE_ITERS = 10  # iterations in the profiled window


@dataclass(frozen=True)
class RunSpec:
    """One run: a workload (model, batch, dtype, device) on one backend mode.

    batch None means the model family's default. device None means "cuda" when
    a GPU is visible, else "cpu" (resolved by :func:`resolve`).
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

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunSpec":
        """Build from a dict, ignoring keys RunSpec does not know (newer manifests)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def label(self, default_batch: int, default_device: str) -> str:
        """The workload folder name: the model, plus each setting that is not the default.

        ``vit16x6x384`` at its default batch 8 in fp32 is ``vit16x6x384``; at batch 1
        in bf16 it is ``vit16x6x384-b1-bf16``; a training step adds ``-train-step``.
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
        return "-".join(parts)


def resolve(spec: RunSpec, default_batch: int, default_device: str) -> RunSpec:
    """Fill batch and device defaults so the manifest records concrete values."""
    return replace(spec, batch=spec.batch or default_batch, device=spec.device or default_device)

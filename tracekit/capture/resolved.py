"""A RunSpec resolved once: its model's family (and the regex match of its name), its
defaults filled as run.json records them, its folder name. Every stage of a
capture takes this (:mod:`tracekit.capture.stages`), so the model name is looked up once
per process (an ``hf:`` name builds its config once, a workload file is hashed once)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch

from tracekit import backends, models
from tracekit.backends import Backend
from tracekit.capture.environment import default_device
from tracekit.manifest.spec import RunSpec, decode_steps
from tracekit.manifest.spec import resolve as fill_defaults
from tracekit.models import Family


@dataclass(frozen=True)
class ResolvedRun:
    """One run's spec, looked up and filled (:func:`resolve`).

    spec: the spec with batch, device and sequence length filled (the family's defaults,
        the machine's device): what run.json records.
    family, match: the model's family and the match of its name (None for library and
        workload-file names; :func:`tracekit.models.lookup`).
    label: the workload folder name (:meth:`RunSpec.label`).
    """

    spec: RunSpec
    family: Family
    match: re.Match | None
    label: str

    @property
    def backend(self) -> Backend:
        """The mode's backend. Raises tracekit.backends.UnknownMode for a mode no backend registers."""
        return backends.get(self.spec.mode)

    @property
    def device_type(self) -> str:
        """"cuda" or "cpu": the spec's device without its index."""
        return self.spec.device.split(":")[0]

    def directory(self, out: Path | str) -> Path:
        """The run folder under the traces root ``out``: ``out/<label>/<mode>``."""
        return Path(out) / self.label / self.spec.mode

    def unavailable(self) -> str | None:
        """Why this run cannot happen here (the mode's phase or availability, the model's
        library), with how to fix it; None when it can."""
        return backends.why_not(self.backend, self.spec) or self.family.missing

    def build(self) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        """The model (eval mode) and its example inputs, on the backend's device
        (:func:`tracekit.models.build_from`; raises what it raises); for the decode phase its decode
        step and that step's buffers (:func:`tracekit.models.build_decoder`)."""
        s = self.spec
        if s.phase == "decode":
            return models.build_decoder(self.family, self.match, s.model, s.batch, s.dtype, self.backend.device(s),
                                        s.seed, s.seq, decode_steps(s))
        return models.build_from(self.family, self.match, s.model, s.batch, s.dtype, self.backend.device(s), s.seed,
                                 s.seq, s.phase)

    def cost(self) -> dict | None:
        """{"flop", "bytes"[, "op"]} of one call of a single-op workload, else None (:attr:`Family.cost`)."""
        return models.cost_from(self.family, self.match, self.spec.batch, self.spec.dtype)


def resolve(spec: RunSpec, device: str | None = None) -> ResolvedRun:
    """Look ``spec``'s model up once and fill its defaults (the mode is looked up by
    :attr:`ResolvedRun.backend`).

    ``device``: the default device of the machine the run is (or was) made on ("cuda" or
    "cpu"; this machine's when None); the label names a device only where the spec's differs.

    Raises:
        tracekit.models.UnknownModel: an invalid model name.
        tracekit.models.workload_files.WorkloadError: a workload file that cannot be used.
        ValueError: a malformed library name, or a sequence length for a model without one; a decode
            run of a model that is not a causal LM, or that needs more positions than the model has
            (:func:`tracekit.models.check_decode`).
    """
    family, match = models.lookup(spec.model)
    seq = models.check_seq(family, spec.model, spec.seq)
    if spec.phase == "decode":
        models.check_decode(family, match, spec.model, seq, decode_steps(spec))
    machine = device or default_device()
    return ResolvedRun(fill_defaults(spec, family.default_batch, machine, family.default_seq), family, match,
                       spec.label(family.default_batch, machine, family.default_seq))

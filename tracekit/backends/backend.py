"""The backend registry's primitives, imported by each backend's module (one file per
mode or family of modes, :mod:`tracekit.backends`): :class:`Prepared`, :class:`Backend`,
:data:`BACKENDS` filled at import by :func:`register`, and the lookups over it."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from tracekit.manifest.spec import PHASES, RunSpec


@dataclass
class Prepared:
    """What a backend made of the module.

    fn:          called as ``fn(*inputs)``; returns the output (tensors).
    device_type: where the work really runs ("cpu"/"cuda"): ONNX Runtime on its
                 CPU provider is "cpu" even on a GPU machine. Timing, memory and
                 the run's labels follow it.
    info:        facts recorded in run.json (provider, compiled submodules...).
    profile:     optional ``profile(run_dir, worker) -> context manager`` that
                 records the backend's own profile (ONNX Runtime's) during the
                 profiled window and writes it into run_dir.
    step:        optional ``step(inputs) -> output``: one whole iteration of the run's
                 phase, where the backend made it (a CUDA graph of a training step);
                 otherwise the runner builds it around ``fn`` (:func:`tracekit.capture.phases.make_step`).
    """

    fn: Callable[..., Any]
    device_type: str
    info: dict = field(default_factory=dict)
    profile: Callable[[Path, str], AbstractContextManager] | None = None
    step: Callable[[tuple], Any] | None = None


USUAL_PHASES = frozenset(PHASES) - {"decode"}   # a mode's phases unless it lists its own (Backend.phases)


@dataclass(frozen=True)
class Backend:
    """One mode.

    prepare(module, inputs, spec) -> Prepared (or a plain callable, run where
    the module is). unavailable(spec) -> None when the mode can run that spec
    here, else the reason and how to fix it. note(device_type) -> a caveat
    recorded in run.json. phases: the phases it supports (default :data:`USUAL_PHASES`: all but
    decode, which a mode runs where its callable can make one decode step updating the KV cache in
    place: eager, torch.compile, CUDA graphs). device(spec) -> the
    device the model and inputs are built on (default: the spec's).
    module_scopes: the prepared callable runs the module's Python forward (eagerly,
    or compiled only below some submodules), so the runner can mark each module's
    calls (tracekit.capture.module_scopes.module_scopes). graph_capture: where the mode
    captures CUDA graphs ("prepare", the "warmup" calls, or "" for none), so the
    runner records the capture (tracekit.capture.provenance.capture_recording); a mode
    that captures in "prepare" is called on a side stream, on which a rank's model was
    wrapped too (DDP, FSDP2), and captures there (tracekit.capture.stages.prepare); on a
    job it captures the step's collectives, so the launcher turns NCCL's asynchronous error
    handling off (tracekit.capture.launcher.launch).
    """

    name: str
    description: str
    prepare: Callable[[torch.nn.Module, tuple, RunSpec], Prepared | Callable]
    unavailable: Callable[[RunSpec], str | None] = lambda spec: None
    note: Callable[[str], str] = lambda device: ""
    phases: frozenset = USUAL_PHASES
    device: Callable[[RunSpec], str] = lambda spec: spec.device
    module_scopes: bool = False
    graph_capture: str = ""


BACKENDS: dict[str, Backend] = {}


class UnknownMode(ValueError):
    """A mode name no backend registers; the message lists the valid ones."""


def register(backend: Backend) -> Backend:
    BACKENDS[backend.name] = backend
    return backend


def get(mode: str) -> Backend:
    """The backend registered as ``mode``.

    Raises:
        UnknownMode: no such mode.
    """
    try:
        return BACKENDS[mode]
    except KeyError:
        raise UnknownMode(f"unknown mode {mode!r}; valid modes: {', '.join(BACKENDS)}") from None


def why_not(backend: Backend, spec: RunSpec) -> str | None:
    """Why ``backend`` cannot run ``spec`` here (phase or availability), or None."""
    if spec.phase == "decode" and "decode" not in backend.phases:
        modes = ", ".join(name for name, b in BACKENDS.items() if "decode" in b.phases)
        return (f"mode {backend.name} does not run the decode phase (a step that updates the KV cache in place; "
                f"modes that do: {modes}); it supports phases {', '.join(sorted(backend.phases))}")
    if spec.phase not in backend.phases:
        return f"mode {backend.name} supports phases {', '.join(sorted(backend.phases))}, not {spec.phase}"
    return backend.unavailable(spec)


def listing(device: str) -> list[dict]:
    """Every mode as it stands on ``device`` ("cpu", "cuda"), in registration order.

    Returns:
        One dict per mode: mode, available (bool), reason (why not, with how to
        fix it; "" when available), description, phases (list), note (what the
        mode does differently on this device, e.g. no CUDA graphs on the CPU; "").
    """
    spec = RunSpec(model="mlp", device=device)
    rows = []
    for name, b in BACKENDS.items():
        reason = why_not(b, spec) or ""
        rows.append({"mode": name, "available": not reason, "reason": reason, "description": b.description,
                     "phases": [p for p in PHASES if p in b.phases], "note": b.note(device.split(":")[0])})
    return rows


def needs_cuda(spec: RunSpec) -> str | None:
    """``unavailable`` for CUDA-only modes: the run is not on CUDA, or torch sees no GPU."""
    if not spec.device or not spec.device.startswith("cuda"):
        return "needs CUDA (a GPU and a CUDA build of torch); this run is on the CPU"
    if not torch.cuda.is_available():
        return "needs CUDA (a GPU and a CUDA build of torch); torch sees no GPU here"
    return None

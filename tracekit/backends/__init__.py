"""Backend registry: mode name -> how to turn an eager module into a callable.

Each backend module registers its modes with :func:`register` at import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from tracekit.spec import RunSpec

Prepared = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class Backend:
    """One mode: ``prepare(module, inputs, spec)`` returns the callable to time.

    ``unavailable(device)`` returns None when the mode can run on that device
    type ("cpu"/"cuda"), else the reason and how to fix it. ``note(device)``
    returns a caveat recorded in the manifest (e.g. a mode that degrades on CPU).
    """

    name: str
    description: str
    prepare: Callable[[torch.nn.Module, tuple, RunSpec], Prepared]
    unavailable: Callable[[str], str | None] = lambda device: None
    note: Callable[[str], str] = lambda device: ""


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


from tracekit.backends import eager, torch_compile  # noqa: E402,F401  (register the modes)

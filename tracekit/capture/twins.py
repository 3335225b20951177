"""A run's twin, timed in the same process: the program with its on-purpose difference switched
off, so that a what-if predicted from this run is checked against a twin on the same host.

Why: on the lent GPU machines a host-bound step's time differs between processes by up to 1.6x
(``cudaLaunchKernel``'s median 5.2-13.4 µs over one suite's runs, steady within each run:
reports/h100x2/README.md), so a prediction made from one process and checked against another
process's run misses by the hosts' difference, whatever the model. Timed in one process, in
alternating blocks, the run and its twin see the same host.

What has a twin, each registered by the code that builds it (:func:`register`):

* ``--parallel ddp-no-overlap`` / ``fsdp-no-overlap`` (:mod:`tracekit.capture.sharding`): the
  overlapped program (kind "overlap"), what ``tracekit whatif --overlap-comm`` predicts;
* a straggler built on purpose (``workloads/predict_dist.py``): the same model without the
  delay (kind "balanced"), what ``--balance-ranks`` predicts.

A switch is flipped between calls, after a device synchronize. Only eager runs time a twin: a
compiled or captured step would not see the flip (a CUDA graph replays what it recorded).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np
import torch

from tracekit.capture import timers
from tracekit.manifest import Timer, Twin

if TYPE_CHECKING:
    from tracekit.capture.capture_run import Capture
    from tracekit.capture.stages import Workload

KINDS = ("overlap", "balanced")   # what a twin removes: the waits for collectives, a rank's delay


@dataclass(frozen=True)
class Switch:
    """One difference of a run from its twin: ``kind`` (one of :data:`KINDS`), ``name`` (what the
    twin is, one line) and ``set`` (called with True for the twin, False for the run itself)."""

    kind: str
    name: str
    set: Callable[[bool], None]


_SWITCHES: "weakref.WeakKeyDictionary[torch.nn.Module, list[Switch]]" = weakref.WeakKeyDictionary()


def register(module: torch.nn.Module, kind: str, name: str, set: Callable[[bool], None]) -> None:
    """Register a switch to ``module``'s twin (see :class:`Switch`).

    Raises:
        ValueError: ``kind`` not in :data:`KINDS`.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown twin kind {kind!r}: one of {', '.join(KINDS)}")
    _SWITCHES.setdefault(module, []).append(Switch(kind, name, set))


def switches(module: torch.nn.Module | None) -> list[Switch]:
    """The switches registered to ``module`` and its submodules (none for None)."""
    if module is None:
        return []
    return [s for m in module.modules() for s in _SWITCHES.get(m, [])]


def _flip(found: list[Switch], on: bool, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    for s in found:
        s.set(on)


def time_twin(fn: Callable[[], object], found: list[Switch], iters: int, device: str,
              rounds: int = timers.INTERLEAVE_ROUNDS) -> tuple[list[float], list[float], str]:
    """``iters`` calls of the run and ``iters`` of its twin, timed one by one
    (:func:`tracekit.capture.timers.time_calls`) in alternating blocks: ``min(rounds, iters)``
    rounds, each a block of the run and a block of the twin (the run first in even rounds, the
    twin in odd ones), each block after the switch is flipped and one untimed call. The schedule
    depends on ``iters`` and ``rounds`` alone: every rank of a job makes the same calls. The run is
    switched back whatever happens.

    Returns:
        (the run's times, the twin's times, ms each in call order; the timer's name).
    """
    per_round = timers.split_rounds(iters, rounds)
    own: list[float] = []
    twin: list[float] = []
    timer = ""
    try:
        for i, k in enumerate(per_round):
            for on in ((False, True) if i % 2 == 0 else (True, False)):
                _flip(found, on, device)
                fn()
                times, timer = timers.time_calls(fn, k, device)
                (twin if on else own).extend(times)
    finally:
        _flip(found, False, device)
    return own, twin, timer


def record(own: list[float], twin: list[float], timer: str, found: list[Switch], rounds: int,
           over_ranks: str | None = None) -> Twin:
    """The run.json section of a twin's timing (:class:`tracekit.manifest.Twin`)."""
    def stats(samples: list[float]) -> Timer:
        return Timer.of({**timers.latency_stats(samples), "timer": timer, "over_ranks": over_ranks})
    return Twin(kind="+".join(sorted({s.kind for s in found})), names=[s.name for s in found], rounds=rounds,
                latency_ms=stats(twin), source_latency_ms=stats(own))


def timing(w: "Workload", c: "Capture") -> None:
    """The timing stage's twin (``twin`` in run.json) where the run has one: :func:`time_twin` with
    ``spec.iters`` calls each. A run whose mode is not eager gets a note instead."""
    found = switches(w.module)
    if not found:
        return
    spec = c.spec
    if spec.mode != "eager":
        c.manifest.add_note(f"its twin ({'; '.join(s.name for s in found)}) is timed in eager runs only: "
                            f"mode {spec.mode} compiles or captures the step, which a switch does not reach")
        return
    c.stage(f"timing the twin ({spec.iters} calls each, alternating): {'; '.join(s.name for s in found)}")
    own, twin, timer = time_twin(lambda: w.step(w.inputs), found, spec.iters, w.device)
    c.manifest.twin = record(own, twin, timer, found, min(timers.INTERLEAVE_ROUNDS, spec.iters))


def slowest_over_ranks(sections: list[Twin]) -> Twin | None:
    """A job's twin from its ranks' (each rank's own, in call order): the slowest rank of each call,
    as the job's ``latency_ms``; None unless every rank timed one."""
    if not sections or any(t is None or not t.latency_ms or not t.latency_ms.samples for t in sections):
        return None
    first = sections[0]

    def slowest(arm: str) -> Timer:
        samples = np.max([getattr(t, arm).samples for t in sections], axis=0)
        return Timer.of({**timers.latency_stats(list(samples)), "timer": getattr(first, arm).timer,
                         "over_ranks": "the slowest rank of each call"})
    return Twin(kind=first.kind, names=first.names, rounds=first.rounds, latency_ms=slowest("latency_ms"),
                source_latency_ms=slowest("source_latency_ms"))

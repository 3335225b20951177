"""The decode phase's own stages (issue 41), in the capture's one order
(:meth:`tracekit.capture.capture_run.Capture.sequence`): the prompt prefilled into the KV cache before
the reference output, and the run's per-token figures after the profiled window. Between them the
capture's stages are every phase's: each call is one decode step
(:func:`tracekit.capture.phases.make_step`), so the warm-up, the timing and the profiled window count
decode steps, each profiled step with its ``ProfilerStep#N`` marker.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from msgspec.structs import replace

from tracekit.capture import timers
from tracekit.capture.stages import Workload, out_of_memory, sync
from tracekit.manifest import Decode, Timer

if TYPE_CHECKING:
    from tracekit.capture.capture_run import Capture

MB = 2**20


class CacheOutOfMemory(RuntimeError):
    """The KV cache, or the prompt's forward beside it, did not fit in memory; the message names the
    cache's size (an "out of memory" message: the run's status is "oom")."""


def _timed_prefill(w: Workload, seed: int) -> float:
    """One prefill of ``w.module`` (a :class:`tracekit.models.kv_cache.DecodeStep`), ms: a clock read
    after a device synchronize at each end (one call: the host's time counts)."""
    sync(w.device)
    t0 = time.perf_counter()
    w.module.prefill(seed)
    sync(w.device)
    return (time.perf_counter() - t0) * 1e3


def prefill(w: Workload, c: Capture) -> None:
    """Stage "prefill": records ``decode`` (prompt, tokens a step, the cache's length, whose cache and
    its planned MB) before anything is allocated, then allocates the KV cache and prefills the prompt
    twice with the eager model (each mode decodes from the same cache: the mode applies to the decode
    step), the first untimed as a warm-up of the GPU libraries (``prefill_first_ms``), the second timed
    (``prefill_ms``); ``kv_cache_MB`` becomes the cache's size as allocated.

    Raises:
        CacheOutOfMemory: out of memory in the allocation or the prompt's forward, the cache's size
            named (the run is then an "oom" row with ``decode.kv_cache_MB`` the size it tried).
    """
    step, m = w.module, c.manifest
    planned = step.planned_bytes() / MB
    m.decode = Decode(prompt_tokens=step.prompt_tokens, tokens_per_step=step.batch, cache_tokens=step.cache_tokens,
                      kv_cache=step.kind, kv_cache_MB=planned)
    c.stage(f"prefill ({step.batch} x {step.prompt_tokens} tokens; KV cache of {step.cache_tokens} tokens, "
            f"{planned:.1f} MB)")
    try:
        step.allocate()
        first = _timed_prefill(w, c.spec.seed)
    except Exception as exc:
        if out_of_memory(exc):
            raise CacheOutOfMemory(f"out of memory with a KV cache of {planned:.1f} MB ({step.batch} sequences x "
                                   f"{step.cache_tokens} tokens, {step.kind}): {str(exc).strip()}") from exc
        raise
    again = _timed_prefill(w, c.spec.seed)
    allocated = step.allocated_bytes()
    m.decode = replace(m.decode, prefill_first_ms=first, prefill_ms=again,
                       kv_cache_MB=planned if allocated is None else allocated / MB)


def figures(w: Workload, c: Capture) -> None:
    """After the profiled window: the decode steps made and the times the cache wrapped, and where the
    run was timed ``ms_per_token`` and ``tokens_per_s`` from its latency
    (:func:`tracekit.capture.timers.token_rates`)."""
    m, step = c.manifest, w.module
    more = {}
    if m.latency_ms and m.latency_ms.median:
        ms, rate = timers.token_rates(m.latency_ms.to_dict(), step.batch)
        more = {"ms_per_token": Timer.of(ms), "tokens_per_s": Timer.of(rate)}
    m.decode = replace(m.decode or Decode(), steps=step.steps, wraps=step.wraps, **more)

"""Timing you can trust on a noisy host: the unprofiled latency measured two ways, and the host's load.

* **Latency per call** (:func:`time_calls`): CUDA events on a GPU (the device
  time between the enqueue points of back-to-back calls, read after one final
  synchronize), ``perf_counter`` on the CPU. This is ``latency_ms`` in run.json.
* **Synchronised wall clock per call** (:func:`wall_clock`), as
  ``torch.utils.benchmark.Timer`` measures it, by that Timer itself:
  ``blocked_autorange`` times blocks of calls between ``timer()`` reads that
  synchronize the device first (torch/utils/benchmark/utils/timer.py), and
  gives the time per call of each block. It sees whatever the host adds
  between calls that the events can hide, and the events see nothing of a
  host that is merely busy elsewhere. This is ``wall_ms``.
* **Agreement** (:func:`agreement`): wall median / latency median - 1. Above
  ``TIMER_DISAGREEMENT`` (5%, issue 17) either way the two timers are not
  measuring the same thing (a synchronize that costs at this size, a host
  stalling between calls) or the host was noisy: the run says so.
* **Host load** (:func:`host_load`): the 1- and 5-minute load averages
  (``os.getloadavg``) and the CPUs this process may use, taken at the start
  and the end of a run. A 1-minute load above the CPU count means more
  runnable tasks than CPUs: other work competed with the run
  (:func:`busy_host`). On the lent H100 host speed varied up to 1.6x between
  processes, and CPU timings here swung from 0.086 to 24 ms between two
  identical runs: these are what made the issue ask for both figures.
"""

from __future__ import annotations

import math
import os
from typing import Callable

import numpy as np

# torch is imported where a call is timed, so analyses can use the checks below without it.

TIMER_DISAGREEMENT = 0.05
WALL_TIMER = "torch.utils.benchmark.Timer.blocked_autorange"
FIXED_WALL_TIMER = "torch.utils.benchmark.Timer.timeit"  # one block of fixed calls: distributed ranks
WALL_MIN_S, WALL_MAX_S = 0.2, 5.0  # bounds of the wall-clock measurement's length (s)


def latency_stats(samples_ms: list[float]) -> dict:
    """Summary of per-iteration latencies (ms): n, mean, median, p10, p90, std, min, max,
    and the samples themselves (so several processes' samples can be pooled)."""
    a = np.asarray(samples_ms, dtype=np.float64)
    return {"n": int(a.size), "mean": float(a.mean()), "median": float(np.median(a)),
            "p10": float(np.percentile(a, 10)), "p90": float(np.percentile(a, 90)),
            "std": float(a.std(ddof=1)) if a.size > 1 else 0.0, "min": float(a.min()), "max": float(a.max()),
            "samples": [float(x) for x in a]}


def time_calls(fn: Callable[[], object], n: int, device: str) -> tuple[list[float], str]:
    """``n`` calls of ``fn`` timed one by one (ms each), and the timer's name: CUDA events
    on a GPU ("cuda_events"), perf_counter on the CPU ("perf_counter")."""
    import time

    import torch
    if device.startswith("cuda"):
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for start, end in pairs:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in pairs], "cuda_events"
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out, "perf_counter"


def wall_clock(fn: Callable[[], object], budget_s: float, calls: int | None = None) -> dict:
    """The synchronised wall clock per call of ``fn``, by torch.utils.benchmark.Timer.

    Args:
        fn: one call of the workload.
        budget_s: about how long to measure (``blocked_autorange``'s min_run_time),
            clipped to [WALL_MIN_S, WALL_MAX_S]; the runner gives the time its timed
            iterations took, so both figures rest on about as many calls.
        calls: a fixed number of calls in one block (``Timer.timeit``, after its own two
            warm-up calls), instead of the budget. The ranks of a distributed run need it: each
            call runs collectives, and ranks that chose their own counts would pair one rank's
            timing calls with another's profiled ones.

    Returns:
        {median, mean, p10, p90, iqr (ms per call, over the blocks), n (blocks),
        calls_per_block, timer}. The Timer runs at torch's current thread count
        (its own default would be one thread).
    """
    import torch
    from torch.utils.benchmark import Timer

    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    if calls:
        m = timer.timeit(calls)
        per_call, per_block, iqr, name = np.asarray(m.times) * 1e3, calls, 0.0, FIXED_WALL_TIMER
    else:
        m = timer.blocked_autorange(min_run_time=min(max(budget_s, WALL_MIN_S), WALL_MAX_S))
        per_call, per_block = np.asarray(m.times, dtype=np.float64) * 1e3, m.number_per_run
        iqr, name = float(m.iqr * 1e3), WALL_TIMER
    return {"median": float(np.median(per_call)), "mean": float(per_call.mean()),
            "p10": float(np.percentile(per_call, 10)), "p90": float(np.percentile(per_call, 90)),
            "iqr": iqr, "n": int(per_call.size), "calls_per_block": int(per_block),
            "timer": name}


def agreement(latency_median_ms: float, wall_median_ms: float) -> float:
    """Wall-clock median over latency median, less 1 (0.09: the wall clock reads 9% more)."""
    return wall_median_ms / latency_median_ms - 1


def host_load() -> dict:
    """{loadavg_1m, loadavg_5m, cpus}: the system's load averages and the CPUs this
    process may run on (``os.sched_getaffinity``); {} where the OS gives no load."""
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return {}
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"loadavg_1m": one, "loadavg_5m": five, "cpus": cpus}


def busy_host(load: dict | None) -> bool:
    """Whether a :func:`host_load` reading shows more runnable tasks than CPUs (1-minute load)."""
    return bool(load) and load.get("loadavg_1m", 0) > load.get("cpus", float("inf"))


def problems(latency_median_ms: float, wall_median_ms: float, timer: str | None,
             host_load: dict | None) -> list[str]:
    """What makes a run's timing doubtful, one sentence each: the two timers more than
    ``TIMER_DISAGREEMENT`` apart, a busy host at the start or the end (:func:`busy_host`).
    NaN or None figures are not judged."""
    out = []
    if all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (latency_median_ms, wall_median_ms)):
        gap = agreement(latency_median_ms, wall_median_ms)
        if abs(gap) > TIMER_DISAGREEMENT:
            out.append(f"timers disagree: {timer or 'latency'} median {latency_median_ms:.3f} ms, synchronised "
                       f"wall clock {wall_median_ms:.3f} ms ({gap:+.0%}, over {TIMER_DISAGREEMENT:.0%})")
    for when in ("start", "end"):
        load = (host_load or {}).get(when)
        if busy_host(load):
            out.append(f"host busy at the {when}: load {load['loadavg_1m']:.1f} on {load['cpus']} CPUs")
    return out

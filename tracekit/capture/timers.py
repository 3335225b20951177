"""Timing you can trust on a noisy host: the unprofiled latency measured two ways, and the host's load.

* **Latency per call** (:func:`time_calls`): CUDA events on a GPU (the device
  time between the enqueue points of back-to-back calls, read after one final
  synchronize), ``perf_counter`` on the CPU. This is ``latency_ms`` in run.json.
* **Synchronised wall clock per call**: blocks of calls between two clock reads
  that each follow a device synchronize, as ``torch.utils.benchmark.Timer``
  reads its clock; the time per call of each block. It sees whatever the host
  adds between calls that the events can hide, and the events see nothing of a
  host that is merely busy elsewhere. This is ``wall_ms``.
* **Interleaved** (:func:`interleaved`): the two are taken in alternating short
  blocks of one process (10 rounds of a per-call block and a wall-clock block),
  not one after the other: on the lent machines a host-bound call's time swung
  1.8x between rounds a few seconds apart (benchmarks/timer_probe.py,
  reports/h100/lm/timer-probe/), so two timers taken in turn saw two hosts. How
  they were interleaved is ``interleaving`` in run.json.
* **The host's own time per call** (:func:`host_times`): each call after a device
  synchronize, so the GPU is idle: ``host_ms``; on the ranks of a job each call also
  after a barrier of the process group, so every rank makes the same calls together.
* **A recorded loop's steps** (:class:`StepClock`): from one ``rec.step()`` to the
  next, no synchronize added (CUDA events, or ``perf_counter``).
* **Agreement** (:func:`agreement`): wall median / latency median - 1. Above
  5% either way (:data:`tracekit.analysis.comparison.trust.TIMER_DISAGREEMENT`) the two timers are not
  measuring the same thing (a synchronize that costs at this size, a host
  stalling between calls, the GPU tail a synchronised block waits for:
  :func:`tracekit.analysis.comparison.trust.timer_gap`) or the host was noisy.
* **Host load** (:func:`host_load`): the 1- and 5-minute load averages
  (``os.getloadavg``) and the CPUs this process may use, taken at the start
  and the end of a run. A 1-minute load above the CPU count means more
  runnable tasks than CPUs: other work competed with the run
  (:func:`tracekit.analysis.comparison.trust.busy_host`). On the lent H100 host speed varied up to 1.6x between
  processes, and CPU timings here swung from 0.086 to 24 ms between two
  identical runs: these are what made the issue ask for both figures.
"""

from __future__ import annotations

import math
import os
import time
from typing import Callable

import numpy as np

# torch is imported where a call is timed, so analyses can use the checks below without it.

WALL_TIMER = "synchronised perf_counter blocks, interleaved"  # tracekit.capture.timers.interleaved
INTERLEAVE_ROUNDS = 10   # rounds of (per-call block, wall-clock block): 5 timed calls a block at the default 50
WALL_BLOCK_MIN_S = 0.01  # a wall-clock block lasts at least this long (s): wall_block_calls


def latency_stats(samples_ms: list[float]) -> dict:
    """Summary of per-iteration latencies (ms): n, mean, median, p10, p90, std, min, max,
    and the samples themselves (so several processes' samples can be pooled)."""
    a = np.asarray(samples_ms, dtype=np.float64)
    return {"n": int(a.size), "mean": float(a.mean()), "median": float(np.median(a)),
            "p10": float(np.percentile(a, 10)), "p90": float(np.percentile(a, 90)),
            "std": float(a.std(ddof=1)) if a.size > 1 else 0.0, "min": float(a.min()), "max": float(a.max()),
            "samples": [float(x) for x in a]}


def time_calls(fn: Callable[[], object], n: int, device: str,
               clock: Callable[[], float] = time.perf_counter) -> tuple[list[float], str]:
    """``n`` calls of ``fn`` timed one by one (ms each), and the timer's name: CUDA events
    on a GPU ("cuda_events", read after one synchronize at the end), ``clock`` (s;
    perf_counter) on the CPU ("perf_counter")."""
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
        t0 = clock()
        fn()
        out.append((clock() - t0) * 1e3)
    return out, "perf_counter"


def interleaved(fn: Callable[[], object], iters: int, device: str, fixed: bool = False,
                rounds: int = INTERLEAVE_ROUNDS,
                clock: Callable[[], float] = time.perf_counter) -> tuple[dict, dict, dict]:
    """The two timers of ``fn``, in alternating short blocks of one process, so that both see
    the same phase of the host: ``min(rounds, iters)`` rounds, each a per-call block then a
    synchronised wall-clock block.

    * Per-call block: one untimed call, then k calls timed one by one (:func:`time_calls`);
      the ``iters`` timed calls are split over the rounds (k differs by one at most). The
      untimed call makes every timed call follow another, as in a loop: the first call after
      a synchronize starts on an idle GPU, and its end event waits for the whole of its GPU
      tail, which the next calls' events do not see.
    * Wall-clock block: m calls between two reads of ``clock`` that each follow a device
      synchronize, as ``torch.utils.benchmark.Timer`` reads its clock
      (torch/utils/benchmark/utils/timer.py: ``timer()``); its time per call is
      (end - start) / m. m is the same in every round (:func:`wall_block_calls`).
    * ``fixed`` (the ranks of a distributed run, whose calls run collectives and must match
      call for call): m is the first per-call block's k, so the schedule depends on
      ``iters`` alone and is the same on every rank.

    Args:
        fn: one call of the workload. iters: calls timed one by one (>= 1).
        device: "cuda..." (CUDA events, device synchronize) or else (``clock``, no sync).
        clock: seconds (perf_counter).

    Returns:
        (latency_ms, wall_ms, interleaving): latency_ms is :func:`latency_stats` of the
        ``iters`` per-call times (ms, in call order) + ``timer``; wall_ms is
        :func:`latency_stats` of the blocks' times per call (ms, one sample a block, so median,
        p10 and p90 give the wall clock and its spread) + ``calls_per_block`` (m), ``calls``
        and ``timer`` (``WALL_TIMER``); interleaving is {rounds, latency_calls (timed calls of
        each round's per-call block), wall_calls (m), schedule: "fixed" or "sized"}.
    """
    import torch

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    per_round = split_rounds(iters, rounds)
    n = len(per_round)
    samples, blocks, timer, m = [], [], "", 0
    for k in per_round:
        fn()
        times, timer = time_calls(fn, k, device, clock)
        samples += times
        m = m or (per_round[0] if fixed else wall_block_calls(per_round[0], float(np.median(times))))
        sync()
        t0 = clock()
        for _ in range(m):
            fn()
        sync()
        blocks.append((clock() - t0) * 1e3 / m)
    latency = {**latency_stats(samples), "timer": timer}
    wall = {**latency_stats(blocks), "calls_per_block": m, "calls": m * n, "timer": WALL_TIMER}
    return latency, wall, {"rounds": n, "latency_calls": per_round, "wall_calls": m,
                           "schedule": "fixed" if fixed else "sized"}


def split_rounds(iters: int, rounds: int) -> list[int]:
    """``iters`` calls split over ``min(rounds, iters)`` rounds, the first ones a call longer where
    they do not divide evenly (calls per round, in order)."""
    n = min(rounds, iters)
    return [iters // n + (i < iters % n) for i in range(n)]


HOST_CALLS = 20   # calls timed by host_times


def host_times(fn: Callable[[], object], device: str, calls: int = HOST_CALLS,
               clock: Callable[[], float] = time.perf_counter, barrier: Callable[[], object] | None = None) -> dict:
    """The host's own time per call (``host_ms`` in run.json): each call timed from its start to
    its return by ``clock``, after a device synchronize and with none inside, so the GPU is idle
    and the launch queue empty when it starts: what issuing one iteration costs the host. On a
    GPU-bound run the other timers see only the GPU; this is how much room the host has (the
    critical path's calibration uses it, :mod:`tracekit.analysis.critical_path.calibrate`).

    ``barrier`` (the ranks of a job, whose calls run collectives): called before each call, between
    two device synchronizes, so every rank makes the same ``calls`` calls in the same order and
    starts each together, its own GPU idle (a barrier of the process group,
    ``torch.distributed.barrier``). With NCCL the call's collectives are only enqueued, so the time
    is the rank's own host cost; with gloo a collective blocks the host until every rank has
    arrived, so the time includes waiting for the slowest rank's host.

    Returns:
        :func:`latency_stats` of the ``calls`` times (ms).
    """
    import torch

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    out = []
    for _ in range(calls):
        sync()
        if barrier is not None:
            barrier()
            sync()
        t0 = clock()
        fn()
        out.append((clock() - t0) * 1e3)
    sync()
    return latency_stats(out)


class StepClock:
    """Times steps that another caller makes (a recorded loop's ``rec.step()``), adding no
    synchronize: a point at each step boundary, CUDA events on a GPU (the device time between the
    enqueue points of consecutive boundaries, read after one synchronize in :meth:`times_ms`),
    ``clock`` (perf_counter, s) on the CPU.

    :meth:`start` marks the start of a stretch of timed steps, :meth:`lap` the end of each."""

    def __init__(self, device: str, clock: Callable[[], float] = time.perf_counter):
        self.cuda = device.startswith("cuda")
        self.clock = clock
        self.last = None
        self.laps: list = []   # (start, end) of each timed step: clock readings or CUDA events

    def _point(self):
        if not self.cuda:
            return self.clock()
        import torch
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def start(self) -> None:
        """A stretch of timed steps starts now."""
        self.last = self._point()

    def lap(self) -> None:
        """The step since the last :meth:`start` or :meth:`lap` ended now."""
        point = self._point()
        self.laps.append((self.last, point))
        self.last = point

    def times_ms(self) -> tuple[list[float], str]:
        """Each timed step's time (ms, in order) and the timer's name ("cuda_events", "perf_counter")."""
        if not self.cuda:
            return [(b - a) * 1e3 for a, b in self.laps], "perf_counter"
        import torch
        torch.cuda.synchronize()
        return [a.elapsed_time(b) for a, b in self.laps], "cuda_events"


def wall_block_calls(k: int, call_ms: float) -> int:
    """Calls in each wall-clock block: as many as the per-call block's ``k``, or more where
    that is needed for a block of ``WALL_BLOCK_MIN_S`` at ``call_ms`` a call. 10 ms: the
    clock reads and synchronizes a block adds (microseconds) weigh under 1% of it, and ten
    rounds of such blocks last about 0.1 s, short beside the host's swings, seconds apart.
    (``blocked_autorange`` makes its blocks longer, up to its whole 0.2 s minimum, which is
    what one round must not be.) The wall clock so takes about as long as the per-call
    timing, at least 10 ms a round."""
    return max(k, math.ceil(WALL_BLOCK_MIN_S * 1e3 / call_ms)) if call_ms > 0 else k


def token_rates(latency_ms: dict, tokens_per_step: int) -> tuple[dict, dict]:
    """A decode run's figures per token from its latency per decode step (``latency_ms``: median, p10,
    p90 in ms; a step makes ``tokens_per_step`` tokens, one per sequence): ms_per_token (the step's
    median, p10, p90) and tokens_per_s (tokens_per_step / ms x 1000: its median from the median, its
    p10 from the latency's p90 and its p90 from the p10). LLM serving's time per output token and
    throughput, as vLLM's and gpt-fast's benchmarks report them."""
    ms = {k: latency_ms[k] for k in ("median", "p10", "p90")}
    rate = {k: tokens_per_step / ms[other] * 1e3 if ms[other] > 0 else math.inf
            for k, other in (("median", "median"), ("p10", "p90"), ("p90", "p10"))}
    return ms, rate


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

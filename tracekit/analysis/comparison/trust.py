"""How far a comparison's figures can be trusted on a noisy host (issue 17).

* **Inconclusive speedups.** A speedup is given with the range of the two
  runs' p10-p90 latencies (:mod:`tracekit.analysis.comparison.compare`). Where those
  ranges overlap (speedup_low <= 1 <= speedup_high) the difference is inside
  the runs' own spread: the speedup is *inconclusive* and shown as that word
  with its range, never as a number alone. So is a speedup the run's two timers
  contradict: CUDA events say slower and the synchronised wall clock faster, or
  the other way round (``wall_speedup``: the baseline's wall-clock median over
  the run's). On a host-bound cell the host's speed can swing 1.8x between two
  measurements a second apart (issue 21's probe on the lent H100,
  reports/h100/lm/timer-probe/), and then two timers taken one after the other
  see two hosts; since issue 30 they are interleaved (:func:`tracekit.capture.timers.interleaved`).
* **Timers apart** (issue 30): why a run's two timers are more than 5% apart
  (:func:`timer_gap`): by the GPU tail a synchronised block waits for (a known
  difference, said once per report: :func:`tracekit.report.run_lines.timer_gap_lines`), or
  for no known reason (said once per report too, and in the timing table). A comparison row
  warns of its timers only where they reach different verdicts, faster, slower
  or inconclusive (:func:`verdicts`).
* **Doubtful timing**, said in the comparison's warnings (:mod:`tracekit.report.comparison_text`):
  a host busier than its CPUs at the start or end of the run (:func:`busy_host`); CPU runs
  with another thread count than their baseline;
  a run made in several processes whose medians spread by more than
  ``PROCESS_SPREAD_FLAG``.
* **Unreliable unprofiled timing.** A profiled iteration cannot be faster than
  an unprofiled one by much: the profiler only adds work. When it is shorter
  by more than ``PROFILER_OVERHEAD_FLAG`` the unprofiled latency was taken on
  a slowed host (or the timer misread it), so the run is flagged as an
  unreliable unprofiled timing instead of a negative "profiler overhead".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

TIMER_DISAGREEMENT = 0.05      # the two timers' medians this far apart either way (issue 17)
PROFILER_OVERHEAD_FLAG = 0.10  # profiled vs unprofiled iteration, either way (threshold: issue 4)
PROCESS_SPREAD_FLAG = 0.05     # (max - min) / median of the processes' latency medians (the timers' 5%)
GPU_TAIL, UNEXPLAINED = "GPU tail", "no known reason"   # timer_gap's causes


def numeric(rows: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column of ``rows``, NaN where absent."""
    return pd.to_numeric(rows[name], errors="coerce") if name in rows else pd.Series(math.nan, index=rows.index)


def timer_gap(rows: pd.DataFrame) -> pd.Series:
    """Why each run's two timers are more than ``TIMER_DISAGREEMENT`` apart: ``GPU_TAIL``,
    ``UNEXPLAINED``, or "" (within it, or a figure missing).

    Args:
        rows: run rows (:attr:`tracekit.analysis.runs.Analysis.runs`) with latency_median_ms,
            wall_median_ms, wall_calls_per_block (run.json) and busy_per_iter_us (the trace).

    The GPU tail: the wall clock reads more than the per-call timer, by at most
    busy_per_iter / wall_calls_per_block. Reasoning (CUDA events complete when the work
    enqueued before them on the stream has, cudaEventRecord): where the GPU keeps up with
    the host (launch-bound), call i's end event waits for the GPU work still queued when
    the host has enqueued the call, its tail, and so does call i+1's start event, recorded
    right after: back-to-back events see the host's time per call, the tails cancel. A
    wall-clock block of m calls between two synchronizes ends waiting for its last call's
    tail, which nothing cancels: m x host time + tail. The tail is at most one iteration's
    GPU work (the GPU keeps up, so no more is queued), so the wall clock per call reads
    at most busy / m more. Where the GPU is the bottleneck, the block's extra is instead the
    host's time before the GPU starts its first kernel, shorter still. Older runs timed
    ``wall_calls_per_block`` calls a block as well (``blocked_autorange``'s block), so the
    rule reads them alike. busy_per_iter is the profiled window's: kernels barely change
    under the profiler (:mod:`tracekit.analysis.comparison.compare`). No GPU time (a CPU run), no tail:
    a gap there has no known reason.
    """
    latency, wall = numeric(rows, "latency_median_ms"), numeric(rows, "wall_median_ms")
    gap = wall / latency - 1
    tail_ms = numeric(rows, "busy_per_iter_us").fillna(0) / 1e3 / numeric(rows, "wall_calls_per_block")
    apart = gap.abs() > TIMER_DISAGREEMENT
    known = apart & (wall > latency) & (wall - latency <= tail_ms)
    return pd.Series(np.select([known, apart], [GPU_TAIL, UNEXPLAINED], ""), index=rows.index)


def verdict(low: pd.Series, high: pd.Series) -> pd.Series:
    """"faster" (low > 1), "slower" (high < 1), "inconclusive" (the range holds 1), "" (unknown)
    for each speedup range [low, high]."""
    return pd.Series(np.select([low > 1, high < 1, (low <= 1) & (high >= 1)], ["faster", "slower", "inconclusive"],
                               ""), index=low.index)


def verdicts(base: pd.DataFrame, run: pd.DataFrame, low: pd.Series, high: pd.Series) -> pd.DataFrame:
    """The verdict of each timer on each comparison (:func:`verdict`); where the two differ, the
    report says so (:func:`tracekit.report.comparison_text.timer_verdicts`).

    Args:
        base, run: the baseline's and the run's rows (same index), with wall_median_ms,
            wall_p10_ms and wall_p90_ms.
        low, high: the per-call timer's speedup range (p10-p90 ratios).

    Returns:
        timer_verdict (the per-call timer's, of [low, high]), wall_verdict (the synchronised wall
        clock's, of its range), wall_speedup_low and wall_speedup_high: the wall clock's range,
        [base p10 / run p90, base p90 / run p10] over its blocks, as the per-call timer's is over
        its calls (NaN where a figure is missing, the verdict "" there).
    """
    wall_low = numeric(base, "wall_p10_ms") / numeric(run, "wall_p90_ms")
    wall_high = numeric(base, "wall_p90_ms") / numeric(run, "wall_p10_ms")
    return pd.DataFrame({"timer_verdict": verdict(low, high), "wall_verdict": verdict(wall_low, wall_high),
                         "wall_speedup_low": wall_low, "wall_speedup_high": wall_high}, index=run.index)


def inconclusive(low: pd.Series, high: pd.Series, speedup: pd.Series | None = None,
                 wall_speedup: pd.Series | None = None) -> pd.Series:
    """Whether each speedup is inconclusive: its range [low, high] holds 1 (the p10-p90
    latency ranges overlap), or ``speedup`` (CUDA events' or perf_counter's medians) and
    ``wall_speedup`` (the synchronised wall clock's) lie on either side of 1 (:func:`timers_contradict`).
    False where the figures are unknown (NaN)."""
    out = (low <= 1) & (high >= 1)
    if speedup is not None and wall_speedup is not None:
        out = out | timers_contradict(speedup, wall_speedup)
    return out


def timers_contradict(speedup: pd.Series, wall_speedup: pd.Series) -> pd.Series:
    """Where one timer's speedup is above 1 and the other's below (False where either is NaN)."""
    return (speedup - 1) * (wall_speedup - 1) < 0


def unreliable_unprofiled(overhead: pd.Series) -> pd.Series:
    """Profiled iterations shorter than the unprofiled latency by more than the flag."""
    return overhead < -PROFILER_OVERHEAD_FLAG


def busy_host(load: dict | None) -> bool:
    """Whether a :func:`host_load` reading shows more runnable tasks than CPUs (1-minute load)."""
    return bool(load) and load.get("loadavg_1m", 0) > load.get("cpus", float("inf"))

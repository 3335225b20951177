"""How far a comparison's figures can be trusted on a noisy host (issue 17).

* **Inconclusive speedups.** A speedup is given with the range of the two
  runs' p10-p90 latencies (:mod:`tracekit.analysis.compare`). Where those
  ranges overlap (speedup_low <= 1 <= speedup_high) the difference is inside
  the runs' own spread: the speedup is *inconclusive* and shown as that word
  with its range, never as a number alone. So is a speedup the run's two timers
  contradict: CUDA events say slower and the synchronised wall clock faster, or
  the other way round (``wall_speedup``: the baseline's wall-clock median over
  the run's). On a host-bound cell the host's speed can swing 1.8x between two
  measurements a second apart (issue 21's probe on the lent H100,
  reports/h100/lm/timer-probe/), and then each timer sees another host.
* **Doubtful timing**, said in the comparison's warnings: the two timers of a
  run more than 5% apart, or a host busier than its CPUs at the start or end
  of the run (:func:`tracekit.timing.problems`, ``timing_warning``); CPU runs
  with another thread count than their baseline; a run made in several
  processes whose medians spread by more than ``PROCESS_SPREAD_FLAG``.
* **Unreliable unprofiled timing.** A profiled iteration cannot be faster than
  an unprofiled one by much: the profiler only adds work. When it is shorter
  by more than ``PROFILER_OVERHEAD_FLAG`` the unprofiled latency was taken on
  a slowed host (or the timer misread it), so the run is flagged as an
  unreliable unprofiled timing instead of a negative "profiler overhead".
"""

from __future__ import annotations

import math

import pandas as pd

PROFILER_OVERHEAD_FLAG = 0.10  # profiled vs unprofiled iteration, either way (threshold: issue 4)
PROCESS_SPREAD_FLAG = 0.05     # (max - min) / median of the processes' latency medians (the timers' 5%)


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


def speedup_text(speedup: float, low: float, high: float, unsure: bool, wall_speedup: float = math.nan) -> str:
    """"1.38x (1.37-1.39)", "inconclusive (0.95-1.08x)", "inconclusive (0.63-0.68x; wall clock 1.27x)"
    where the timers contradict, "1.38x" without a range, "-" without a speedup."""
    if not isinstance(speedup, (int, float)) or math.isnan(speedup):
        return "-"
    if isinstance(low, (int, float)) and not math.isnan(low) and not math.isnan(high):
        if not unsure:
            return f"{speedup:.2f}x ({low:.2f}-{high:.2f})"
        wall = f"; wall clock {wall_speedup:.2f}x" if low > 1 or high < 1 else ""
        return f"inconclusive ({low:.2f}-{high:.2f}x{wall})"
    return f"{speedup:.2f}x"


def unreliable_unprofiled(overhead: pd.Series) -> pd.Series:
    """Profiled iterations shorter than the unprofiled latency by more than the flag."""
    return overhead < -PROFILER_OVERHEAD_FLAG


def warnings(row: dict) -> list[str]:
    """The timing doubts of one comparison row (:func:`tracekit.analysis.compare.compare`
    columns: timing_warning, threads, baseline_threads, ran_on, processes,
    process_spread, overhead, profiled_iter_ms, latency_median_ms, baseline_mode,
    baseline_unreliable), one sentence each."""
    out = [row["timing_warning"]] if row.get("timing_warning") else []
    threads, base = row.get("threads"), row.get("baseline_threads")
    if row.get("ran_on") == "cpu" and _known(threads) and _known(base) and threads != base:
        out.append(f"ran with {threads:.0f} CPU threads, the {row['baseline_mode']} baseline with {base:.0f}: "
                   "the speedup compares thread counts too")
    if _known(row.get("process_spread")) and row["process_spread"] > PROCESS_SPREAD_FLAG:
        out.append(f"the {row['processes']:.0f} processes' latency medians spread by {row['process_spread']:.0%}")
    if row.get("overhead", 0) < -PROFILER_OVERHEAD_FLAG:
        out.append(f"unreliable unprofiled timing: a profiled iteration took {row['profiled_iter_ms']:.3f} ms, "
                   f"{-row['overhead']:.0%} less than the unprofiled latency {row['latency_median_ms']:.3f} ms, "
                   "though the profiler only adds work")
    if row.get("baseline_unreliable"):
        out.append(f"the {row['baseline_mode']} baseline's unprofiled timing is unreliable (its profiled iteration "
                   "was shorter)")
    return out


def _known(value) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)

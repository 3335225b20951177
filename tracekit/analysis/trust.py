"""How far a comparison's figures can be trusted on a noisy host (issue 17).

* **Inconclusive speedups.** A speedup is given with the range of the two
  runs' p10-p90 latencies (:mod:`tracekit.analysis.compare`). Where those
  ranges overlap (speedup_low <= 1 <= speedup_high) the difference is inside
  the runs' own spread: the speedup is *inconclusive* and shown as that word
  with its range, never as a number alone.
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


def inconclusive(low: pd.Series, high: pd.Series) -> pd.Series:
    """Whether each speedup's range [low, high] holds 1 (the p10-p90 latency ranges
    overlap); False where the range is unknown (NaN)."""
    return (low <= 1) & (high >= 1)


def speedup_text(speedup: float, low: float, high: float, unsure: bool) -> str:
    """"1.38x (1.37-1.39)", "inconclusive (0.95-1.08x)", "1.38x" without a range, "-" without a speedup."""
    if not isinstance(speedup, (int, float)) or math.isnan(speedup):
        return "-"
    if isinstance(low, (int, float)) and not math.isnan(low) and not math.isnan(high):
        return f"inconclusive ({low:.2f}-{high:.2f}x)" if unsure else f"{speedup:.2f}x ({low:.2f}-{high:.2f})"
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

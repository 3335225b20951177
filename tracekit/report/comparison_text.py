"""The sentences of a comparison (:func:`tracekit.analysis.comparison.compare.compare`), each made
from its row's figures: a speedup as shown, what dominates it (``finding``), what to doubt
(``warning``, with the timers' verdicts), a CPU run's ops, the modules behind a Δ busy, and the
launch-removal control (:func:`tracekit.analysis.comparison.launch_removal.launch_vs_fusion`).
:func:`tracekit.report.worded.worded` puts them in the tables."""

from __future__ import annotations

import math

import pandas as pd

from tracekit.analysis.attribution.gpu_ops import module_label
from tracekit.analysis.attribution.run_diff import pattern
from tracekit.analysis.comparison.trust import PROCESS_SPREAD_FLAG, PROFILER_OVERHEAD_FLAG
from tracekit.report.decode_text import per

TIMER_NAMES = {"cuda_events": "CUDA events", "perf_counter": "perf_counter"}
FINDING_OPS = 3  # the ops a CPU run's finding names: those whose self time changed most
TOP_MODULES = 3  # the kinds of module a finding names: those that contribute most to Δ busy


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


def timer_verdicts(timer, a: str, speedup: float, low: float, high: float, b: str, wall: float, wall_low: float,
                   wall_high: float) -> str:
    """The sentence for a comparison whose two timers reach different verdicts (``a`` by the
    per-call ``timer`` with its speedup and range, ``b`` by the synchronised wall clock:
    :func:`tracekit.analysis.comparison.trust.verdicts`), "" where they agree or one is unknown."""
    if not (a and b and a != b):
        return ""
    name = TIMER_NAMES.get(timer, "the per-call timer")
    return (f"the timers reach different verdicts: {name} {a} ({speedup:.2f}x, {low:.2f}-{high:.2f}), the "
            f"synchronised wall clock {b} ({wall:.2f}x, {wall_low:.2f}-{wall_high:.2f})")


def _what(dominant: str, delta: float) -> str:
    if dominant == "idle":
        return "less GPU idle time (launch overhead, syncs)" if delta < 0 else "more GPU idle time"
    return "less GPU busy time (faster or fewer kernels)" if delta < 0 else "more GPU busy time"


def finding(row: dict) -> str:
    """One line: what dominates the speedup, and what the profiled window alone says ("" for the
    baseline or where a side lacks the figures; a decode run's per token). ``row``: a comparison row."""
    if not row["dominant"]:
        return ""
    db, di, unit = row["d_busy_per_iter_ms"], row["d_idle_est_ms"], "token" if per(row) == "token" else "iteration"
    text = (f"{_what(row['dominant'], di if row['dominant'] == 'idle' else db)} dominates: "
            f"Δ latency {row['d_latency_ms']:+.3f} ms = Δ GPU busy {db:+.3f} + Δ idle {di:+.3f} ms per {unit}")
    if row["inconclusive"] and row["speedup_low"] <= 1 <= row["speedup_high"]:
        text = (f"inconclusive: the p10-p90 latency ranges overlap (speedup {row['speedup_low']:.2f}-"
                f"{row['speedup_high']:.2f}x), so this may be noise: " + text)
    elif row["inconclusive"]:
        text = (f"inconclusive: the timers contradict each other (CUDA events {row['speedup']:.2f}x, the "
                f"synchronised wall clock {row['wall_speedup']:.2f}x): " + text)
    dp = row["dominant_profiled"]
    if dp and dp != row["dominant"]:
        text += (f"; the profiled window alone would say {dp} (Δ idle {row['d_idle_per_iter_ms']:+.3f} ms per "
                 f"profiled {unit})")
        over = [f"{who} {o:+.0%}" for who, o in (("this run", row["overhead"]), (row["baseline_mode"],
                                                                                row["baseline_overhead"]))
                if o > PROFILER_OVERHEAD_FLAG]
        if over:
            text += f", but the profiler lengthened the iterations ({', '.join(over)})"
    return text


def warning(row: dict) -> str:
    """What to doubt in one comparison row, "; "-joined ("" if nothing): a failed run, a missing
    or failed baseline, several baselines, another device than the baseline's, GPU busy above the
    unprofiled latency, then the timing's doubts (:func:`doubts`)."""
    out = []
    if row["status"] != "ok":
        out.append(f"run {row['status']}: {row.get('reason') or 'no reason recorded'}")
    if not row["baseline_run"]:
        status, baseline = row["baseline_status"], row["baseline_mode"]
        out.append(f"the {baseline} baseline {status}" if status else f"no {baseline} run in this workload")
    elif row["baseline_runs"] > 1:
        out.append(f"{row['baseline_runs']:.0f} {row['baseline_mode']} runs in this workload; "
                   f"the baseline is {row['baseline_run']}")
    elif row["ran_on"] != row["baseline_ran_on"]:
        out.append(f"DIFFERENT DEVICE: ran on {row['ran_on']} while the {row['baseline_mode']} baseline ran on "
                   f"{row['baseline_ran_on']}; the speedup compares devices, not modes")
    if row["idle_est_ms"] < 0:
        out.append(f"GPU busy per profiled iteration {row['busy_per_iter_ms']:.3f} ms > unprofiled latency "
                   f"{row['latency_median_ms']:.3f} ms: the profiler slowed its kernels too; the split is approximate")
    return "; ".join(out + doubts(row))


def doubts(row: dict) -> list[str]:
    """The timing doubts of one comparison row, one sentence each: its timers' verdicts and
    timing_warning (texts already), another CPU thread count than the baseline's, processes
    spread past ``PROCESS_SPREAD_FLAG``, an unreliable unprofiled timing of the run or its baseline
    (``PROFILER_OVERHEAD_FLAG``) (:mod:`tracekit.analysis.comparison.trust`)."""
    out = [row[k] for k in ("timer_verdicts", "timing_warning") if row.get(k)]
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


def cpu_ops_finding(run_changes: pd.DataFrame) -> str:
    """One line on a CPU run's ops against its baseline: profiled CPU time and op calls
    (``cpu_op`` events) per iteration, and the ``FINDING_OPS`` ops whose self time changed most.
    ``run_changes``: the rows of :func:`tracekit.analysis.metrics.cpu_ops.changes` for one run,
    largest change first ("" if none)."""
    if run_changes.empty:
        return ""
    base, own = run_changes["baseline_self_per_iter_ms"].sum(), run_changes["self_per_iter_ms"].sum()
    in_ops = run_changes[run_changes["kind"] == "op"]
    calls_base, calls = in_ops["baseline_calls_per_iter"].sum(), in_ops["calls_per_iter"].sum()
    top = run_changes.head(FINDING_OPS)
    named = ", ".join(f"{r['op']} {r['d_self_per_iter_ms']:+.3f} ms ({r['baseline_calls_per_iter']:.0f} -> "
                      f"{r['calls_per_iter']:.0f} calls)" for r in top.to_dict("records"))
    return (f"profiled CPU time per iteration {base:.3f} -> {own:.3f} ms ({own - base:+.3f}), "
            f"{calls_base:.0f} -> {calls:.0f} op calls; self time changed most in {named}")


def top_modules(rows: pd.DataFrame, n: int = TOP_MODULES) -> str:
    """The modules that contribute most to one run's Δ busy, repeated layers together
    (:func:`tracekit.analysis.attribution.run_diff.pattern`): ``blocks.*.mlp (x6) busy -120.5 µs,
    launches -24; ...`` (per iteration). ``rows``: the run's rows of a module diff
    (:func:`tracekit.analysis.attribution.module_diff.diff`)."""
    if rows.empty:
        return ""
    by = rows.assign(kind=rows["module"].map(pattern)).groupby("kind").agg(
        d_busy_us=("d_busy_us", "sum"), d_launches=("d_launches", "sum"), count=("module", "size"))
    by = by.reindex(by["d_busy_us"].abs().sort_values(ascending=False).index).head(n)
    return "; ".join(module_label(kind) + (f" (x{c})" if c > 1 else "") + f" busy {b:+.1f} µs"
                     + (f", launches {l:+.3g}" if abs(l) > 1e-9 else "")
                     for kind, b, l, c in by[["d_busy_us", "d_launches", "count"]].itertuples())


def launch_removal(r: dict) -> str:
    """One row of the launch_vs_fusion table in words (latencies in ms)."""
    share = r["launch_removal_share"]
    return (f"{r['workload']}: eager {r['latency_eager_ms']:.3f} ms; plain CUDA graphs "
            f"{r['latency_cudagraphs_ms']:.3f} ms (saves {r['saved_by_cudagraphs_ms']:.3f} ms); default "
            f"{r['latency_default_ms']:.3f} ms; reduce-overhead {r['latency_reduce_overhead_ms']:.3f} ms "
            f"(saves {r['saved_by_reduce_overhead_ms']:.3f} ms). Launch removal alone gives "
            + (f"{share:.0%} of reduce-overhead's gain." if share == share else "no comparable gain "
               "(reduce-overhead saves nothing)."))

"""The comparison engine: each run against the baseline run of its workload, how much faster,
and why. ``tracekit analyze``/``compare``, every report and a study suite's report
(:mod:`tracekit.analysis.comparison.suite_comparison`) take their figures from it.

In each workload (:mod:`tracekit.analysis.comparison.workloads`: runs of one model, or of
one op for a suite) every run is compared with the run of the baseline mode (``eager``
unless told otherwise):

* **speedup** = baseline latency / latency, from the unprofiled timed
  iterations (median); its spread is the range
  [baseline p10 / p90, baseline p90 / p10] (ratios of the 10th-90th
  percentile bounds; where p10/p90 are missing, ±1 standard deviation of each
  side, propagated to first order).
* **why**: the change of latency splits into the change of GPU busy time per
  iteration (kernels faster or fewer: fusion, autotuning; from the trace) and
  the change of everything else, the GPU's idle time (launch overhead that
  CUDA graphs remove, syncs): ``idle_est_ms`` = unprofiled latency - GPU busy
  per profiled iteration. Kernel times barely change under the profiler while
  host-side costs grow, so this estimates the *unprofiled* idle time (the rule
  of :mod:`tracekit.analysis.metrics.verdict`). The larger of |Δ busy| and |Δ idle|
  *dominates* the speedup.
* the same split of the *profiled* iteration time (mean ``ProfilerStep``
  length), exact there: Δ busy + Δ idle inside the GPU's active span (by
  cause: host wait, launch latency, sync, other) + a rest (host time outside
  the span). It shows the causes, but where the profiler inflated a run's host
  side it overstates Δ idle; ``dominant_profiled`` says what it alone would
  conclude.
* a run that ran on another device than its baseline (a CPU provider beside
  a CUDA baseline) is compared (``ran_on``, ``baseline_ran_on``), and the report warns loudly.
* a speedup whose p10-p90 latency ranges overlap, or that the two timers
  contradict (CUDA events say slower, the wall clock faster, or the other way
  round: ``wall_speedup``), is *inconclusive*; what makes a run's timing
  doubtful (timers reaching different verdicts, a busy host, other thread counts,
  processes spread, a profiled iteration shorter than the unprofiled one) is in
  its columns: :mod:`tracekit.analysis.comparison.trust`.
* a decode run (phase ``decode``) makes ``tokens_per_step`` tokens an iteration, one per sequence:
  its figures per iteration are per token, its speedup is its gain in tokens/s (``tokens_per_s``,
  at the same batch), and it carries its prompt, KV cache and prefill (``prompt_tokens``,
  ``kv_cache_MB``, ``prefill_ms``; NaN for other runs).
* CPU-only runs have no GPU time to split: their ops do it instead
  (:mod:`tracekit.analysis.metrics.cpu_ops`: Δ self time and Δ calls per iteration,
  op by op), in :class:`tracekit.analysis.result.Result`'s ``cpu_op_changes``.

The comparison writes no sentence: its ``finding`` and ``warning`` (and the texts of
its timers and doubts) are the report layer's, made from these columns
(:mod:`tracekit.report.comparison_text`, added by :func:`tracekit.report.worded.worded`).

Profiler overhead (:func:`profiler_overhead`): the profiler slows the host, so
a profiled iteration is longer than an unprofiled one; runs where it is longer
by more than ``PROFILER_OVERHEAD_FLAG`` are flagged (threshold: issue 4), and
the report warns that their Δ idle is inflated. A profiled iteration
shorter by as much means an unreliable unprofiled timing, not a negative overhead.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.comparison import trust
from tracekit.analysis.comparison.trust import numeric as _num
from tracekit.analysis.comparison.workloads import WORKLOAD_KEYS, baseline_rows, workloads
from tracekit.analysis.metrics import cpu_ops as ops_analysis
from tracekit.analysis.metrics.idle import CAUSES

PROFILER_OVERHEAD_FLAG = trust.PROFILER_OVERHEAD_FLAG
# Figures of a run's row (Analysis.runs: its run.json's and its trace's) every comparison row carries as
# they are, in this order (comparison.csv's columns; latency_std_ms only for the speedup's range), and its
# categories; a per-run figure named here can be shown in a report by a column spec (tracekit.report.column_specs).
RUN_FIGURES = ("latency_median_ms", "latency_p10_ms", "latency_p90_ms", "latency_std_ms", "kernels_per_iter",
               "launches_per_iter", "utilization", "compile_s", "peak_memory_MB", "max_abs_diff", "wall_median_ms",
               "wall_p10_ms", "wall_p90_ms", "wall_calls_per_block", "timer_agreement", "threads", "processes",
               "process_spread", "tokens_per_step", "tokens_per_s", "prompt_tokens", "kv_cache_MB", "prefill_ms")
RUN_TEXTS = ("timer_gap", "latency_timer")
# Figures (ms per iteration) compared with the baseline's: d_<name>_ms = the run's minus the baseline's,
# besides d_idle_<cause>_per_iter_ms for each idle cause (d_latency_median_ms is named d_latency_ms).
DELTAS = ("latency_median", "idle_est", "profiled_iter", "busy_per_iter", "idle_per_iter", "rest_per_iter",
          "cpu_op_per_iter")
# Readable names of the idle causes of tracekit.analysis.metrics.idle, for tables and plots.
CAUSE_LABELS = {"host_wait": "host wait", "launch_latency": "launch latency", "sync": "sync", "other": "other idle"}


def _speedup_range(base: pd.DataFrame, run: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Low and high speedup bounds (see the module docstring)."""
    low = _num(base, "latency_p10_ms") / _num(run, "latency_p90_ms")
    high = _num(base, "latency_p90_ms") / _num(run, "latency_p10_ms")
    speedup = _num(base, "latency_median_ms") / _num(run, "latency_median_ms")
    rel = np.hypot(_num(base, "latency_std_ms") / _num(base, "latency_median_ms"),
                   _num(run, "latency_std_ms") / _num(run, "latency_median_ms"))
    return low.fillna(speedup * (1 - rel)), high.fillna(speedup * (1 + rel))


def _per_iter_ms(r: pd.DataFrame, col_us: str) -> pd.Series:
    """A total (µs) of the profiled window per iteration, in ms."""
    return _num(r, col_us) / _num(r, "iterations") / 1e3


def _dominant(d_busy: pd.Series, d_idle: pd.Series, same: pd.Series) -> np.ndarray:
    """"busy" or "idle", whichever change is larger; "" for the baseline itself or unknown."""
    return np.select([d_busy.isna() | d_idle.isna() | same, d_idle.abs() > d_busy.abs()], ["", "idle"],
                     default="busy")


def compare(runs: pd.DataFrame, baseline: str = "eager", of_op: bool = False) -> pd.DataFrame:
    """Each run against the baseline-mode run of its workload.

    Args:
        runs: ``Analysis.runs``. Per-cause idle columns ``idle_<cause>_us``
            (:data:`tracekit.analysis.metrics.idle.CAUSES`) are used where present.
        baseline: the mode each run is compared with.
        of_op: workloads of the op a run computes, as a study suite groups them
            (:func:`tracekit.analysis.comparison.workloads.workloads`): a variant of an op is
            compared with the op's own baseline-mode run.

    Returns:
        One row per run with a manifest, grouped by workload, baseline first:
        identity (workload, model, batch, seq, dtype, phase, device, device_name,
        mode, run, status, reason, ran_on), baseline_mode, baseline_run,
        baseline_ran_on; unprofiled latency_median/p10/p90_ms and speedup,
        speedup_low, speedup_high; profiled_iter_ms and profiled_speedup;
        kernels_per_iter, launches_per_iter and their ratios to the baseline;
        busy_per_iter_ms, idle_per_iter_ms, idle_<cause>_per_iter_ms (profiled),
        idle_est_ms (unprofiled estimate); utilization, compile_s,
        peak_memory_MB, max_abs_diff; a decode run's tokens_per_step, tokens_per_s, prompt_tokens,
        kv_cache_MB, prefill_ms (NaN for others); inconclusive (the p10-p90 latency ranges
        of run and baseline overlap, or speedup and wall_speedup, the baseline's
        wall-clock median over the run's, lie on either side of 1:
        :func:`tracekit.analysis.comparison.trust.inconclusive`);
        how far the timing can be trusted (wall_median_ms, wall_p10_ms, wall_p90_ms,
        wall_calls_per_block, timer_agreement, timer_gap, latency_timer, threads,
        processes, process_spread: the run rows'; timer_verdict, wall_verdict,
        wall_speedup_low, wall_speedup_high: :func:`tracekit.analysis.comparison.trust.verdicts`,
        "" on the baseline's row);
        has_gpu and baseline_has_gpu (the trace
        holds GPU ops); cpu_op_per_iter_ms (time any CPU op ran, profiled) and
        cpu_ops_per_iter, with d_cpu_op_per_iter_ms; the decompositions (ms per iteration, run
        minus baseline) d_latency_ms = d_busy_per_iter_ms + d_idle_est_ms and
        d_profiled_iter_ms = d_busy_per_iter_ms + d_idle_per_iter_ms +
        d_rest_per_iter_ms, with d_idle_<cause>_per_iter_ms; dominant and
        dominant_profiled ("busy" | "idle" | ""); what the report's warnings rest on besides:
        baseline_status (the status of the workload's first baseline-mode run, "" where it has
        none), baseline_runs (its ok baseline-mode runs), baseline_threads, overhead and
        baseline_overhead (:func:`profiler_overhead`'s, 0 where unknown) and baseline_unreliable
        (the baseline's unprofiled timing is not to be trusted: :func:`trust.unreliable_unprofiled`).
        Ratios and deltas are NaN where a side lacks the figure.
    """
    w = workloads(runs, of_op)
    if w.empty:
        return pd.DataFrame(columns=["workload", *WORKLOAD_KEYS, "mode", "run", "status", "speedup"])
    causes = [c for c in CAUSES if f"idle_{c}_us" in w]
    m = pd.DataFrame({k: w[k] for k in ("workload", *WORKLOAD_KEYS, "mode", "run", "ran_on")})
    m["status"] = w["status"] if "status" in w else "ok"
    m["reason"] = w["reason"].fillna("") if "reason" in w else ""
    for col in RUN_FIGURES:
        m[col] = _num(w, col)
    for col in RUN_TEXTS:
        m[col] = w[col].fillna("") if col in w else ""
    m["profiled_iter_ms"] = _num(w, "iteration_ms")
    m["busy_per_iter_ms"] = _num(w, "busy_per_iter_us") / 1e3
    m["idle_per_iter_ms"] = _num(w, "idle_per_iter_us") / 1e3
    for c in causes:
        m[f"idle_{c}_per_iter_ms"] = _per_iter_ms(w, f"idle_{c}_us")
    m["rest_per_iter_ms"] = m["profiled_iter_ms"] - m["busy_per_iter_ms"] - m["idle_per_iter_ms"]
    m["idle_est_ms"] = m["latency_median_ms"] - m["busy_per_iter_ms"]
    m["has_gpu"] = w["has_gpu"].astype(object) if "has_gpu" in w else None
    cpu = ops_analysis.per_run(runs)
    m["cpu_op_per_iter_ms"], m["cpu_ops_per_iter"] = m["run"].map(cpu["ms"]), m["run"].map(cpu["calls"])

    # A variant of an op (of_op: its model is not the op) is never the op's baseline.
    is_base = (m["mode"] == baseline) & ((w["model"] == w["op"]) | (not of_op))
    base = baseline_rows(m, is_base)
    m["baseline_mode"] = baseline
    m["baseline_run"] = base["run"].fillna("")
    m["baseline_ran_on"] = base["ran_on"].fillna("")
    m["baseline_has_gpu"] = base["has_gpu"]
    failed = m[is_base].groupby("workload")["status"].first()
    m["baseline_status"] = m["workload"].map(failed).fillna("")
    m["speedup"] = base["latency_median_ms"] / m["latency_median_ms"]
    m["speedup_low"], m["speedup_high"] = _speedup_range(base, m)
    m["wall_speedup"] = base["wall_median_ms"] / m["wall_median_ms"]
    verdicts = trust.verdicts(base, m, m["speedup_low"], m["speedup_high"])
    verdicts[["timer_verdict", "wall_verdict"]] = verdicts[["timer_verdict", "wall_verdict"]].where(
        m["run"] != m["baseline_run"], "")
    m = pd.concat([m, verdicts], axis=1)
    m["inconclusive"] = (trust.inconclusive(m["speedup_low"], m["speedup_high"], m["speedup"], m["wall_speedup"])
                         & (m["run"] != m["baseline_run"]))
    m["baseline_threads"] = base["threads"]
    m["profiled_speedup"] = base["profiled_iter_ms"] / m["profiled_iter_ms"]
    # Kernels and launches of a run on another device (a CPU provider: none) say nothing of the mode.
    same_device = m["ran_on"] == m["baseline_ran_on"]
    m["kernels_ratio"] = (m["kernels_per_iter"] / base["kernels_per_iter"]).where(same_device)
    m["launches_ratio"] = (m["launches_per_iter"] / base["launches_per_iter"]).where(same_device)
    for col in (*DELTAS, *(f"idle_{c}_per_iter" for c in causes)):
        m[f"d_{col}_ms"] = m[f"{col}_ms"] - base[f"{col}_ms"]
    m = m.rename(columns={"d_latency_median_ms": "d_latency_ms"})
    same = m["run"] == m["baseline_run"]
    m["dominant"] = _dominant(m["d_busy_per_iter_ms"], m["d_idle_est_ms"], same)
    m["dominant_profiled"] = _dominant(m["d_busy_per_iter_ms"], m["d_idle_per_iter_ms"], same)
    overhead = profiler_overhead(runs).set_index("run")["profiler_overhead"]
    m["overhead"] = m["run"].map(overhead).fillna(0.0)
    m["baseline_overhead"] = m["baseline_run"].map(overhead).fillna(0.0)
    m["baseline_unreliable"] = trust.unreliable_unprofiled(m["baseline_overhead"]) & (m["run"] != m["baseline_run"])
    ok = m[is_base & (m["status"] == "ok")]
    m["baseline_runs"] = m["workload"].map(ok.groupby("workload")["run"].count()).fillna(0)
    m = m.drop(columns=["latency_std_ms"])
    order = pd.DataFrame({"w": m["workload"], "b": ~is_base, "r": m["run"]})
    return m.loc[order.sort_values(["w", "b", "r"]).index].reset_index(drop=True)


def profiler_overhead(runs: pd.DataFrame, threshold: float = PROFILER_OVERHEAD_FLAG) -> pd.DataFrame:
    """Profiled vs unprofiled iteration time of each run.

    Sources: ``latency_median_ms`` from the unprofiled timed iterations
    (run.json: CUDA events on a GPU, perf_counter on the CPU, ``latency_timer``);
    ``profiled_iter_ms`` = the mean ``ProfilerStep`` marker length in the trace
    (the window ends with a device sync, so the mean covers the GPU's work);
    ``gpu_span_per_iter_ms`` = the GPU's active span per profiled iteration.

    Returns:
        One row per run with both figures: run, mode, latency_timer,
        latency_median_ms, profiled_iter_ms, gpu_span_per_iter_ms,
        profiler_overhead (profiled / unprofiled - 1), flagged (overhead >
        threshold), unreliable_unprofiled (overhead < -threshold: a profiled
        iteration that much shorter means the unprofiled timing is not to be trusted).
    """
    cols = ["run", "mode", "latency_timer", "latency_median_ms", "profiled_iter_ms", "gpu_span_per_iter_ms",
            "profiler_overhead", "flagged", "unreliable_unprofiled"]
    if runs.empty or "run" not in runs:
        return pd.DataFrame(columns=cols)
    r = runs.drop_duplicates("run")
    out = pd.DataFrame({
        "run": r["run"], "mode": r["mode"] if "mode" in r else None,
        "latency_timer": r["latency_timer"] if "latency_timer" in r else None,
        "latency_median_ms": _num(r, "latency_median_ms"), "profiled_iter_ms": _num(r, "iteration_ms"),
        "gpu_span_per_iter_ms": _per_iter_ms(r, "active_span_us")})
    out["profiler_overhead"] = out["profiled_iter_ms"] / out["latency_median_ms"] - 1
    out = out[out["profiler_overhead"].notna()]
    out["flagged"] = out["profiler_overhead"] > threshold
    out["unreliable_unprofiled"] = out["profiler_overhead"] < -threshold
    return out[cols].reset_index(drop=True)

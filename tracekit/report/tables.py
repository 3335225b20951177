"""Shared by the report formats: the tables they show (columns, headers, units, number
formats), how a table is drawn (markdown, rich), and the texts and views every report
of an analysis carries (findings per run, evidence, notes, where figures come from,
links to the trace files). A table spec is a list of (column, header, format)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
from rich.table import Table

from tracekit.analysis.runs import Analysis
from tracekit.analysis.trust import speedup_text

PERFETTO_HINT = ("To look inside a run, open https://ui.perfetto.dev, choose \"Open trace file\" and pick its "
                 "`.pt.trace.json.gz` (Perfetto reads the gzipped Kineto JSON as it is, in the browser).")

SOURCES = (
    "Where each figure comes from: **latency** and **speedup** from the unprofiled timed iterations "
    "(`run.json`; CUDA events on a GPU, `perf_counter` on the CPU; median, range p10-p90); **kernels, "
    "launches, GPU busy, idle by cause, profiled iter** from the profiled window's trace (per "
    "`ProfilerStep` iteration); **Δ idle** in the speedup table = unprofiled latency minus traced GPU busy "
    "per iteration (kernel times barely change under the profiler, host-side costs do), so Δ latency = "
    "Δ GPU busy + Δ idle exactly. Δ = this mode minus the baseline, per iteration.")

# (column in Analysis.runs, header shown, format)
HEADLINE = [
    ("run", "run", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("source", "trace", "{}"),
    ("status", "status", "{}"),
    ("device_type", "device", "{}"),
    ("iterations", "iters", "{:.0f}"),
    ("kernels", "kernels", "{:.0f}"),
    ("host_launches", "launches", "{:.0f}"),
    ("gpu_busy_us", "GPU busy (ms)", "ms"),
    ("active_span_us", "span (ms)", "ms"),
    ("utilization", "util", "{:.2f}"),
    ("idle_gaps", "idle gaps", "{:.0f}"),
    ("mean_kernel_us", "mean kernel (µs)", "{:.1f}"),
    ("iteration_ms", "profiled iter (ms)", "{:.3f}"),
    ("cpu_op_busy_per_iter_us", "CPU ops/iter (ms)", "ms3"),
    ("latency_median_ms", "latency p50 (ms)", "{:.3f}"),
    ("compile_s", "first call (s)", "{:.2f}"),
    ("verdict", "verdict", "{}"),
]

# The idle-time table: where the GPU's idle time went, and what a CUDA graph could recover.
IDLE = [
    ("run", "run", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("verdict", "verdict", "{}"),
    ("utilization", "util", "{:.2f}"),
    ("idle_host_wait_share", "host wait", "{:.1%}"),
    ("idle_launch_latency_share", "launch latency", "{:.1%}"),
    ("idle_sync_share", "sync", "{:.1%}"),
    ("idle_other_share", "other idle", "{:.1%}"),
    ("cuda_graph_recoverable_us_per_iter", "CUDA graph could save (ms/iter)", "ms3"),
    ("launch_latency_p50_us", "launch→start p50 (µs)", "{:.1f}"),
    ("feed_ratio", "feed ratio", "{:.2f}"),
    ("short_kernel_share", "kernels <10µs", "{:.0%}"),
    ("unprofiled_utilization", "unprofiled util", "{:.2f}"),
]

# The comparison (tracekit.analysis.compare): how much faster than the baseline, and why.
SPEEDUP = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("ran_on", "ran on", "{}"),
    ("latency_median_ms", "latency p50 (ms)", "{:.3f}"),
    ("speedup_range", "speedup (p10-p90 range)", "{}"),
    ("d_latency_ms", "Δ latency (ms)", "{:+.3f}"),
    ("d_busy_per_iter_ms", "Δ GPU busy (ms/iter)", "{:+.3f}"),
    ("d_idle_est_ms", "Δ idle (ms/iter)", "{:+.3f}"),
    ("dominant", "dominates", "{}"),
    ("kernels_ratio", "kernels ×", "{:.2f}"),
    ("launches_ratio", "launches ×", "{:.3f}"),
]

# The same split measured inside the profiled window, with idle time by cause.
PROFILED = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("profiled_iter_ms", "profiled iter (ms)", "{:.3f}"),
    ("busy_per_iter_ms", "GPU busy (ms/iter)", "{:.3f}"),
    ("idle_per_iter_ms", "idle (ms/iter)", "{:.3f}"),
    ("idle_host_wait_per_iter_ms", "host wait", "{:.3f}"),
    ("idle_launch_latency_per_iter_ms", "launch latency", "{:.3f}"),
    ("idle_sync_per_iter_ms", "sync", "{:.3f}"),
    ("idle_other_per_iter_ms", "other", "{:.3f}"),
    ("d_profiled_iter_ms", "Δ profiled iter (ms)", "{:+.3f}"),
    ("d_busy_per_iter_ms", "Δ busy", "{:+.3f}"),
    ("d_idle_per_iter_ms", "Δ idle", "{:+.3f}"),
    ("d_idle_host_wait_per_iter_ms", "Δ host wait", "{:+.3f}"),
    ("d_rest_per_iter_ms", "Δ rest", "{:+.3f}"),
    ("dominant_profiled", "profiled says", "{}"),
]

# What else changed: work per iteration, compile time, memory, accuracy.
DETAILS = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("status", "status", "{}"),
    ("kernels_per_iter", "kernels/iter", "{:.1f}"),
    ("launches_per_iter", "launches/iter", "{:.1f}"),
    ("compile_s", "compile + first call (s)", "{:.2f}"),
    ("peak_memory_MB", "peak memory (MB)", "{:.1f}"),
    ("max_abs_diff", "max abs diff vs eager", "{:.2e}"),
    ("utilization", "GPU util (profiled)", "{:.2f}"),
    ("cpu_op_per_iter_ms", "CPU ops (ms/iter, profiled)", "{:.3f}"),
    ("cpu_ops_per_iter", "op calls/iter", "{:.0f}"),
]

# How far each run's timing can be trusted (tracekit.timing, tracekit.analysis.trust).
TIMING = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("latency_median_ms", "latency p50 (ms)", "{:.3f}"),
    ("wall_median_ms", "synchronised wall clock p50 (ms)", "{:.3f}"),
    ("timer_agreement", "timers apart", "{:+.1%}"),
    ("processes", "processes", "{:.0f}"),
    ("process_spread", "spread across processes", "{:.1%}"),
    ("threads", "CPU threads", "{:.0f}"),
    ("timing_warning", "doubts", "{}"),
]

# CPU-only runs: what changed op by op against the baseline (tracekit.analysis.cpu_ops.changes).
CPU_OPS = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("op", "op", "{}"),
    ("baseline_calls_per_iter", "calls/iter (baseline)", "{:.0f}"),
    ("calls_per_iter", "calls/iter", "{:.0f}"),
    ("baseline_self_per_iter_ms", "self (baseline, ms/iter)", "{:.3f}"),
    ("self_per_iter_ms", "self (ms/iter)", "{:.3f}"),
    ("d_self_per_iter_ms", "Δ self (ms/iter)", "{:+.3f}"),
]
CPU_OPS_SHOWN = 8  # ops per run in the reports' table (all of them are in runs.json)

# Figures that exist only where there is GPU activity: "n/a" in a CPU-only run's row, not 0.
GPU_ONLY = {"kernels", "host_launches", "gpu_busy_us", "active_span_us", "utilization", "idle_gaps",
            "mean_kernel_us", "kernels_ratio", "launches_ratio", "kernels_per_iter", "launches_per_iter",
            "d_busy_per_iter_ms", "d_idle_est_ms", "verdict"}

# Profiler overhead: profiled vs unprofiled iteration time of each run.
OVERHEAD = [
    ("run", "run", "{}"),
    ("latency_timer", "unprofiled timer", "{}"),
    ("latency_median_ms", "unprofiled p50 (ms)", "{:.3f}"),
    ("profiled_iter_ms", "profiled iter (ms)", "{:.3f}"),
    ("gpu_span_per_iter_ms", "GPU span/iter (ms)", "{:.3f}"),
    ("profiler_overhead", "profiler overhead", "{:+.0%}"),
    ("flag", "flag", "{}"),
]


# Distributed jobs (tracekit.analysis.job): the jobs, their ranks, balance and stragglers.
JOBS = [
    ("job", "job", "{}"),
    ("ranks", "ranks", "{:.0f}"),
    ("backend", "backend", "{}"),
    ("verdict", "verdict", "{}"),
    ("comm_comp_overlap_median", "comm-comp overlap p50", "{:.0%}"),
    ("collectives_matched", "collectives matched", "{:.0f}"),
    ("straggler", "straggler", "{:.0f}"),
    ("straggler_wait_caused_us", "wait it caused (ms)", "ms3"),
    ("overlap_could_save_us_per_iter", "overlap could save (ms/iter)", "ms3"),
    ("balance_could_save_us_per_iter", "balancing could save (ms/iter)", "ms3"),
    ("cuda_graphs_could_save_us_per_iter", "CUDA graphs could save (ms/iter)", "ms3"),
]

BALANCE = [
    ("job", "job", "{}"),
    ("metric", "per rank", "{}"),
    ("median_us", "median (ms)", "ms3"),
    ("max_us", "max (ms)", "ms3"),
    ("imbalance", "max/median", "{:.2f}"),
]

RANKS = [
    ("job", "job", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("verdict", "verdict", "{}"),
    ("window_us", "window (ms)", "ms"),
    ("active_span_us", "GPU span (ms)", "ms"),
    ("gpu_busy_us", "GPU busy (ms)", "ms"),
    ("computation_us", "compute (ms)", "ms"),
    ("communication_us", "comm (ms)", "ms"),
    ("comm_comp_overlap", "overlap", "{:.0%}"),
    ("exposed_communication_us", "exposed comm (ms)", "ms"),
    ("rank_wait_us", "waited for ranks (ms)", "ms"),
    ("idle_host_wait_us", "idle: host wait (ms)", "ms"),
    ("idle_rank_wait_us", "idle: rank wait (ms)", "ms"),
    ("collectives", "collectives", "{:.0f}"),
    ("overlap_could_save_us_per_iter", "overlap saves (ms/iter)", "ms3"),
    ("balance_could_save_us_per_iter", "balancing saves (ms/iter)", "ms3"),
    ("cuda_graphs_could_save_us_per_iter", "CUDA graphs save (ms/iter)", "ms3"),
]

STRAGGLERS = [
    ("job", "job", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("calls", "calls", "{:.0f}"),
    ("times_last", "last", "{:.0f}"),
    ("last_share", "last share", "{:.0%}"),
    ("wait_caused_us", "wait caused (ms)", "ms3"),
    ("mean_lateness_us", "mean lateness (ms)", "ms3"),
    ("rank_wait_us", "waited for others (ms)", "ms3"),
    ("flag", "straggler", "{}"),
]


# Each mode against the baseline, module by module (tracekit.analysis.rundiff.versus_baseline).
MODULE_DIFF = [
    ("workload", "workload", "{}"),
    ("mode", "mode", "{}"),
    ("module", "module", "{}"),
    ("busy_us_a", "busy baseline (µs/iter)", "{:.1f}"),
    ("busy_us_b", "busy mode", "{:.1f}"),
    ("d_busy_us", "Δ busy", "{:+.1f}"),
    ("d_kernels", "Δ kernels", "{:+.3g}"),
    ("d_launches", "Δ launches", "{:+.3g}"),
    ("d_idle_us", "Δ idle before", "{:+.1f}"),
    ("change", "what changed", "{}"),
]
MODULES_HINT = ("Every GPU op is attributed to the module and aten op that launched it (module scopes in eager "
                "runs, Inductor's provenance in compiled ones, the recorded capture for CUDA-graph replays); rows "
                "are modules (path cut to 3 parts), per profiled iteration, mode minus baseline, the largest "
                "|Δ busy| first; a run's rows sum to its Δ busy and Δ launches. `tracekit diff A B` gives every row.")


def module_rows(modules: pd.DataFrame, n: int = 8) -> pd.DataFrame:
    """The ``n`` rows of each run with the largest |Δ busy| (they come sorted so per run)."""
    return modules.groupby("run", sort=False).head(n) if len(modules) else modules


def comparison_view(comp: pd.DataFrame) -> pd.DataFrame:
    """``comp`` for display: speedup_range ("1.38x (1.37-1.39)", or "inconclusive
    (0.95-1.08x)" where the p10-p90 latency ranges overlap); deltas and ratios
    blank on baseline rows (zero by definition); ran_on blank unless some run ran
    on another device than its baseline."""
    if comp.empty:
        return comp
    unsure = comp["inconclusive"] if "inconclusive" in comp else [False] * len(comp)
    text = [speedup_text(s, lo, hi, bool(u))
            for s, lo, hi, u in zip(comp["speedup"], comp["speedup_low"], comp["speedup_high"], unsure)]
    view = comp.assign(speedup_range=text)
    for col in ("dominant", "dominant_profiled"):
        view[col] = view[col].replace("", None)
    is_base = view["run"] == view["baseline_run"]
    delta = [c for c in view.columns if c.startswith("d_") or c.endswith("_ratio")]
    view.loc[is_base, delta] = float("nan")
    if ((view["ran_on"] == view["baseline_ran_on"]) | (view["baseline_ran_on"] == "")).all():
        view["ran_on"] = None
    return view


def timing_view(comp: pd.DataFrame) -> pd.DataFrame:
    """The comparison rows whose timing was checked (a synchronised wall clock, several
    processes or a doubt recorded); empty when no run has any (older run.json files)."""
    if comp.empty or "wall_median_ms" not in comp:
        return comp.iloc[:0]
    checked = comp["wall_median_ms"].notna() | (comp["processes"] > 1) | (comp["timing_warning"] != "")
    return comp[checked]


def cpu_op_view(changes: pd.DataFrame, n: int = CPU_OPS_SHOWN) -> pd.DataFrame:
    """The ``n`` ops whose self time changed most, per run (``changes`` is sorted so)."""
    return changes.groupby("run", sort=False).head(n) if len(changes) else changes


def overhead_view(overhead: pd.DataFrame) -> pd.DataFrame:
    """``overhead`` for display: flag "over 10%" (the profiler lengthened the iteration
    that much), or "unreliable unprofiled timing" with no overhead figure (the profiled
    iteration was the shorter: no negative overhead is printed)."""
    unreliable = overhead["unreliable_unprofiled"].astype(bool)
    flag = overhead["flagged"].map({True: "over 10%", False: ""}).where(~unreliable, "unreliable unprofiled timing")
    return overhead.assign(flag=flag, profiler_overhead=overhead["profiler_overhead"].where(~unreliable))


def _fmt(value, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if fmt == "ms":
        return f"{value / 1e3:.2f}"
    if fmt == "ms3":
        return f"{value / 1e3:.3f}"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def headline(runs: pd.DataFrame, spec: list[tuple[str, str, str]] = HEADLINE) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells of a table of ``runs`` (``spec``: one of the lists above).

    Columns missing from ``runs`` or empty in every row are left out. In a row
    without GPU activity (``has_gpu`` False), ``GPU_ONLY`` figures read "n/a".
    """
    cols = [(c, h, f) for c, h, f in spec if c in runs.columns]
    rows = [[("n/a" if c in GPU_ONLY and r.get("has_gpu") is False else _fmt(r.get(c), f)) for c, _, f in cols]
            for r in runs.to_dict("records")]
    keep = [i for i in range(len(cols)) if any(row[i] != "-" for row in rows)]
    return [cols[i][1] for i in keep], [[row[i] for i in keep] for row in rows]


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table (``|`` in cells escaped)."""
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


_TEXT_COLUMNS = ("run", "status", "device", "verdict", "workload", "mode", "job", "per rank", "backend")


def rich_table(title: str, headers: list[str], rows: list[list[str]]) -> Table:
    """A rich table for the terminal: text columns left, numbers right."""
    table = Table(title=title, show_lines=False)
    for h in headers:
        table.add_column(h, overflow="fold",
                         justify="left" if h in _TEXT_COLUMNS else "right")
    for r in rows:
        table.add_row(*r)
    return table


def gpu_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of runs whose traces hold GPU activity."""
    return runs[runs["has_gpu"].fillna(False).astype(bool)] if "has_gpu" in runs else runs.iloc[:0]


def evidence(runs: pd.DataFrame) -> list[str]:
    """One line per run with GPU activity: ``run: verdict: the figures behind it``."""
    if "evidence" not in runs:
        return []
    return [f"{r['run']}: {r['verdict']}: {r['evidence']}" for r in runs.to_dict("records")
            if isinstance(r.get("evidence"), str) and r.get("has_gpu")]


def notes(runs: pd.DataFrame) -> list[str]:
    """One line per run that has a note or a failure reason: ``run: text``."""
    out = []
    for r in runs.to_dict("records"):
        text = "; ".join(str(t) for t in (r.get("reason"), r.get("note")) if isinstance(t, str) and t)
        if text:
            out.append(f"{r['run']}: {text}")
    return out


def trace_links(analysis: Analysis, out: Path) -> dict[str, str]:
    """run -> path of its first trace file relative to ``out`` (for links in reports)."""
    runs = analysis.runs
    if runs.empty or "trace" not in runs:
        return {}
    root = Path(analysis.root).absolute()
    return {r: os.path.relpath(root / t, Path(out).absolute())
            for r, t in zip(runs["run"], runs["trace"]) if isinstance(t, str) and t and r}


def finding_rows(comp: pd.DataFrame) -> list[tuple[str, str, str, str]]:
    """(workload, mode, finding, warning) of each row of a comparison
    (:func:`tracekit.analysis.compare.compare`) with a finding or a warning."""
    return [(r["workload"], r["mode"], r["finding"], r["warning"]) for r in comp.to_dict("records")
            if r["finding"] or r["warning"]]


def job_tables(analysis: Analysis) -> list[tuple[str, pd.DataFrame, list]]:
    """(title, table, column spec) of each job table to show, in order; [] without jobs."""
    jobs = analysis.table("jobs")
    if jobs.empty:
        return []
    stragglers = analysis.table("stragglers")
    if len(stragglers):
        stragglers = stragglers.assign(flag=stragglers["straggler"].map({True: "yes", False: ""}))
    shown = [("Distributed jobs: verdict, straggler, what each remedy could save", jobs, JOBS),
             ("Ranks of each job: compute, communication and their overlap (HTA's definition), waits",
              analysis.table("ranks"), RANKS),
             ("Balance of each job over its ranks", analysis.table("job_balance"), BALANCE),
             ("Stragglers: who arrives last at the collectives, and the wait it causes", stragglers, STRAGGLERS)]
    return [(title, df, spec) for title, df, spec in shown if len(df)]

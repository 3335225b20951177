"""Shared by the report formats: the views every report of an analysis carries (the tables
as shown: the comparison, timing, CPU ops, overhead, the jobs), the answer for each workload,
findings per run, where figures come from, links to the trace files. The lines about each run
(integrity, evidence, notes, the critical path, timers apart) are :mod:`tracekit.report.run_lines`;
how a table is drawn from its spec is :mod:`tracekit.report.draw`."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from tracekit.analysis.attribution.gpu_ops import module_label
from tracekit.analysis.critical_path import steady_rows
from tracekit.analysis.runs import Analysis
from tracekit.report.column_specs import BALANCE, CPU_OPS_SHOWN, JOB_CRITICAL_PATH, JOBS, RANKS, STRAGGLERS
from tracekit.report import decode_text
from tracekit.report.comparison_text import speedup_text

PERFETTO_HINT = ("To look inside a run, open https://ui.perfetto.dev, choose \"Open trace file\" and pick its "
                 "`.pt.trace.json.gz` (Perfetto reads the gzipped Kineto JSON as it is, in the browser).")

SOURCES = (
    "Where each figure comes from: **latency** and **speedup** from the unprofiled timed iterations "
    "(`run.json`; CUDA events on a GPU, `perf_counter` on the CPU; median, range p10-p90); **kernels, "
    "launches, GPU busy, idle by cause, profiled iter** from the profiled window's trace (per "
    "`ProfilerStep` iteration); **Δ idle** in the speedup table = unprofiled latency minus traced GPU busy "
    "per iteration (kernel times barely change under the profiler, host-side costs do), so Δ latency = "
    "Δ GPU busy + Δ idle exactly. Δ = this mode minus the baseline, per iteration.")

MODULES_HINT = ("Every GPU op is attributed to the module and aten op that launched it (module scopes in eager "
                "runs, Inductor's provenance in compiled ones, the recorded capture for CUDA-graph replays); rows "
                "are modules (path cut to 3 parts), per profiled iteration, mode minus baseline, the largest "
                "|Δ busy| first; a run's rows sum to its Δ busy and Δ launches. `tracekit diff A B` gives every row.")


def module_rows(modules: pd.DataFrame, n: int = 8) -> pd.DataFrame:
    """The ``n`` rows of each run with the largest |Δ busy| (they come sorted so per run),
    for display (:func:`module_view`)."""
    return module_view(modules.groupby("run", sort=False).head(n)) if len(modules) else modules


def module_view(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of a module table for display: the model's own row (module "") named "(model)"."""
    return rows.assign(module=rows["module"].map(module_label)) if "module" in rows else rows


def comparison_view(comp: pd.DataFrame) -> pd.DataFrame:
    """``comp`` for display: speedup_range ("1.38x (1.37-1.39)", or "inconclusive
    (0.95-1.08x)" where the p10-p90 latency ranges overlap, "inconclusive (0.63-0.68x; wall
    clock 1.27x)" where the timers contradict); deltas and ratios
    blank on baseline rows (zero by definition); ran_on blank unless some run ran
    on another device than its baseline."""
    if comp.empty:
        return comp
    unsure = comp["inconclusive"] if "inconclusive" in comp else [False] * len(comp)
    wall = comp["wall_speedup"] if "wall_speedup" in comp else [math.nan] * len(comp)
    text = [speedup_text(s, lo, hi, bool(u), w)
            for s, lo, hi, u, w in zip(comp["speedup"], comp["speedup_low"], comp["speedup_high"], unsure, wall)]
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
    processes or a doubt recorded), with latency_range and wall_range ("0.070-0.090": p10-p90,
    ms; None where unknown); empty when no run has any (older run.json files)."""
    if comp.empty or "wall_median_ms" not in comp:
        return comp.iloc[:0]
    checked = comp["wall_median_ms"].notna() | (comp["processes"] > 1) | (comp["timing_warning"] != "")
    timed = comp[checked]
    ms = lambda col: timed[col] if col in timed else [math.nan] * len(timed)  # noqa: E731
    return timed.assign(**{f"{name}_range": [f"{lo:.3f}-{hi:.3f}" if lo == lo and hi == hi else None
                                             for lo, hi in zip(ms(f"{name}_p10_ms"), ms(f"{name}_p90_ms"))]
                           for name in ("latency", "wall")})


def decode_view(comp: pd.DataFrame) -> pd.DataFrame:
    """The comparison rows of decode runs (:func:`tracekit.report.decode_text.is_decode`), with
    latency_range ("0.301-0.322": ms per token, p10-p90); empty where there are none."""
    if comp.empty or "tokens_per_step" not in comp:
        return comp.iloc[:0]
    rows = comp[[decode_text.is_decode(r) for r in comp.to_dict("records")]]
    return rows.assign(latency_range=[f"{lo:.3f}-{hi:.3f}" if lo == lo and hi == hi else None
                                      for lo, hi in zip(rows["latency_p10_ms"], rows["latency_p90_ms"])])


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


def gpu_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of runs whose traces hold GPU activity."""
    return runs[runs["has_gpu"].fillna(False).astype(bool)] if "has_gpu" in runs else runs.iloc[:0]


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
    (:func:`tracekit.analysis.comparison.compare.compare`) with a finding or a warning."""
    return [(r["workload"], r["mode"], r["finding"], r["warning"]) for r in comp.to_dict("records")
            if r["finding"] or r["warning"]]


def job_path(split: pd.DataFrame) -> pd.DataFrame:
    """Per (job, rank): the mean of latency_us and each part over its steady iterations
    (:func:`tracekit.analysis.critical_path.steady_rows`, as ``tracekit whatif`` averages them)."""
    if split.empty:
        return split
    return steady_rows(split).groupby(["job", "rank"], as_index=False).mean(numeric_only=True)


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
             ("Stragglers: who arrives last at the collectives, and the wait it causes", stragglers, STRAGGLERS),
             ("Critical path of each job through its collectives, per rank (mean µs of an iteration)",
              job_path(analysis.table("job_critical_path")), JOB_CRITICAL_PATH)]
    return [(title, df, spec) for title, df, spec in shown if len(df)]


def _verdicts(runs: pd.DataFrame) -> dict[str, str]:
    """run -> the verdict of its first trace, for runs with GPU activity."""
    if runs.empty or "verdict" not in runs or "has_gpu" not in runs:
        return {}
    first = runs.drop_duplicates("run")
    return {r: v for r, v, g in zip(first["run"], first["verdict"], first["has_gpu"])
            if pd.notna(g) and bool(g) and isinstance(v, str)}


def _why(row: dict, verdicts: str) -> str:
    """The second line of an answer: the split of Δ latency (and the runs' verdicts), or a CPU
    run's Δ time in CPU ops."""
    if row["dominant"]:
        return (f"why: Δ GPU busy {row['d_busy_per_iter_ms']:+.3f} + Δ idle {row['d_idle_est_ms']:+.3f} "
                f"ms/{decode_text.per(row)}: "
                f"{'GPU busy' if row['dominant'] == 'busy' else 'idle'} dominates"
                + (f" ({verdicts})" if verdicts else ""))
    d_cpu = row.get("d_cpu_op_per_iter_ms")
    cpu_only = pd.notna(row.get("has_gpu")) and not row.get("has_gpu")
    if cpu_only and isinstance(d_cpu, float) and not math.isnan(d_cpu):
        return (f"why: no GPU activity (CPU only): time in CPU ops {row['cpu_op_per_iter_ms'] - d_cpu:.3f} -> "
                f"{row['cpu_op_per_iter_ms']:.3f} ms per profiled iteration")
    return ""


def answers(comp: pd.DataFrame, runs: pd.DataFrame, baseline: str) -> list[tuple[str, str]]:
    """The answer for each workload of a comparison (:func:`tracekit.analysis.comparison.compare.compare`),
    in one or two lines: (its fastest mode whose speedup is conclusive, that speedup with its
    p10-p90 range and the latencies; "why: " Δ GPU busy + Δ idle per iteration, which dominates
    and the verdicts of baseline and mode, or for CPU-only runs the time in CPU ops), "" as
    the second line where there is nothing to say. A workload with no conclusive speedup,
    only its baseline, or no baseline says so. A decode workload's answer speaks in tokens/s and ms per
    token (:func:`tracekit.report.decode_text.answer`). ``runs``: ``Analysis.runs`` (the verdicts)."""
    if comp.empty:
        return []
    verdicts = _verdicts(runs)
    out = []
    for workload, g in comp.groupby("workload", sort=False):
        rows = g.to_dict("records")
        base = next((r for r in rows if r["run"] == r["baseline_run"]), None)
        failed = "".join(f"; {r['mode']} {r['status']}" for r in rows if r["status"] != "ok")
        tried = [r for r in rows if r is not base and r["status"] == "ok" and not math.isnan(r["speedup"])]
        if base is None:
            timed = [f"{r['mode']} {r['latency_median_ms']:.3f} ms" for r in rows
                     if r["status"] == "ok" and not math.isnan(r["latency_median_ms"])]
            out.append((f"{workload}: no ok {baseline} run to compare with{failed}", ", ".join(timed)))
            continue
        before = f"{baseline} {base['latency_median_ms']:.3f} ms"
        sure = [r for r in tried if not r["inconclusive"]]
        text = lambda r: speedup_text(r["speedup"], r["speedup_low"], r["speedup_high"],  # noqa: E731
                                      bool(r["inconclusive"]), r.get("wall_speedup", math.nan))
        if not tried:
            out.append((f"{workload}: only {before}{failed}",
                        f"verdict: {verdicts[base['run']]}" if base["run"] in verdicts else ""))
        elif not sure:
            out.append((f"{workload}: no mode is conclusively faster or slower than {before}{failed}",
                        "; ".join(f"{r['mode']} {text(r)}" for r in tried)))
        else:
            r = max(sure, key=lambda r: r["speedup"])
            slower = f"every mode is slower than {baseline}, the least: " if r["speedup"] < 1 else ""
            device = (f" (ran on {r['ran_on']}, {baseline} on {r['baseline_ran_on']}: DIFFERENT DEVICE)"
                      if r["ran_on"] != r["baseline_ran_on"] else "")
            v = [verdicts[x["run"]] for x in (base, r) if x["run"] in verdicts]
            first = (decode_text.answer(r, base, text(r), baseline, device, failed) if decode_text.is_decode(r)
                     else f"{slower}{r['mode']} {text(r)} over {baseline}{device} "
                     f"({base['latency_median_ms']:.3f} -> {r['latency_median_ms']:.3f} ms){failed}")
            out.append((f"{workload}: {first}", _why(r, " -> ".join(dict.fromkeys(v)))))
    return out


def critical_path_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that have a critical path (``tracekit analyze --critical-path``), for the
    CRITICAL_PATH table; empty when none was asked for or found."""
    if "cp_latency_us" not in runs:
        return runs.iloc[0:0]
    return runs[runs["cp_latency_us"].notna()]

"""What every report of an analysis shows, whatever its format: the findings per run,
where each figure comes from, and links to the trace files."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from tracekit.analysis.runs import Analysis

PERFETTO_HINT = ("To look inside a run, open https://ui.perfetto.dev, choose \"Open trace file\" and pick its "
                 "`.pt.trace.json.gz` (Perfetto reads the gzipped Kineto JSON as it is, in the browser).")

SOURCES = (
    "Where each figure comes from: **latency** and **speedup** from the unprofiled timed iterations "
    "(`run.json`; CUDA events on a GPU, `perf_counter` on the CPU; median, range p10-p90); **kernels, "
    "launches, GPU busy, idle by cause, profiled iter** from the profiled window's trace (per "
    "`ProfilerStep` iteration); **Δ idle** in the speedup table = unprofiled latency minus traced GPU busy "
    "per iteration (kernel times barely change under the profiler, host-side costs do), so Δ latency = "
    "Δ GPU busy + Δ idle exactly. Δ = this mode minus the baseline, per iteration.")


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

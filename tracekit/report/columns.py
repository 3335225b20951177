"""The headline columns shown in the terminal and in summary.md, with their units."""

from __future__ import annotations

import math

import pandas as pd

# (column in Analysis.runs, header shown, format)
HEADLINE = [
    ("run", "run", "{}"),
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
    """Headers and formatted cells of a table of ``runs`` (``spec``: HEADLINE or IDLE).

    Columns missing from ``runs`` or empty in every row are left out.
    """
    cols = [(c, h, f) for c, h, f in spec if c in runs.columns]
    rows = [[_fmt(r.get(c), f) for c, _, f in cols] for r in runs.to_dict("records")]
    keep = [i for i in range(len(cols)) if any(row[i] != "-" for row in rows)]
    return [cols[i][1] for i in keep], [[row[i] for i in keep] for row in rows]


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

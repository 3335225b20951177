"""The timeline figure of a report: one marked iteration per mode, GPU ops per stream above
the host's CUDA API calls on one time axis (matplotlib, Agg), drawn from the ``timeline`` table
(:mod:`tracekit.analysis.metrics.timeline`); :mod:`tracekit.report.formats.plots` writes it."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from tracekit.analysis.metrics.timeline import CPU_LANE
from tracekit.report.charts import new_figure, no_data, wrapped

TIMELINE_COLORS = {"kernel": "#1f77b4", "memcpy": "#2ca02c", "memset": "#17becf",
                   "launch": "#ff7f0e", "sync": "#d62728", "other API": "#8c8c8c"}


def with_gpu_ops(timeline: pd.DataFrame) -> set[str]:
    """The runs whose timeline holds GPU ops."""
    if "run" not in timeline:
        return set()
    return set(timeline.loc[timeline["kind"].isin(["kernel", "memcpy", "memset"]), "run"])


def timeline_figure(comp: pd.DataFrame, timeline: pd.DataFrame, title: str) -> Figure:
    """One marked iteration per mode: GPU lanes above the CPU's CUDA API lane, one
    shared time axis (ms since the iteration's marker began)."""
    runs = [(run, mode) for run, mode in zip(comp["run"], comp["mode"]) if run in with_gpu_ops(timeline)]
    fig = new_figure(12, 1.0 + 1.45 * max(len(runs), 1))
    if not runs:
        no_data(fig.subplots(), "no marked iterations with GPU activity in these traces")
        fig.suptitle(wrapped(fig, title, 12, bold=True), fontsize=12, fontweight="bold")
        return fig
    axes = np.atleast_1d(fig.subplots(len(runs), 1, sharex=True))
    for ax, (run, mode) in zip(axes, runs):
        t = timeline[timeline["run"] == run]
        lanes = sorted(set(t["lane"]) - {CPU_LANE}) + [CPU_LANE]
        y = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}  # GPU lanes on top, CPU at the bottom
        marker = t[t["kind"] == "iteration"].iloc[0]
        ax.axvspan(0, marker["dur_us"] / 1e3, color="#f2f2f2", zorder=0)
        t, shift_us = _close_queue_gap(t, marker["dur_us"])
        if shift_us:
            x_break = (marker["dur_us"] * 1.1) / 1e3
            ax.axvline(x_break, color="black", linestyle=(0, (2, 2)), linewidth=1)
            ax.text(x_break, len(lanes) - 0.45, f"  GPU lane cut here: its ops ran {shift_us / 1e3:.1f} ms later "
                    "(queued behind earlier iterations; the host runs ahead)", fontsize=8, va="top")
        for kind, color in TIMELINE_COLORS.items():
            ev = t[t["kind"] == kind]
            for lane, grp in ev.groupby("lane"):
                spans = list(zip(grp["start_us"] / 1e3, np.maximum(grp["dur_us"] / 1e3, 0.002)))
                ax.broken_barh(spans, (y[lane] - 0.35, 0.7), facecolors=color, linewidth=0)
        gpu = t[t["kind"].isin(["kernel", "memcpy", "memset"])]
        launches = (t["kind"] == "launch").sum()
        ax.set_yticks(list(y.values()), [lane.replace("CPU: ", "CPU ") for lane in y], fontsize=8)
        ax.set_ylim(-0.6, len(lanes) - 0.4)
        ax.set_title(f"{mode}: {marker['name']}, {marker['dur_us'] / 1e3:.2f} ms on the CPU; "
                     f"{len(gpu)} GPU ops from {launches} launch call(s)", fontsize=9, loc="left")
    axes[-1].set_xlabel("time since the iteration began (ms); grey band: the iteration's ProfilerStep marker")
    kinds = set(timeline.loc[timeline["run"].isin([r for r, _ in runs]), "kind"])
    handles = [Patch(color=c, label=k) for k, c in TIMELINE_COLORS.items() if k in kinds]
    fig.legend(handles=handles, loc="outside upper right", ncol=len(handles), fontsize=8, frameon=False)
    fig.suptitle(wrapped(fig, title, 12, fig.get_figwidth() * 0.6, bold=True), fontsize=12, fontweight="bold",
                 x=0.01, ha="left")
    return fig


def _close_queue_gap(t: pd.DataFrame, marker_us: float) -> tuple[pd.DataFrame, float]:
    """When the iteration's GPU ops start more than one iteration after its CPU side
    ended (the GPU is busy with earlier iterations' queued work), move them left
    so that they begin just after the marker: returns (events, shift in µs, 0 if none)."""
    gpu = t["kind"].isin(["kernel", "memcpy", "memset"])
    late = gpu & (t["start_us"] > marker_us)
    if not late.any():
        return t, 0.0
    shift = float(t.loc[late, "start_us"].min() - marker_us * 1.1)
    if shift <= marker_us:
        return t, 0.0
    return t.assign(start_us=t["start_us"].where(~late, t["start_us"] - shift)), shift

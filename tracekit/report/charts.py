"""The figures of an analysis' report, drawn from metric tables (matplotlib, Agg; no pyplot
state, safe in any process); :mod:`tracekit.report.formats.plots` writes them.

Per workload (the rows of :func:`tracekit.analysis.comparison.compare.compare` for it):

* :func:`workload_figure`: four panels: unprofiled latency per mode with its
  p10-p90 range; GPU busy / host wait / other idle per profiled iteration
  (stacked); kernels and host launches per iteration; kernel-duration CDF.
* :func:`tracekit.report.timeline_figure.timeline_figure`: one marked iteration per
  mode: GPU ops per stream above the host's CUDA API calls, on one time axis.

Across workloads, :func:`overview_figure`: the stacked busy/idle bars of every
workload side by side. The plots take metric tables, never traces.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from tracekit.analysis.attribution.gpu_ops import module_label
from tracekit.io import write_atomic

DPI = 100
MODE_COLORS = {"eager": "#7f7f7f", "default": "#1f77b4", "reduce-overhead": "#2ca02c",
               "max-autotune": "#9467bd", "max-autotune-no-cudagraphs": "#8c564b"}
OTHER_COLORS = ["#d62728", "#e377c2", "#17becf", "#bcbd22", "#ff7f0e"]
BUSY, HOST_WAIT, OTHER_IDLE = "#1f77b4", "#ff7f0e", "#c7c7c7"


def mode_color(mode: str, modes: list[str]) -> str:
    """A fixed color for the common modes, then a palette in the order given."""
    if mode in MODE_COLORS:
        return MODE_COLORS[mode]
    rest = [m for m in modes if m not in MODE_COLORS]
    return OTHER_COLORS[rest.index(mode) % len(OTHER_COLORS)] if mode in rest else OTHER_COLORS[0]


def slug(text: str) -> str:
    """A file-name-safe form of a workload label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


def new_figure(w: float, h: float) -> Figure:
    """A figure of ``w`` x ``h`` inches with its own Agg canvas (no pyplot state), constrained layout."""
    fig = Figure(figsize=(w, h), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def wrapped(fig: Figure, text: str, fontsize: float, width_in: float | None = None, bold: bool = False) -> str:
    """``text`` with its words wrapped into lines that fit ``width_in`` inches (default: the
    figure's width, less a margin) at ``fontsize``, measured by the figure's renderer: a title
    wider than its figure is cut at both ends (``constrained`` layout places, but does not
    shrink, a figure's suptitle). Lines already broken stay broken; a word wider than a line
    is folded."""
    from matplotlib.font_manager import FontProperties

    renderer = fig.canvas.get_renderer()
    prop = FontProperties(size=fontsize, weight="bold" if bold else "normal")
    limit = (width_in or fig.get_figwidth()) * fig.dpi * 0.96
    width = lambda s: renderer.get_text_width_height_descent(s, prop, ismath=False)[0]  # noqa: E731
    lines = []
    for line in text.split("\n"):
        current = ""
        for word in line.split(" "):
            candidate = f"{current} {word}" if current else word
            if current and width(candidate) > limit:
                lines.append(current)
                candidate = word
            while width(candidate) > limit and len(candidate) > 1:  # a word wider than the line: folded
                cut = max(k for k in range(1, len(candidate)) if k == 1 or width(candidate[:k]) <= limit)
                lines.append(candidate[:cut])
                candidate = candidate[cut:]
            current = candidate
        lines.append(current)
    return "\n".join(lines)


def no_data(ax, text: str) -> None:
    """Write ``text`` (why there is nothing to plot) in the middle of ``ax``, without ticks."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555555", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _labels(modes: list[str]) -> list[str]:
    return [m.replace("-no-cudagraphs", "\n-no-cudagraphs") for m in modes]


def _rows(ax, comp: pd.DataFrame, column: str, empty: str) -> pd.DataFrame:
    """The rows of ``comp`` with a value in ``column`` (positive, for counts); when there
    are none, ``ax`` says ``empty`` instead."""
    rows = comp[comp[column].notna()]
    if rows.empty or not (rows[column] > 0).any():
        no_data(ax, empty)
        return rows.iloc[:0]
    return rows


def _speedups(rows: pd.DataFrame) -> list[str]:
    """Each row's speedup as a plot label: "1.38x", "inconclusive" where its p10-p90
    range overlaps the baseline's (tracekit.analysis.comparison.trust), "" where unknown."""
    unsure = rows["inconclusive"] if "inconclusive" in rows else pd.Series(False, index=rows.index)
    return ["" if not np.isfinite(s) else "inconclusive" if u else f"{s:.2f}x"
            for s, u in zip(rows["speedup"], unsure.fillna(False))]


def latency_axes(ax, comp: pd.DataFrame) -> None:
    """Unprofiled latency (median) per mode, error bars p10-p90, speedup over the bars."""
    rows = _rows(ax, comp, "latency_median_ms", "no unprofiled latency\n(runs without run.json)")
    if rows.empty:
        return
    x = np.arange(len(rows))
    med = rows["latency_median_ms"].to_numpy()
    err = np.vstack([med - rows["latency_p10_ms"].to_numpy(), rows["latency_p90_ms"].to_numpy() - med])
    modes = list(rows["mode"])
    ax.bar(x, med, color=[mode_color(m, modes) for m in modes], yerr=np.nan_to_num(err), capsize=4,
           error_kw={"elinewidth": 1, "ecolor": "#333333"})
    for xi, m, top, s in zip(x, med, rows["latency_p90_ms"].fillna(rows["latency_median_ms"]), _speedups(rows)):
        label = f"{m:.2f} ms" + (f"\n{s}" if s else "")
        ax.text(xi, top, label, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, _labels(modes), fontsize=8)
    ax.set_ylabel("latency per iteration (ms)")
    ax.set_ylim(0, float(np.nanmax(rows["latency_p90_ms"].fillna(rows["latency_median_ms"]))) * 1.3)
    ax.set_title("Unprofiled latency (median, bars p10-p90)\nand speedup over the baseline", fontsize=10)


def _idle_parts(comp: pd.DataFrame) -> list[tuple[str, np.ndarray, str]]:
    """(label, ms per iteration, color) segments stacked above GPU busy."""
    idle = comp["idle_per_iter_ms"].to_numpy()
    if "idle_host_wait_per_iter_ms" in comp:
        host = comp["idle_host_wait_per_iter_ms"].to_numpy()
        return [("host wait (GPU waits for a launch)", host, HOST_WAIT),
                ("other idle (launch latency, sync, other)", idle - host, OTHER_IDLE)]
    return [("GPU idle", idle, OTHER_IDLE)]


def busy_idle_axes(ax, comp: pd.DataFrame, legend: bool = True) -> None:
    """Per profiled iteration: GPU busy, then idle by cause, stacked; the unprofiled
    latency as a black tick on each bar."""
    rows = _rows(ax, comp, "busy_per_iter_ms", "no GPU activity in these traces")
    if rows.empty:
        return
    x = np.arange(len(rows))
    busy = rows["busy_per_iter_ms"].to_numpy()
    ax.bar(x, busy, color=BUSY, label="GPU busy (kernels, memcpy, memset)")
    bottom = busy.copy()
    for label, part, color in _idle_parts(rows):
        ax.bar(x, part, bottom=bottom, color=color, label=label)
        bottom = bottom + np.nan_to_num(part)
    lat = rows["latency_median_ms"].to_numpy()
    ax.hlines(lat, x - 0.3, x + 0.3, colors="black", linewidth=2.5, zorder=3, label="unprofiled latency (median)")
    ax.set_xticks(x, _labels(list(rows["mode"])), fontsize=8)
    ax.set_ylabel("ms per profiled iteration")
    ax.set_ylim(0, float(np.nanmax(np.r_[bottom, lat])) * (1.45 if legend else 1.1))
    if legend:
        ax.legend(fontsize=7, loc="upper right", frameon=False)
    ax.set_title("GPU busy and idle per profiled iteration", fontsize=10)


def kernels_launches_axes(ax, comp: pd.DataFrame) -> None:
    """Kernels executed and host launches per iteration, side by side per mode."""
    rows = _rows(ax, comp, "kernels_per_iter", "no kernels in these traces")
    if rows.empty:
        return
    x = np.arange(len(rows))
    w = 0.38
    for off, col, label, color in ((-w / 2, "kernels_per_iter", "kernels executed", "#1f77b4"),
                                   (w / 2, "launches_per_iter", "host launches", "#ff7f0e")):
        vals = rows[col].to_numpy()
        ax.bar(x + off, vals, w, label=label, color=color)
        for xi, v in zip(x + off, vals):
            ax.text(xi, v, f"{v:.0f}" if v >= 10 else f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, _labels(list(rows["mode"])), fontsize=8)
    ax.set_ylabel("per iteration")
    ax.set_ylim(0, float(rows[["kernels_per_iter", "launches_per_iter"]].max().max()) * 1.3)
    ax.legend(fontsize=8, frameon=False, loc="upper right")
    ax.set_title("Kernels vs host launches per iteration\n(a CUDA graph replays many kernels per launch)",
                 fontsize=10)


def kernel_cdf_axes(ax, comp: pd.DataFrame, quantiles: pd.DataFrame) -> None:
    """Cumulative share of kernels vs kernel duration (µs, log scale), one line per mode."""
    modes = list(comp["mode"])
    drawn = False
    for run, mode in zip(comp["run"], modes):
        q = quantiles[quantiles["run"] == run] if "run" in quantiles else quantiles.iloc[:0]
        if q.empty:
            continue
        ax.step(q["dur_us"].clip(lower=0.1), q["quantile"], where="post", label=mode, color=mode_color(mode, modes))
        drawn = True
    if not drawn:
        no_data(ax, "no kernels in these traces")
        return
    ax.set_xscale("log")
    ax.set_xlabel("kernel duration (µs, log scale)")
    ax.set_ylabel("share of kernels ≤ duration")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    ax.set_title("Kernel-duration CDF", fontsize=10)


def workload_figure(comp: pd.DataFrame, quantiles: pd.DataFrame, title: str) -> Figure:
    """The four panels of one workload (``comp``: its comparison rows, baseline first);
    latency alone when its traces hold no GPU activity."""
    if comp["busy_per_iter_ms"].isna().all():
        fig = new_figure(6, 4.4)
        latency_axes(fig.subplots(), comp)
        fig.suptitle(wrapped(fig, f"{title}\n(no GPU activity in the traces: CPU only)", 11, bold=True), fontsize=11,
                     fontweight="bold")
        return fig
    fig = new_figure(12, 8.2)
    axes = fig.subplots(2, 2)
    latency_axes(axes[0, 0], comp)
    busy_idle_axes(axes[0, 1], comp)
    kernels_launches_axes(axes[1, 0], comp)
    kernel_cdf_axes(axes[1, 1], comp, quantiles)
    fig.suptitle(wrapped(fig, title, 12, bold=True), fontsize=12, fontweight="bold")
    return fig


def overview_figure(comp: pd.DataFrame, baseline: str) -> Figure:
    """GPU busy / idle per profiled iteration for every workload with GPU activity,
    and each mode's unprofiled speedup over ``baseline`` written under its bar."""
    groups = [(w, g) for w, g in comp.groupby("workload", sort=False) if g["busy_per_iter_ms"].notna().any()]
    fig = new_figure(max(4.0, 3.2 * len(groups)), 4.8)
    if not groups:
        no_data(fig.subplots(), "no GPU activity in these traces")
        return fig
    axes = np.atleast_1d(fig.subplots(1, len(groups)))
    for i, (ax, (workload, g)) in enumerate(zip(axes, groups)):
        busy_idle_axes(ax, g, legend=False)
        ax.set_title(wrapped(fig, workload, 9, 0.75 * fig.get_figwidth() / len(groups)), fontsize=9)  # less the y axis
        ax.set_xticks(range(len(g)), [f"{m}\n{s}" if s else m for m, s in zip(g["mode"], _speedups(g))],
                      fontsize=7)
        if i:
            ax.set_ylabel("")
    handles, labels = axes[0].get_legend_handles_labels()
    # As many legend entries a row as the figure holds (about 3 inches each at 8 points).
    fig.legend(handles, labels, loc="outside lower center", ncol=max(1, min(len(labels), int(fig.get_figwidth() // 3))),
               fontsize=8, frameon=False)
    fig.suptitle(wrapped(fig, f"GPU busy and idle per profiled iteration; unprofiled speedup over {baseline} under "
                              "each bar", 11, bold=True), fontsize=11, fontweight="bold")
    return fig


def modules_figure(busy: pd.DataFrame, title: str, top: int = 12) -> Figure:
    """GPU busy time per iteration of each kind of module (``blocks.*.mlp``), one bar per
    mode: the ``top`` kinds with the most busy time in any mode, unattributed time too."""
    modes = list(dict.fromkeys(busy["mode"]))
    table = busy.pivot_table(index="module", columns="mode", values="busy_per_iter_us", aggfunc="sum",
                             fill_value=0.0).reindex(columns=modes, fill_value=0.0)
    table = table.loc[table.max(axis=1).sort_values(ascending=False).index[:top]].iloc[::-1]
    fig = new_figure(8.0, 1.2 + 0.32 * len(table) * max(1, len(modes)) ** 0.5)
    ax = fig.subplots()
    height = 0.8 / max(1, len(modes))
    y = np.arange(len(table))
    for i, mode in enumerate(modes):
        ax.barh(y + (len(modes) - 1 - i - (len(modes) - 1) / 2) * height, table[mode] / 1e3, height,
                label=mode, color=mode_color(mode, modes))
    ax.set_yticks(y, [module_label(m) for m in table.index], fontsize=8)
    ax.set_xlabel("GPU busy per profiled iteration (ms)")
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(wrapped(fig, title, 10), fontsize=10)
    return fig


def save(fig: Figure, path: Path, dpi: int = DPI) -> Path:
    """Write ``fig`` as a PNG of at most 256 colors, atomically (folders created).

    A plot's flat fills, lines and anti-aliased text quantize to a palette (Pillow's
    fast octree) without visible change, and the file is about 3.6x smaller than in
    full color (4.2 to 1.2 MB over the project's H100 reports).
    """
    rgba = io.BytesIO()
    fig.savefig(rgba, format="png", dpi=dpi)
    palette = Image.open(rgba).convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE)
    png = io.BytesIO()
    palette.save(png, format="PNG", optimize=True)
    return write_atomic(path, png.getvalue())

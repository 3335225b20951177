"""The counters report format: summary.md, kernels.csv, classes.csv, counters.json and
roofline.png of hardware counters, and their terminal tables.

Takes a :class:`tracekit.analysis.counters.CountersResult` (``Report.source``: the run's title);
never re-reads ncu's CSV.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from rich.console import Console

from tracekit.analysis.counters import BOUND_PCT, CountersResult
from tracekit.analysis.peaks import PEAKS
from tracekit.io import write_atomic, write_json
from tracekit.report.base import Renderer, Report, register
from tracekit.report.draw import headline, markdown_table
from tracekit.report.fit import Fit

RUN = [("device", "device", "{}"), ("kernels", "kernels", "{:.0f}"), ("matched", "joined to trace", "{:.0f}"),
       ("weight_ms", "kernel time (ms)", "{:.3f}"), ("dram_GB", "DRAM GB", "{:.3f}"),
       ("bw_GBps", "DRAM GB/s", "{:.0f}"), ("TFLOPs", "TFLOP/s", "{:.2f}"),
       ("memory_share", "memory-bound", "{:.0%}"), ("compute_share", "compute-bound", "{:.0%}"),
       ("neither_share", "neither", "{:.0%}")]
CLASSES = [("class", "class", "{}"), ("kernels", "kernels", "{:.0f}"), ("share", "time share", "{:.1%}"),
           ("dram_GB", "DRAM GB", "{:.3f}"), ("bw_GBps", "DRAM GB/s", "{:.0f}"), ("TFLOPs", "TFLOP/s", "{:.2f}"),
           ("memory_share", "memory-bound", "{:.0%}"), ("compute_share", "compute-bound", "{:.0%}"),
           ("neither_share", "neither", "{:.0%}")]
KERNELS = [("id", "id", "{}"), ("name", "kernel", "{}"), ("class", "class", "{}"),
           ("weight_us", "time (µs)", "{:.1f}"), ("dram_MB", "DRAM MB", "{:.2f}"), ("bw_GBps", "GB/s", "{:.0f}"),
           ("TFLOPs", "TFLOP/s", "{:.3f}"), ("intensity_FLOP_per_B", "FLOP/B", "{:.2f}"),
           ("bw_pct_peak", "% peak BW", "{:.0f}"), ("compute_pct_peak", "% peak FLOP/s", "{:.0f}"),
           ("tensor_pipe_pct", "tensor pipe %", "{:.0f}"), ("bound", "bound", "{}")]
TOP_KERNELS = 40


def _display(df: pd.DataFrame) -> pd.DataFrame:
    out = df.assign(dram_GB=df["dram_bytes"] / 1e9, dram_MB=df["dram_bytes"] / 1e6)
    if "kernel" in df:
        out["name"] = [k if len(k) <= 70 else k[:67] + "..." for k in df["kernel"]]
    return out


def _run_frame(result: CountersResult) -> pd.DataFrame:
    return _display(pd.DataFrame([result.run]).assign(weight_ms=result.run["weight_us"] / 1e3))


def _top(result: CountersResult) -> pd.DataFrame:
    return _display(result.kernels.sort_values("weight_us", ascending=False).head(TOP_KERNELS))


def notes(result: CountersResult) -> list[str]:
    """The caveats of a counters result, one line each: profiled kernels the trace it was joined to
    lacks (weighted by ncu's time), a device without datasheet peaks (:mod:`tracekit.analysis.peaks`),
    no trace of the run to join (``tracekit counters --model``)."""
    run, out = result.run, []
    unmatched = run["kernels"] - run["matched"]
    if run["trace"] and unmatched:
        out.append(f"{unmatched} of {run['kernels']} profiled kernels have no kernel of that name left in the trace; "
                   "they are weighted by ncu's time")
    if result.peaks is None:
        out.append(f"no peak figures for device {run['device']!r} (tracekit/analysis/peaks.py knows "
                   f"{', '.join(PEAKS)}); percent of peak and bound are not computed")
    if result.no_trace_under:
        out.append(f"no trace of this run under {result.no_trace_under}: kernels are weighted by ncu's time "
                   "(run `tracekit trace` with the same options first to weight them by the real run)")
    return out


def summary_markdown(result: CountersResult, title: str) -> str:
    """summary.md: the run's bound shares, the class table, the top kernels, the peaks used and how."""
    run = result.run
    parts = [f"# tracekit counters: {title}\n",
             f"Counters: `{run['csv']}` (Nsight Compute). Trace: `{run['trace'] or 'none'}`"
             + (f" (joined by {run['join']})" if run["join"] else "") + ". "
             "GB/s and TFLOP/s are DRAM bytes and FLOPs over ncu's kernel time; shares of time weight each "
             "kernel by its duration in the trace where joined, else by ncu's time.\n",
             markdown_table(*headline(_run_frame(result), RUN)),
             "\n## By kernel class\n", markdown_table(*headline(_display(result.classes), CLASSES)),
             f"\n## Kernels (top {TOP_KERNELS} by time)\n", markdown_table(*headline(_top(result), KERNELS)),
             f"\nA kernel is memory-bound (compute-bound) when its DRAM bandwidth (FLOP/s, or tensor-pipe busy "
             f"percent) reaches {BOUND_PCT:.0f}% of the device's peak and exceeds the other; below "
             f"{BOUND_PCT:.0f}% on both it is neither (latency- or launch-dominated). Threshold: Nsight Compute's "
             "SpeedOfLight rule.\n"]
    if result.peaks:
        parts += ["## Peaks used\n", markdown_table(["figure", "value", "unit", "source"],
                                                     [[r["figure"], f"{r['value']:g}", r["unit"], r["source"]]
                                                      for r in result.peaks.table()])]
    if said := notes(result):
        parts += ["\nNotes:\n"] + [f"- {n}" for n in said]
    parts.append("\n![roofline](roofline.png)")
    return "\n".join(parts) + "\n"


def roofline_png(result: CountersResult, path: Path, title: str) -> Path:
    """A roofline plot: each kernel a point (arithmetic intensity, achieved TFLOP/s) sized by its time,
    with the device's DRAM and compute roofs. Kernels without FLOPs or DRAM bytes cannot be placed on
    log axes; the caption counts them."""
    from tracekit.report.charts import new_figure, save  # matplotlib's import only when a report has plots

    k = result.kernels
    shown = k[(k["flops"] > 0) & (k["dram_bytes"] > 0)]
    fig = new_figure(8, 5.5)
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_yscale("log")
    size = 400 * shown["weight_us"] / max(k["weight_us"].max(), 1e-9)
    for cls, g in shown.groupby("class"):
        ax.scatter(g["intensity_FLOP_per_B"], g["TFLOPs"], s=size[g.index].clip(lower=8), alpha=0.6, label=cls)
    lo = min(shown["intensity_FLOP_per_B"].min(), 0.01) / 2 if len(shown) else 0.01
    hi = max(shown["intensity_FLOP_per_B"].max(), 1000) * 2 if len(shown) else 1000
    if result.peaks:
        bw = result.peaks.dram_GBps / 1e3  # TFLOP/s per FLOP/B
        used = ["fp32"] + [c[len("flops_"):] for c in k if c.startswith("flops_tensor") and k[c].fillna(0).sum() > 0]
        for kind in used:
            peak = result.peaks.TFLOPs.get(kind)
            if peak:
                ridge = peak / bw
                ax.plot([lo, ridge, hi], [bw * lo, peak, peak], lw=1, color="gray")
                ax.annotate(f"{kind} {peak:g} TFLOP/s", (hi, peak), ha="right", va="bottom", fontsize=8)
        ax.annotate(f"DRAM {result.peaks.dram_GBps:g} GB/s", (lo, bw * lo), rotation=0, fontsize=8, va="bottom")
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(f"{title}\n{len(shown)} of {len(k)} kernels shown (others have no FLOPs or no DRAM bytes); "
                 "size = time", fontsize=9)
    if len(shown):
        ax.legend(fontsize=8, loc="lower right")
    return save(fig, path, dpi=120)


@register
class Counters(Renderer):
    name = "counters"
    takes = CountersResult

    def write(self, report: Report) -> list[Path]:
        """summary.md, kernels.csv, classes.csv, counters.json and roofline.png under ``report.out``."""
        result, out, title = report.data, report.out, report.source
        return [write_atomic(out / "summary.md", summary_markdown(result, title)),
                write_atomic(out / "kernels.csv", result.kernels.to_csv(index=False)),
                write_atomic(out / "classes.csv", result.classes.to_csv(index=False)),
                write_json(out / "counters.json", {**result.to_dict(), "notes": notes(result)}),
                roofline_png(result, out / "roofline.png", title)]

    def show(self, report: Report, console: Console) -> None:
        """The run row, the class table and the top kernels, then the notes."""
        result, fit = report.data, Fit(report.options.get("wide", False))
        fit.print(console, f"counters: {report.source}", *headline(_run_frame(result), RUN))
        fit.print(console, "by kernel class", *headline(_display(result.classes), CLASSES))
        fit.print(console, "top kernels by time", *headline(_top(result).head(15), KERNELS))
        for note in notes(result):
            console.print(f"  note: {note}", highlight=False)

"""The plots format: ``plots/*.png``, per workload and across them (drawn by
:mod:`tracekit.report.charts`; matplotlib is imported only when there is a plot, its
import alone takes about 0.3 s). Registered before the pages, which show the PNGs it
records in ``Report.plots``. PNGs of an earlier report in ``plots/`` that this one does not
draw are removed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tracekit.analysis.result import Result
from tracekit.report.base import Renderer, Report, register


@register
class Plots(Renderer):
    name = "plots"
    takes = Result
    order = 0  # first: the pages show its PNGs

    def write(self, report: Report) -> list[Path]:
        t = report.data
        if not len(t.comparison):  # nothing to plot: no PNG of an earlier report is left to pass for this one's
            for stale in (report.out / "plots").glob("*.png"):
                stale.unlink()
            return []
        report.plots = write_plots(t.comparison, t.analysis.table("kernel_quantiles"), t.analysis.table("timeline"),
                                   report.out / "plots", t.baseline, t.module_busy)
        return [p for ps in report.plots.values() for p in ps]


def write_plots(comp: pd.DataFrame, quantiles: pd.DataFrame, timeline: pd.DataFrame, out: Path | str,
                baseline: str, module_busy: pd.DataFrame | None = None) -> dict[str, list[Path]]:
    """Every plot of a report as PNG files under ``out``.

    Args:
        comp: :func:`tracekit.analysis.comparison.compare.compare`'s table.
        quantiles: ``Analysis.table("kernel_quantiles")`` (run, quantile, dur_us).
        timeline: ``Analysis.table("timeline")`` (run, lane, kind, start_us, dur_us...).
        out: the plots folder.
        baseline: the baseline mode (for titles).
        module_busy: ``Result.module_busy`` (busy time per kind of module per run), or None.

    Returns:
        workload -> [its panels PNG, its timeline PNG (when a run of it has GPU
        ops in a marked iteration), its busy-per-module PNG (when its runs have
        attribution rows)]; key "" -> [the overview PNG] when some
        workload has GPU activity. PNGs of an earlier report in ``out`` that this
        one does not draw (workloads since renamed or gone) are removed.
    """
    from tracekit.report.charts import modules_figure, overview_figure, save, slug, workload_figure
    from tracekit.report.timeline_figure import timeline_figure, with_gpu_ops

    out = Path(out)
    old = set(out.glob("*.png"))
    written: dict[str, list[Path]] = {}
    if comp["busy_per_iter_ms"].notna().any():
        written[""] = [save(overview_figure(comp, baseline), out / "overview-busy-idle.png")]
    for workload, g in comp.groupby("workload", sort=False):
        name = slug(workload)
        written[workload] = [save(workload_figure(g, quantiles, f"{workload}: modes vs {baseline}"),
                                  out / f"{name}.png")]
        if with_gpu_ops(timeline) & set(g["run"]):
            written[workload].append(save(timeline_figure(g, timeline, f"{workload}: one profiled iteration per mode"),
                                          out / f"{name}-timeline.png"))
        busy = module_busy[module_busy["workload"] == workload] if module_busy is not None and len(module_busy) \
            else None
        if busy is not None and len(busy) and busy["busy_per_iter_us"].sum() > 0:
            written[workload].append(save(modules_figure(busy, f"{workload}: GPU busy per kind of module, per mode"),
                                          out / f"{name}-modules.png"))
    for stale in old - {p for ps in written.values() for p in ps}:
        stale.unlink(missing_ok=True)
    return written

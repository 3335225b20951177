"""The report's figures keep every text inside the picture (issue 32: the overview's title was
cut at both ends, its legend too): drawn from our H100 and CPU runs, and from a workload with a
long library-model name."""

from __future__ import annotations

import pytest
from matplotlib.text import Text
from owndata import CPU_RUNS, H100_STUDY

from tracekit.analysis.result import Result
from tracekit.analysis.runs import analyze
from tracekit.report import charts, timeline_figure

LONG = "hf:llama?layers=16&hidden=2048&heads=32&kv_heads=8&ffn=8192 b1 s512 bf16 cuda"


def cut_texts(fig) -> list[str]:
    """The texts of ``fig`` that reach outside it (one pixel of slack); tick labels left out
    (those past an axis' limits are never drawn, and constrained layout fits the rest)."""
    fig.canvas.draw()
    renderer, box = fig.canvas.get_renderer(), fig.bbox
    ticks = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis.get_major_ticks() + axis.get_minor_ticks() for label in (tick.label1, tick.label2)}
    cut = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text().strip() or id(text) in ticks:
            continue
        e = text.get_window_extent(renderer)
        if e.x0 < box.x0 - 1 or e.x1 > box.x1 + 1 or e.y0 < box.y0 - 1 or e.y1 > box.y1 + 1:
            cut.append(text.get_text())
    return cut


@pytest.fixture(scope="module")
def h100() -> Result:
    return Result.of(analyze(H100_STUDY))


@pytest.mark.parametrize("workloads", [1, 2])
def test_the_overview_keeps_its_title_and_legend_inside(h100, workloads):
    comp = h100.comparison[h100.comparison["workload"].isin(h100.comparison["workload"].unique()[:workloads])]
    assert cut_texts(charts.overview_figure(comp, "eager")) == []


def test_each_workload_figure_keeps_its_texts_inside(h100):
    timeline = h100.analysis.table("timeline")
    for workload, g in h100.comparison.groupby("workload"):
        assert cut_texts(charts.workload_figure(g, h100.analysis.table("kernel_quantiles"), workload)) == []
        assert cut_texts(timeline_figure.timeline_figure(g, timeline, f"{workload}: one profiled iteration per mode")) == []


def test_a_long_workload_name_wraps_instead_of_being_cut(h100):
    cpu = Result.of(analyze(CPU_RUNS)).comparison.assign(workload=LONG)
    fig = charts.workload_figure(cpu, cpu.iloc[:0], f"{LONG}: modes vs eager")  # CPU only: a 6-inch figure
    assert cut_texts(fig) == []
    words = lambda text: text.replace("\n", "").replace(" ", "")  # noqa: E731 (a word wider than a line is folded)
    assert words(fig.get_suptitle()) == words(f"{LONG}: modes vs eager (no GPU activity in the traces: CPU only)")
    gpu = h100.comparison.assign(workload=LONG)
    assert cut_texts(charts.overview_figure(gpu[gpu["baseline_run"] == gpu["baseline_run"].iloc[0]], "eager")) == []

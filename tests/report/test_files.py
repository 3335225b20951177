import base64
import json
import re

import pandas as pd
from tracebuilder import TraceBuilder, eager_trace, write_run

from tracekit.analysis.comparison.compare import compare
from tracekit.analysis.result import Result
from tracekit.analysis.runs import analyze
from tracekit.report import write_reports
from tracekit.report.charts import busy_idle_axes, new_figure

PNG = b"\x89PNG\r\n\x1a\n"


def test_report_files(study, tmp_path):
    out = tmp_path / "reports"
    written = write_reports(Result.of(analyze(study)), out, source=str(study))
    names = {p.relative_to(out).as_posix() for p in written}
    assert {"summary.md", "index.html", "runs.csv", "comparison.csv", "runs.json",
            "plots/overview-busy-idle.png", "plots/vit16x6x384-b8-fp32-cuda.png",
            "plots/vit16x6x384-b8-fp32-cuda-timeline.png"} == names
    for p in written:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == PNG
    md = (out / "summary.md").read_text()
    assert "| vit16x6x384 b8 fp32 cuda | reduce-overhead | 0.040 | 2.00x (1.40-2.57) | -0.040 | +0.000 | -0.040 | idle |" in md
    assert "![GPU busy and idle per iteration, all workloads](plots/overview-busy-idle.png)" in md
    assert "[a/first](../a/first/host_1.1.pt.trace.json.gz)" in md      # each run links its trace
    runs = pd.read_csv(out / "runs.csv")
    assert {"latency_median_ms", "busy_per_iter_us", "profiler_overhead", "profiler_overhead_flagged"} <= set(runs)
    assert pd.read_csv(out / "comparison.csv").set_index("mode").loc["reduce-overhead", "speedup"] == 2.0
    data = json.loads((out / "runs.json").read_text())
    assert data["baseline"] == "eager" and len(data["comparison"]) == 2 and "timeline" not in data
    assert [r["flagged"] for r in data["profiler_overhead"]] == [True, False]


def test_index_html_is_self_contained(study, tmp_path):
    out = tmp_path / "reports"
    write_reports(Result.of(analyze(study)), out, source=str(study))
    html = (out / "index.html").read_text()
    srcs = re.findall(r'src="([^"]*)"', html)
    assert len(srcs) == 3                                  # overview, panels, timeline
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG
    assert "<link" not in html and "<script src" not in html and "@import" not in html
    hrefs = re.findall(r'<a href="([^"]*)"', html)
    assert len(hrefs) == 2 and all((out / h).is_file() for h in hrefs)
    assert html.count("<table class=\"sortable\">") == 6
    assert "ui.perfetto.dev" in html and "2.00x (1.40-2.57)" in html


def test_cpu_only_runs_still_report(tmp_path):
    for mode, dur in (("eager", 300), ("default", 200)):
        t = TraceBuilder(device_name=None)
        t.step(1, 0, dur)
        t.cpu_op("aten::linear", 10, dur - 20)
        write_run(tmp_path / "t" / mode, t, model="mlp", mode=mode, latency_ms=(dur / 1e3, dur / 1e3, dur / 1e3),
                  device_type="cpu", requested_device="cpu")
    out = tmp_path / "r"
    written = write_reports(Result.of(analyze(tmp_path / "t")), out, source="t")
    assert not (out / "plots" / "overview-busy-idle.png").exists()      # no GPU: no busy/idle overview
    assert [p.name for p in written if p.suffix == ".png"] == ["mlp-b8-fp32-cpu.png"]  # no GPU: no timeline
    md = (out / "summary.md").read_text()
    assert "| mlp b8 fp32 cpu | default | 0.200 | 1.50x (1.50-1.50) |" in md
    # Written again after the workload changed: the old workload's plot goes, nothing else of the folder.
    (out / "notes.txt").write_text("mine")
    for run in ("eager", "default"):
        manifest = json.loads((tmp_path / "t" / run / "run.json").read_text())
        manifest["spec"]["batch"] = 4
        (tmp_path / "t" / run / "run.json").write_text(json.dumps(manifest))
    write_reports(Result.of(analyze(tmp_path / "t")), out, source="t")
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["mlp-b4-fp32-cpu.png"]
    assert (out / "notes.txt").read_text() == "mine"


def test_busy_idle_bars_fall_back_to_total_idle(study):
    comp = compare(analyze(study).runs)
    ax = new_figure(4, 3).subplots()
    busy_idle_axes(ax, comp)
    assert "host wait (GPU waits for a launch)" in [t.get_text() for t in ax.get_legend().get_texts()]
    ax = new_figure(4, 3).subplots()
    busy_idle_axes(ax, comp.drop(columns=[c for c in comp if c.startswith("idle_host_wait")]))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "GPU idle" in labels and not any("host wait" in label for label in labels)
    # stacked heights: busy 0.02 + idle 0.055 ms for eager
    tops = sorted({round(p.get_y() + p.get_height(), 6) for p in ax.patches})
    assert tops[-1] == 0.075


def test_write_run_helper_is_read_like_a_runner_manifest(tmp_path):
    write_run(tmp_path / "r", eager_trace(), mode="eager")
    row = analyze(tmp_path).runs.iloc[0]
    assert (row["model"], row["batch"], row["phase"], row["requested_device"]) == ("vit16x6x384", 8, "inference", "cuda")


def test_job_section_in_every_format(fixtures, tmp_path, capsys):
    """The real 2-rank NCCL job: summary.md, index.html, the terminal and runs.json show its
    job, rank, balance and straggler tables."""
    from rich.console import Console

    from tracekit.report import print_reports

    a = analyze(fixtures / "dist")
    out = tmp_path / "reports"
    write_reports(Result.of(a), out, source="dist")
    md = (out / "summary.md").read_text()
    assert "## Distributed jobs" in md and "hta-trace-filter-sampled-2rank: 2 ranks (nccl)" in md
    assert md.count("| hta-trace-filter-sampled-2rank | 0 |") == 2          # ranks and stragglers tables
    html = (out / "index.html").read_text()
    assert html.count('<table class="sortable">') == 2 + 4                 # runs, idle + the 4 job tables
    assert "Distributed jobs: verdict, straggler" in html
    data = json.loads((out / "runs.json").read_text())
    assert len(data["jobs"]) == 1 and len(data["ranks"]) == 2 and {r["rank"] for r in data["runs"]} == {0, 1}
    print_reports(Result.of(a), console=Console(width=250, record=True))
    shown = capsys.readouterr().out
    job = a.table("jobs").iloc[0]
    assert "Ranks of each job" in shown and 0 < job["collectives_inconsistent"] < job["collectives_matched"]
    assert (f"{job['collectives_inconsistent']} of {job['collectives_matched']} collectives matched across ranks "
            "are impossible as matches") in shown


def test_a_report_kept_in_a_repository_links_its_plots_and_may_leave_out_its_traces(study, tmp_path):
    out = tmp_path / "reports"
    write_reports(Result.of(analyze(study)), out, source=str(study), html_plots="link", link_traces=False)
    html = (out / "index.html").read_text()
    srcs = re.findall(r'src="([^"]*)"', html)
    assert sorted(srcs) == ["plots/overview-busy-idle.png", "plots/vit16x6x384-b8-fp32-cuda-timeline.png",
                            "plots/vit16x6x384-b8-fp32-cuda.png"]
    assert all((out / src).read_bytes()[:8] == PNG for src in srcs) and "data:image" not in html
    assert re.findall(r'<a href="([^"]*)"', html) == []            # no run links a trace
    md = (out / "summary.md").read_text()
    assert ".pt.trace.json.gz)" not in md and "| a/first | pytorch |" in md


def test_plots_are_palette_pngs(study, tmp_path):
    from PIL import Image

    written = write_reports(Result.of(analyze(study)), tmp_path, source=str(study))
    for png in (p for p in written if p.suffix == ".png"):
        with Image.open(png) as image:
            assert image.mode == "P" and len(image.getpalette()) <= 3 * 256

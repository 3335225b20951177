import json

import pandas as pd
import pytest

from tracekit.analysis.result import Result
from tracekit.analysis.runs import analyze
from tracekit.report import RENDERERS, Report


def test_runs_comparison_and_every_table_as_data_files(study, tmp_path):
    """The study fixture: eager 0.08 ms, reduce-overhead 0.04 ms (p50), one workload."""
    t = Result.of(analyze(study))
    written = RENDERERS["csv/json"].write(Report(t, tmp_path))
    assert [p.name for p in written] == ["runs.csv", "comparison.csv", "runs.json"]
    runs = pd.read_csv(tmp_path / "runs.csv").set_index("mode")
    assert list(runs.index) == ["eager", "reduce-overhead"]
    assert runs.loc["eager", "latency_median_ms"] == 0.08 and runs.loc["reduce-overhead", "kernels"] == 4
    # The profiler-overhead columns join each run's row.
    assert runs["profiler_overhead"].tolist() == t.overhead.set_index("mode").loc[runs.index, "profiler_overhead"].tolist()
    comparison = pd.read_csv(tmp_path / "comparison.csv").set_index("mode")
    assert comparison.loc["reduce-overhead", "speedup"] == 2.0
    data = json.loads((tmp_path / "runs.json").read_text())
    assert data["baseline"] == "eager" and "timeline" not in data  # events for the plot, not metrics
    assert {"runs", "comparison", "profiler_overhead", "iterations", "kernels", "errors", "skipped"} <= set(data)
    assert len(data["iterations"]) == 4  # 2 marked iterations per run


def test_cpu_runs_have_no_gpu_counts_not_zero(tmp_path):
    """Where the README says n/a (a CPU-only run's kernels and launches), runs.csv and
    comparison.csv are empty and the DataFrames NaN, never 0."""
    from owndata import CPU_RUNS

    import tracekit

    result = tracekit.analyze(CPU_RUNS)
    gpu_counts = ["kernels", "gpu_ops", "memcpys", "memsets", "host_launches", "kernels_per_iter",
                  "launches_per_iter", "short_kernels"]
    assert result.runs[gpu_counts].isna().all().all()
    assert result.comparison[["kernels_per_iter", "launches_per_iter", "kernels_ratio"]].isna().all().all()
    RENDERERS["csv/json"].write(Report(Result.of(analyze(CPU_RUNS)), tmp_path))
    runs = pd.read_csv(tmp_path / "runs.csv", keep_default_na=False, dtype=str)
    assert (runs[gpu_counts] == "").all().all() and (runs["cpu_ops"] != "").all()
    comparison = pd.read_csv(tmp_path / "comparison.csv", keep_default_na=False, dtype=str)
    assert (comparison[["kernels_per_iter", "launches_per_iter"]] == "").all().all()


def test_a_report_leaves_no_file_of_an_earlier_one(tmp_path):
    """modules.csv and plots/*.png are written only when there are rows to write: a report without
    them removes those an earlier report left in the folder (an H100 report, then a CPU one)."""
    from owndata import CPU_RUNS, H100_STUDY
    from tracebuilder import TraceBuilder

    from tracekit.report import write_reports

    out = tmp_path / "reports"
    h100 = Result.of(analyze(H100_STUDY))
    h100.modules = pd.DataFrame({"workload": ["w"], "mode": ["default"], "run": ["r"], "module": ["blocks"]})
    write_reports(h100, out)
    assert (out / "modules.csv").is_file() and len(list((out / "plots").glob("*.png"))) == 5
    written = write_reports(Result.of(analyze(CPU_RUNS)), out)
    assert not (out / "modules.csv").exists()
    assert sorted(p.name for p in (out / "plots").glob("*.png")) == sorted(p.name for p in written if p.suffix == ".png")
    t = TraceBuilder()  # a bare trace: no run.json, nothing to compare or plot
    t.kernel("a", 0, 10, launch_at=-5)
    t.write(tmp_path / "bare" / "x.pt.trace.json.gz")
    write_reports(Result.of(analyze(tmp_path / "bare")), out)
    assert list((out / "plots").glob("*.png")) == []


def test_no_tracked_file_lives_where_analyze_writes_by_default():
    """`tracekit analyze` writes reports/ by default: none of the files it writes there is tracked
    (a tracked reports/modules.csv of old H100 runs sat there), and git ignores them all."""
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("needs the git checkout of the project (git ls-files)")
    names = ["summary.md", "index.html", "runs.csv", "comparison.csv", "runs.json", "modules.csv", "plots/x.png"]
    paths = [f"reports/{n}" for n in names]
    tracked = subprocess.run(["git", "ls-files", "--", *paths, "reports/plots"], cwd=root, capture_output=True,
                             text=True, check=True).stdout.split()
    assert tracked == []
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=root, capture_output=True,
                             text=True).stdout.split()
    assert ignored == paths

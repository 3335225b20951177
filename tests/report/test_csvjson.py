import json

import pandas as pd

from tracekit.analysis.tables import Tables
from tracekit.analysis.runs import analyze
from tracekit.report import RENDERERS, Report


def test_runs_comparison_and_every_table_as_data_files(study, tmp_path):
    """The study fixture: eager 0.08 ms, reduce-overhead 0.04 ms (p50), one workload."""
    t = Tables.of(analyze(study))
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

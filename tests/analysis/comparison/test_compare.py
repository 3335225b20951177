import json
import math

import pytest
from owndata import H100_STUDY
from tracebuilder import TraceBuilder, eager_trace, graph_trace, write_run

from tracekit.analysis.comparison.compare import compare, profiler_overhead
from tracekit.analysis.comparison.workloads import workloads
from tracekit.analysis.runs import analyze
from tracekit.report.comparison_text import finding, warning


def test_speedup_and_its_split_into_busy_and_idle(study):
    c = compare(analyze(study).runs).set_index("mode")
    assert list(c.index) == ["eager", "reduce-overhead"]       # baseline first
    ro = c.loc["reduce-overhead"]
    assert ro["workload"] == c.loc["eager", "workload"] == "vit16x6x384 b8 fp32 cuda"
    assert ro["baseline_run"] == "a/first"
    assert ro["speedup"] == pytest.approx(2.0)
    assert ro["speedup_low"] == pytest.approx(0.07 / 0.05) and ro["speedup_high"] == pytest.approx(0.09 / 0.035)
    assert ro["kernels_ratio"] == pytest.approx(1.0) and ro["launches_ratio"] == pytest.approx(0.5)
    # unprofiled split: latency -0.04 ms = busy 0 (20 µs/iter both) + idle -0.04
    assert ro["d_latency_ms"] == pytest.approx(-0.04)
    assert ro["d_busy_per_iter_ms"] == pytest.approx(0.0)
    assert ro["d_idle_est_ms"] == pytest.approx(-0.04)
    assert ro["dominant"] == "idle"
    # profiled split: iteration 0.1 -> 0.04 ms = busy 0 + idle (55 -> 10 µs) + rest
    assert ro["d_profiled_iter_ms"] == pytest.approx(-0.06)
    assert ro["d_idle_per_iter_ms"] == pytest.approx(-0.045)
    assert ro["d_idle_host_wait_per_iter_ms"] == pytest.approx(-0.045)
    assert ro["d_rest_per_iter_ms"] == pytest.approx(-0.015)
    assert ro["dominant_profiled"] == "idle"
    assert "less GPU idle time" in finding(ro) and warning(ro) == ""   # the comparison's figures, worded
    assert c.loc["eager", "dominant"] == "" and finding(c.loc["eager"]) == ""


def test_the_splits_add_up_on_the_real_h100_study():
    """On the project's own H100 ViT runs: each speedup is the ratio of the manifests'
    medians, and Δ latency = Δ busy + Δ idle, Δ profiled iter = Δ busy + Δ idle + Δ rest."""
    c = compare(analyze(H100_STUDY).runs)
    assert len(c) == 6 and set(c["mode"]) == {"eager", "default", "reduce-overhead"}
    assert c["workload"].nunique() == 2
    for r in c[c["mode"] != "eager"].to_dict("records"):
        own = json.loads((H100_STUDY / r["run"] / "run.json").read_text())["latency_ms"]["median"]
        base = json.loads((H100_STUDY / r["baseline_run"] / "run.json").read_text())["latency_ms"]["median"]
        assert r["speedup"] == pytest.approx(base / own)
        assert r["speedup_low"] <= r["speedup"] <= r["speedup_high"]
        assert r["d_latency_ms"] == pytest.approx(r["d_busy_per_iter_ms"] + r["d_idle_est_ms"])
        assert r["d_profiled_iter_ms"] == pytest.approx(r["d_busy_per_iter_ms"] + r["d_idle_per_iter_ms"]
                                                        + r["d_rest_per_iter_ms"])
        assert r["launches_ratio"] < 0.05 if r["mode"] == "reduce-overhead" else r["launches_ratio"] > 0.7
    b1 = c[(c["workload"] == "vit16x6x384 b1 fp32 cuda") & (c["mode"] == "reduce-overhead")].iloc[0]
    assert b1["dominant"] == "idle" and b1["speedup"] > 4


def test_a_run_on_another_device_is_flagged(tmp_path):
    """An ONNX Runtime CPU provider asked for cuda: same workload, compared, and said loudly."""
    write_run(tmp_path / "eager", eager_trace(), mode="eager", latency_ms=(0.08, 0.07, 0.09))
    cpu = TraceBuilder(device_name=None)
    cpu.step(1, 0, 300)
    cpu.cpu_op("aten::linear", 10, 200)
    # As the runner writes it: the CPU's name where it ran, the machine's GPU in its environment.
    write_run(tmp_path / "onnx", cpu, mode="onnxruntime", latency_ms=(0.3, 0.25, 0.35), device_type="cpu",
              device_name="Intel(R) Xeon(R) Processor")
    c = compare(analyze(tmp_path).runs).set_index("mode")
    assert c.loc["onnxruntime", "workload"] == c.loc["eager", "workload"] == "vit16x6x384 b8 fp32 cuda"
    assert c.loc["onnxruntime", "ran_on"] == "cpu" and c.loc["onnxruntime", "baseline_ran_on"] == "cuda"
    assert "DIFFERENT DEVICE: ran on cpu while the eager baseline ran on cuda" in warning(c.loc["onnxruntime"])
    assert c.loc["onnxruntime", "speedup"] == pytest.approx(0.08 / 0.3)
    assert math.isnan(c.loc["onnxruntime", "d_busy_per_iter_ms"])  # no GPU timeline: no split
    assert math.isnan(c.loc["onnxruntime", "kernels_ratio"]) and math.isnan(c.loc["onnxruntime", "launches_ratio"])


def test_missing_or_failed_baseline_and_another_baseline(tmp_path):
    write_run(tmp_path / "x" / "eager", None, mode="eager", latency_ms=None, status="oom")
    write_run(tmp_path / "x" / "default", eager_trace(), mode="default", latency_ms=(0.06, 0.05, 0.07))
    write_run(tmp_path / "x" / "ro", graph_trace(), mode="reduce-overhead", latency_ms=(0.03, 0.03, 0.03))
    write_run(tmp_path / "y" / "default", graph_trace(), mode="default", batch=1, latency_ms=(0.04, 0.035, 0.05))
    runs = analyze(tmp_path).runs
    c = compare(runs).set_index("run")
    assert warning(c.loc["x/default"]) == "the eager baseline oom"
    assert math.isnan(c.loc["x/default", "speedup"])
    assert warning(c.loc["y/default"]) == "no eager run in this workload"
    assert c.loc["y/default", "workload"] == "vit16x6x384 b1 fp32 cuda"
    c = compare(runs, baseline="default").set_index("run")
    assert warning(c.loc["x/ro"]) == ""
    assert c.loc["x/ro", "speedup"] == pytest.approx(2.0) and c.loc["x/ro", "baseline_run"] == "x/default"
    assert warning(c.loc["x/eager"]).startswith("run oom")


def test_idle_by_cause_is_optional(study):
    """Run rows without idle_<cause>_us columns compare on total idle alone."""
    runs = analyze(study).runs
    runs = runs.drop(columns=[c for c in runs.columns if c.startswith("idle_") and c != "idle_per_iter_us"])
    c = compare(runs)
    assert not any(col.startswith("idle_host_wait") for col in c.columns)
    assert c.set_index("mode").loc["reduce-overhead", "d_idle_per_iter_ms"] == pytest.approx(-0.045)


def test_speedup_range_from_std_without_percentiles(study):
    runs = analyze(study).runs.drop(columns=["latency_p10_ms", "latency_p90_ms"])
    ro = compare(runs).set_index("mode").loc["reduce-overhead"]
    rel = math.hypot(0.01 / 0.08, 0.0075 / 0.04)  # std = (p90 - p10) / 2 in write_run
    assert ro["speedup_low"] == pytest.approx(2.0 * (1 - rel)) and ro["speedup_high"] == pytest.approx(2.0 * (1 + rel))


def test_busy_above_unprofiled_latency_is_flagged(tmp_path):
    write_run(tmp_path / "e", eager_trace(), mode="eager", latency_ms=(0.08, 0.07, 0.09))
    write_run(tmp_path / "r", graph_trace(), mode="reduce-overhead", latency_ms=(0.015, 0.014, 0.016))
    ro = compare(analyze(tmp_path).runs).set_index("mode").loc["reduce-overhead"]
    assert ro["idle_est_ms"] == pytest.approx(0.015 - 0.020)
    assert "exceeds" not in warning(ro) and "> unprofiled latency 0.015 ms" in warning(ro)


def test_profiler_overhead(study):
    o = profiler_overhead(analyze(study).runs).set_index("run")
    assert o.loc["a/first", "profiled_iter_ms"] == pytest.approx(0.1)
    assert o.loc["a/first", "profiler_overhead"] == pytest.approx(0.1 / 0.08 - 1)
    assert o.loc["a/first", "flagged"] and not o.loc["b/second", "flagged"]
    assert o.loc["b/second", "gpu_span_per_iter_ms"] == pytest.approx(0.03)


def test_trace_only_runs_have_no_workload(tmp_path):
    eager_trace().write(tmp_path / "bare.pt.trace.json.gz")
    runs = analyze(tmp_path).runs
    assert workloads(runs).empty and compare(runs).empty


def test_two_baseline_runs_in_one_workload(study):
    write_run(study / "c" / "again", eager_trace(), mode="eager", latency_ms=(0.1, 0.1, 0.1))
    c = compare(analyze(study).runs).set_index("run")
    assert c.loc["b/second", "baseline_run"] == "a/first" and c.loc["b/second", "speedup"] == pytest.approx(2.0)
    assert warning(c.loc["b/second"]) == "2 eager runs in this workload; the baseline is a/first"


def test_a_status_row_without_a_device_name_joins_its_workload(tmp_path):
    """A cell skipped without a process (backend missing) has no environment: same workload, no "()" label."""
    write_run(tmp_path / "eager", eager_trace(), mode="eager")
    write_run(tmp_path / "trt", None, mode="tensorrt", latency_ms=None, status="skipped", environment={})
    w = workloads(analyze(tmp_path).runs).set_index("mode")["workload"]
    assert w["tensorrt"] == w["eager"] == "vit16x6x384 b8 fp32 cuda"
    # Two machines with the same label still get their names.
    write_run(tmp_path / "a100" / "eager", eager_trace(), mode="eager", environment={"device_name": "NVIDIA A100"})
    w = workloads(analyze(tmp_path).runs).set_index("run")["workload"]
    assert w["a100/eager"] == "vit16x6x384 b8 fp32 cuda (NVIDIA A100)"
    assert w["eager"] == "vit16x6x384 b8 fp32 cuda (NVIDIA H100 80GB HBM3)"
    assert w["trt"] == "vit16x6x384 b8 fp32 cuda (unknown device)"  # which of the two: not known

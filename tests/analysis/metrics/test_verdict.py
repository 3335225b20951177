import math

import pytest
from owndata import H100_STUDY, h100_trace
from tracebuilder import TraceBuilder

from tracekit.analysis import trace_analysis
from tracekit.analysis.metrics import verdict
from tracekit.analysis.options import RunFacts
from tracekit.report.run_lines import EVIDENCE_RULES, evidence_text
from tracekit.trace import load


def _row(**kw):
    base = dict(has_gpu=True, active_span_us=100.0, idle_host_wait_us=0.0, utilization=1.0, feed_ratio=1.0,
                short_kernel_share=0.0, iterations=4, busy_per_iter_us=25.0)
    return {**base, **kw}


@pytest.mark.parametrize("kw, label", [
    (dict(idle_host_wait_us=25.0, utilization=0.7), "launch-bound"),     # exactly the 25% threshold
    (dict(idle_host_wait_us=24.9, utilization=0.7), "mixed"),
    (dict(idle_host_wait_us=4.9, utilization=0.9), "gpu-bound"),
    (dict(idle_host_wait_us=5.0, utilization=0.95), "mixed"),            # host wait not under 5%
    (dict(idle_host_wait_us=0.0, utilization=0.89), "mixed"),
])
def test_rule_boundaries(kw, label):
    v = verdict.verdict(_row(**kw))
    assert v["verdict"] == v["verdict_profiled"] == label


def test_recoverable_time_is_host_wait_per_iteration():
    v = verdict.verdict(_row(idle_host_wait_us=40.0, utilization=0.5))
    assert v["cuda_graph_recoverable_us_per_iter"] == pytest.approx(10.0)
    assert math.isnan(verdict.verdict(_row(iterations=math.nan))["cuda_graph_recoverable_us_per_iter"])


def test_unprofiled_latency_overrules_a_profiler_made_host_wait():
    # profiled: 40% host wait; unprofiled: 25 µs of GPU work in a 0.026 ms iteration
    v = verdict.verdict(_row(idle_host_wait_us=40.0, utilization=0.5), latency_ms=0.026)
    assert v["verdict_profiled"] == "launch-bound" and v["verdict"] == "gpu-bound"
    assert v["unprofiled_utilization"] == pytest.approx(25 / 26)
    assert v["verdict_reason"] == "" and "profiler" in evidence_text({**_row(idle_host_wait_us=40.0, utilization=0.5),
                                                                      **v, "latency_median_ms": 0.026})
    v = verdict.verdict(_row(idle_host_wait_us=40.0, utilization=0.5), latency_ms=0.1)   # truly launch-bound
    assert v["verdict"] == "launch-bound"


def test_no_gpu():
    assert verdict.verdict({"has_gpu": False})["verdict"] == "no GPU activity"


def test_one_launch_is_undetermined(tmp_path):
    """One launch cannot show host wait, however busy its kernels keep the GPU."""
    t = TraceBuilder()
    t.graph_launch(at=0, kernels=[(10 + 6.0 * i, 6) for i in range(20)])
    row = trace_analysis.analyze_trace(load(t.write(tmp_path / "one.json"))).row
    assert row["utilization"] == 1.0 and row["verdict"] == "undetermined"
    assert row["verdict_reason"] == verdict.FEW_LAUNCHES and "1 host launch:" in evidence_text(row)


def test_unprofiled_check_uses_a_typical_marked_iteration(tmp_path):
    """Step 1 also runs 50 µs of work queued before the window; the median step does 20 µs."""
    t = TraceBuilder()
    t.kernel("left over", start=0, dur=50, launch_at=None)
    for i in range(3):
        t.step(i + 1, 100.0 * i, 100)
        t.kernel("k", start=100.0 * i + 60, dur=20, launch_at=100.0 * i + 10)
    row = trace_analysis.analyze_trace(load(t.write(tmp_path / "steps.json")), run=RunFacts(latency_ms=0.025)).row
    assert row["iteration_busy_us"] == pytest.approx(20.0)
    assert row["busy_per_iter_us"] == pytest.approx(110 / 3)
    assert row["unprofiled_utilization"] == pytest.approx(20 / 25)


def test_hand_made_launch_bound_and_gpu_bound_traces(tmp_path):
    slow_host = TraceBuilder()
    for i in range(20):   # 5 µs kernels launched every 20 µs
        slow_host.kernel("k", start=20.0 * i + 8, dur=5, launch_at=20.0 * i)
    fast = TraceBuilder()   # two graph launches, the second issued while the first still runs
    fast.graph_launch(at=0, kernels=[(10 + 6.0 * i, 6) for i in range(20)])
    fast.graph_launch(at=20, kernels=[(131 + 6.0 * i, 6) for i in range(20)])
    for t, label in ((slow_host, "launch-bound"), (fast, "gpu-bound")):
        row = trace_analysis.analyze_trace(load(t.write(tmp_path / f"{label}.json"))).row
        assert row["verdict"] == label, evidence_text(row)


@pytest.mark.parametrize("mode, label, launches", [
    ("eager", "launch-bound", 660), ("default", "launch-bound", 710), ("reduce-overhead", "gpu-bound", 21)])
def test_real_h100_traces(mode, label, launches):
    """Acceptance, on the profiled window alone (no unprofiled latency given): eager ViT
    launch-bound, reduce-overhead about 2 launches an iteration and not launch-bound."""
    result = trace_analysis.analyze_trace(load(h100_trace(f"vit16x6x384/{mode}")))
    row = result.row
    assert row["verdict"] == label
    assert row["host_launches"] == launches
    evidence = result.tables["verdict_evidence"].set_index("evidence")
    assert evidence.loc["host_wait_share", "value"] == pytest.approx(row["idle_host_wait_us"] / row["active_span_us"])
    assert evidence.loc["host_wait_share", "supports"] == ("gpu-bound" if mode == "reduce-overhead" else label)
    if mode == "eager":
        assert row["idle_host_wait_us"] / row["idle_us"] > 0.8
        assert row["cuda_graph_recoverable_us_per_iter"] == pytest.approx(row["idle_host_wait_us"] / 10)


def test_real_h100_study_batch_1_eager_is_launch_bound_even_unprofiled():
    """Our own H100 runs (tests/data/h100/vit-study): batch 1 eager stays launch-bound with its
    unprofiled latency; batch 8 eager only looks launch-bound under the profiler."""
    from tracekit.analysis.runs import analyze
    runs = analyze(H100_STUDY, only={"vit16x6x384-b1/eager", "vit16x6x384/eager"}).runs.set_index("run")
    b1, b8 = runs.loc["vit16x6x384-b1/eager"], runs.loc["vit16x6x384/eager"]
    assert b1["verdict"] == "launch-bound" and b1["unprofiled_utilization"] < 0.5
    assert b8["verdict_profiled"] == "launch-bound" and b8["verdict"] == "gpu-bound"


def test_evidence_rows_say_which_way_each_figure_points():
    row = _row(idle_host_wait_us=40.0, utilization=0.5, feed_ratio=0.4, mean_kernel_us=5.0, launch_interval_us=12.5)
    row.update(verdict.verdict(row, latency_ms=0.1))
    ev = {r["evidence"]: r for r in verdict.evidence_rows(row)}
    assert ev["host_wait_share"]["value"] == pytest.approx(0.4) and ev["host_wait_share"]["supports"] == "launch-bound"
    assert ev["feed_ratio"]["supports"] == "launch-bound" and ev["utilization"]["supports"] == ""
    assert ev["unprofiled_utilization"]["value"] == pytest.approx(0.25) and ev["unprofiled_utilization"]["supports"] == ""
    assert ev["cuda_graph_recoverable_us_per_iter"]["value"] == pytest.approx(10.0)
    assert "25%" in EVIDENCE_RULES["host_wait_share"]
    assert verdict.evidence_rows({"verdict": "undetermined"}) == []

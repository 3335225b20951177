"""The texts of the tables, added by the report layer in one place (tracekit.report.worded, issue 37):
the analysis gives figures and reasons, and each text stands where the analysis' figure it is made of
stood, so every file and frame reads as before."""

from owndata import CPU_RUNS, H100_STUDY
from tracebuilder import TraceBuilder, eager_trace, write_run

from tracekit.analysis.result import Result
from tracekit.analysis.runs import analyze
from tracekit.report.worded import WARNING_FIGURES, WordedResult, worded


def test_each_text_stands_where_its_figures_stood():
    t = Result.of(analyze(H100_STUDY))
    w = worded(t)
    runs = list(t.runs.columns)
    runs.insert(runs.index("integrity") + 1, "integrity_detail")
    runs[runs.index("verdict_reason")] = "evidence"
    runs[runs.index("host_cpus_end")] = "timing_warning"
    assert list(w.runs.columns) == runs
    assert w.runs.set_index("run").loc["vit16x6x384-b1/eager", "evidence"] == (
        "host wait 72% of the GPU's active span, utilization 25%, feed ratio 0.25 (GPU µs per launch / µs between "
        "launches), 60% of kernels < 10 µs; unprofiled: GPU busy 0.77 ms of a 2.65 ms iteration (29%)")
    comparison = [c for c in t.comparison.columns if c not in WARNING_FIGURES]
    comparison.insert(comparison.index("timer_gap"), "timing_warning")
    at = comparison.index("timer_verdict")
    comparison[at:at + 4] = ["timer_verdicts"]
    at = comparison.index("dominant_profiled") + 1
    comparison[at:at] = ["finding", "warning"]
    assert list(w.comparison.columns) == comparison
    ro = w.comparison.set_index("run").loc["vit16x6x384-b1/reduce-overhead"]
    assert ro["finding"] == ("less GPU idle time (launch overhead, syncs) dominates: Δ latency -2.033 ms = Δ GPU busy "
                             "-0.158 + Δ idle -1.875 ms per iteration") and ro["warning"] == ""
    checks = w.analysis.tables["integrity"]
    assert list(checks.columns) == ["run", "trace", "rank", "check", "status", "count", "detail"]
    assert list(w.analysis.tables["verdict_evidence"].columns) == ["run", "trace", "rank", "evidence", "value",
                                                                   "rule", "supports"]


def test_the_record_worded_is_left_as_it_was_and_worded_once():
    t = Result.of(analyze(CPU_RUNS))
    columns = list(t.runs.columns)
    w = worded(t)
    assert isinstance(w, WordedResult) and worded(w) is w
    assert list(t.runs.columns) == columns and "evidence" not in t.runs and "finding" not in t.comparison
    assert w.analysis.runs is w.runs and w.runs is not t.runs


def test_the_notes_of_a_run_are_runjson_s_then_the_trace_s(tmp_path):
    """A CPU-only trace is said to be one after run.json's own note; mended damage is said per kind."""
    cpu = TraceBuilder(device_name=None)
    cpu.step(1, 0, 300)
    cpu.cpu_op("aten::linear", 10, 200)
    write_run(tmp_path / "w" / "cpu", cpu, mode="eager", note="made by hand")
    damaged = eager_trace()
    damaged.events.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 60.0, "dur": -1.0})
    write_run(tmp_path / "w" / "default", damaged, mode="default")
    runs = worded(Result.of(analyze(tmp_path))).runs.set_index("mode")
    assert runs.loc["eager", "note"] == "made by hand; no GPU activity in this trace (CPU ops only)"
    assert runs.loc["default", "note"] == "1 events with a negative dur dropped (damaged trace)"
    assert runs.loc["default", "trace_problems"] == 1

"""CPU time by op, and what changed between modes, on hand-made CPU traces with known answers."""

import pytest
from tracebuilder import TraceBuilder, write_run

from tracekit.analysis.comparison.compare import compare
from tracekit.analysis.metrics import cpu_ops
from tracekit.analysis.result import Result
from tracekit.analysis.runs import analyze
from tracekit.report.column_specs import SPEEDUP
from tracekit.report.draw import headline
from tracekit.report.views import comparison_view
from tracekit.report.worded import worded
from tracekit.trace import load


def _eager() -> TraceBuilder:
    """2 iterations of 100 µs: linear 50 (of which addmm 46), gelu 30; 20 µs in no op."""
    t = TraceBuilder(device_name=None)
    for i, o in enumerate((0, 100), 1):
        t.step(i, o, 100)
        t.cpu_op("aten::linear", o + 10, 50)
        t.cpu_op("aten::addmm", o + 12, 46)
        t.cpu_op("aten::gelu", o + 60, 30)
    return t


def _compiled() -> TraceBuilder:
    """2 iterations of 60 µs: a compiled region of 50 holding Inductor's graph call (40),
    which calls addmm (28): self times 10, 12, 28; 10 µs in no op."""
    t = TraceBuilder(device_name=None)
    for i, o in enumerate((0, 60), 1):
        t.step(i, o, 60)
        t.cpu_op("Torch-Compiled Region: 0/0", o + 5, 50)
        t.cpu_op("## Call CompiledFxGraph abc ##", o + 10, 40, cat="user_annotation")
        t.cpu_op("aten::addmm", o + 12, 28)
    return t


def test_self_time_leaves_out_the_ops_an_op_calls(tmp_path):
    ops = cpu_ops.by_op(load(_eager().write(tmp_path / "e.json")), 2).set_index("op")
    assert ops.loc["aten::addmm", "self_per_iter_us"] == pytest.approx(46)
    assert ops.loc["aten::linear", "self_per_iter_us"] == pytest.approx(4)
    assert ops.loc["aten::linear", "total_us"] == pytest.approx(100)
    assert ops.loc["aten::gelu", "self_per_iter_us"] == pytest.approx(30)
    assert ops.loc[cpu_ops.OUTSIDE_OPS, "self_per_iter_us"] == pytest.approx(20)
    assert ops["self_per_iter_us"].sum() == pytest.approx(100)           # each µs of the iteration once
    assert ops.loc["aten::addmm", "calls_per_iter"] == 1 and ops.loc["aten::addmm", "self_share"] == pytest.approx(0.46)
    assert ops.loc["aten::addmm", "kind"] == "op" and ops.loc[cpu_ops.OUTSIDE_OPS, "kind"] == "outside"
    assert list(ops.index[:2]) == ["aten::addmm", "aten::gelu"]           # most self time first


def test_self_times_summed_in_small_blocks_are_the_same(fixtures, monkeypatch):
    """Children's time added a few ops at a time gives the same self times, to the bit."""
    tables = load(fixtures / "h100" / "vit16x6x384_eager.pt.trace.json.gz")
    whole = cpu_ops.self_us(tables)
    assert whole.sum() > 0 and (whole <= tables.cpu_ops["dur"].to_numpy()).all()
    monkeypatch.setattr(cpu_ops, "_BLOCK", 5)
    assert cpu_ops.self_us(tables).tolist() == whole.tolist()


def test_compiled_graph_time_is_the_graph_calls_own(tmp_path):
    ops = cpu_ops.by_op(load(_compiled().write(tmp_path / "c.json")), 2).set_index("op")
    assert ops["self_per_iter_us"].to_dict() == pytest.approx({
        "aten::addmm": 28, "## Call CompiledFxGraph abc ##": 12, "Torch-Compiled Region: 0/0": 10,
        cpu_ops.OUTSIDE_OPS: 10})


def _cpu_study(tmp_path):
    write_run(tmp_path / "w" / "eager", _eager(), mode="eager", latency_ms=(0.09, 0.085, 0.095),
              device_type="cpu", requested_device="cpu")
    write_run(tmp_path / "w" / "default", _compiled(), mode="default", latency_ms=(0.05, 0.048, 0.052),
              device_type="cpu", requested_device="cpu")
    return analyze(tmp_path)


def test_a_cpu_speedup_is_explained_op_by_op(tmp_path):
    a = _cpu_study(tmp_path)
    t = Result.of(a)
    ch = t.cpu_op_changes.set_index("op")
    # by |Δ| (ties by name): gelu -30, addmm -18, the graph call +12, outside ops -10, the region +10, linear -4
    assert list(t.cpu_op_changes["op"]) == ["aten::gelu", "aten::addmm", "## Call CompiledFxGraph abc ##",
                                            cpu_ops.OUTSIDE_OPS, "Torch-Compiled Region: 0/0", "aten::linear"]
    assert ch.loc["aten::gelu", "d_self_per_iter_ms"] == pytest.approx(-0.030)
    assert ch.loc["aten::addmm", "d_self_per_iter_ms"] == pytest.approx(-0.018)
    assert ch.loc["aten::linear", "d_calls_per_iter"] == -1
    assert ch.loc["## Call CompiledFxGraph abc ##", "d_self_per_iter_ms"] == pytest.approx(0.012)
    assert ch["d_self_per_iter_ms"].sum() == pytest.approx(-0.040)         # the profiled iteration: 100 -> 60 µs
    row = worded(t).comparison.set_index("mode").loc["default"]   # the report words the changes
    assert row["finding"] == (
        "profiled CPU time per iteration 0.100 -> 0.060 ms (-0.040), 3 -> 2 op calls; self time changed most in "
        "aten::gelu -0.030 ms (1 -> 0 calls), aten::addmm -0.018 ms (1 -> 1 calls), "
        "## Call CompiledFxGraph abc ## +0.012 ms (0 -> 1 calls)")
    assert row["cpu_ops_per_iter"] == 2 and row["cpu_op_per_iter_ms"] == pytest.approx(0.050)  # region + addmm
    assert row["speedup"] == pytest.approx(0.09 / 0.05)


def test_kernels_and_launches_of_a_cpu_run_read_na_not_0(tmp_path):
    a = _cpu_study(tmp_path)
    headers, rows = headline(a.runs)
    cells = dict(zip(headers, rows[0]))
    assert cells["kernels"] == cells["launches"] == cells["verdict"] == "n/a"
    headers, rows = headline(comparison_view(compare(a.runs)), SPEEDUP)
    cells = dict(zip(headers, rows[1]))
    assert cells["kernels ×"] == cells["launches ×"] == cells["Δ GPU busy (ms/iter)"] == "n/a"
    assert cells["speedup (p10-p90 range)"] == "1.80x (1.63-1.98)"


def test_gpu_runs_get_no_op_changes(study):
    """GPU runs are explained by busy and idle time; their op table is there, their changes are not."""
    t = Result.of(analyze(study))
    assert t.cpu_op_changes.empty and len(t.analysis.table("cpu_ops"))


def test_our_cpu_runs_say_why(tmp_path):
    """Our ViT on one CPU thread (tests/data/cpu): the op table accounts for every µs of each
    profiled iteration, and the comparison says which ops the speedup came from: ONNX Runtime's
    Gemm nodes instead of aten::addmm, Inductor's compiled graph instead of aten::gelu."""
    from owndata import CPU_RUNS
    a = analyze(CPU_RUNS)
    ops, runs = a.table("cpu_ops"), a.runs.set_index("trace")
    for trace, one in ops.groupby("trace"):
        if runs.loc[trace, "source"] == "pytorch":   # ORT's profile has no time outside its model_run ranges
            assert one["self_per_iter_us"].sum() == pytest.approx(runs.loc[trace, "iteration_ms"] * 1e3, rel=1e-6)
    t = Result.of(a)
    comp = worded(t).comparison.set_index("mode")
    assert comp.loc["onnx", "speedup"] > 1.5 and comp.loc["default", "speedup"] > 1
    ch = {mode: one.set_index("op") for mode, one in t.cpu_op_changes.groupby("mode")}
    onnx, default = ch["onnx"], ch["default"]
    assert onnx.loc["aten::addmm", "baseline_calls_per_iter"] == onnx.loc["Gemm", "calls_per_iter"] == 25
    assert onnx.loc["Gemm", "self_per_iter_ms"] < onnx.loc["aten::addmm", "baseline_self_per_iter_ms"]
    assert default.loc["aten::gelu", "calls_per_iter"] == 0 and default.loc["aten::gelu", "d_self_per_iter_ms"] < 0
    assert (default["kind"] == "range").any()                      # Inductor's "## Call CompiledFxGraph ##"
    for mode in ("onnx", "default"):
        finding = comp.loc[mode, "finding"]
        assert finding.startswith("profiled CPU time per iteration ") and t.cpu_op_changes[
            t.cpu_op_changes["mode"] == mode]["op"].iloc[0] in finding
    from tracekit.report import write_reports
    write_reports(t, tmp_path / "r", source="cpu")
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert "## CPU runs: what changed, op by op" in summary and "| vit16x6x384 b8 fp32 cpu | onnx | Gemm |" in summary

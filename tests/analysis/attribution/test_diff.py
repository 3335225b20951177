"""Two runs diffed by module (tracekit.analysis.attribution.module_diff, tracekit diff): known answers, exact sums."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.tracebuilder import TraceBuilder, add_cpu_range, write_run
from tracekit.analysis.attribution.run_diff import diff_runs
from tracekit.analysis.metrics import summary
from tracekit.cli import main
from tracekit.report.worded import worded
from tracekit.trace import load

KEY = "fxkey2"
RECORD = {"module_scopes": False, "provenance": {"graphs": [{"key": KEY, "compile_id": "0/0", "calls": [
    ["triton_tem_fused_addmm_gelu_0", 1, ["blocks.0.mlp.0", "blocks.0.mlp.1"], ["addmm", "gelu"]],
    ["triton_tem_fused_add_addmm_1", 2, ["blocks.0.mlp", "blocks.0.mlp.2"], ["add", "addmm"]]]}]}}


def eager_mlp() -> TraceBuilder:
    """2 iterations of an MLP block run eagerly: addmm 10 µs, gelu 3, addmm 10, add 2 (25 µs, 4 launches)."""
    t = TraceBuilder()
    for i, o in enumerate((0, 200), 1):
        t.step(i, o, 200)
        add_cpu_range(t, "module::", o + 1, 150)
        add_cpu_range(t, "module::blocks.0.mlp", o + 2, 140)
        for j, (sub, op, kernel, dur) in enumerate([("0", "aten::addmm", "gemm", 10), ("1", "aten::gelu", "gelu", 3),
                                                    ("2", "aten::addmm", "gemm", 10)]):
            add_cpu_range(t, f"module::blocks.0.mlp.{sub}", o + 5 + 30 * j, 20)
            add_cpu_range(t, op, o + 6 + 30 * j, 18)
            t.kernel(kernel, start=o + 100 + 15 * j, dur=dur, launch_at=o + 8 + 30 * j)
        add_cpu_range(t, "aten::add", o + 100, 10)
        t.kernel("add_kernel", start=o + 150, dur=2, launch_at=o + 102)
    return t


def compiled_mlp() -> TraceBuilder:
    """The same block compiled: two Triton kernels (12 and 9 µs), 2 launches per iteration."""
    t = TraceBuilder()
    for i, o in enumerate((0, 200), 1):
        t.step(i, o, 200)
        add_cpu_range(t, "Torch-Compiled Region: 0/0", o + 1, 150)
        add_cpu_range(t, f"## Call CompiledFxGraph {KEY} ##", o + 2, 140, cat="user_annotation")
        for j, (kernel, dur) in enumerate([("triton_tem_fused_addmm_gelu_0", 12), ("triton_tem_fused_add_addmm_1", 9)]):
            add_cpu_range(t, kernel, o + 5 + 30 * j, 20)
            t.kernel(kernel, start=o + 100 + 15 * j, dur=dur, launch_at=o + 8 + 30 * j, api="cuLaunchKernel")
    return t


@pytest.fixture
def runs(tmp_path):
    a = write_run(tmp_path / "mlp" / "eager", eager_mlp(), model="mlp", mode="eager",
                  attribution={"module_scopes": True})
    b = write_run(tmp_path / "mlp" / "default", compiled_mlp(), model="mlp", mode="default", attribution=RECORD)
    return a, b


def test_known_answer(runs):
    d = diff_runs(*runs, depth=3)
    row = d.modules.set_index("module").loc["blocks.0.mlp"]
    assert (row["busy_us_a"], row["busy_us_b"], row["d_busy_us"]) == pytest.approx((25.0, 21.0, -4.0))
    assert (row["kernels_a"], row["kernels_b"], row["launches_a"], row["launches_b"]) == (4, 2, 4, 2)
    assert row["ops_a"] == (("addmm", 2), ("gelu", 1), ("add", 1)) and row["became_triton"]
    row = worded(d).modules.set_index("module").loc["blocks.0.mlp"]   # as tracekit diff says it
    assert row["change"].startswith("4 kernels (addmm x2, gelu, add) became 2 Triton kernels (addmm+gelu, add+addmm)"
                                    "; busy -4.0 µs; launches 4 -> 2")
    assert row["vanished"] == "gemm x2, add_kernel x1, gelu x1" and row["appeared"].count(" x1") == 2
    assert row["fused"] == "triton_tem_fused_addmm_gelu_0 (addmm+gelu), triton_tem_fused_add_addmm_1 (add+addmm)"
    assert d.coverage_a == d.coverage_b == 1.0
    deeper = diff_runs(*runs, depth=4).modules.set_index("module")
    # a fused kernel belongs to the innermost module holding all it computes
    assert deeper.loc["blocks.0.mlp.0", "busy_us_a"] == 10 and deeper.loc["blocks.0.mlp.0", "busy_us_b"] == 0
    assert deeper.loc["blocks.0.mlp", "busy_us_a"] == 2 and deeper.loc["blocks.0.mlp", "busy_us_b"] == 21


def test_rows_sum_to_the_run_totals(runs):
    d = diff_runs(*runs, depth=2)
    a, b = (summary.summarize(load(next(p.glob("*.json.gz")))) for p in runs)
    assert d.totals["d_busy_us"] == pytest.approx(b["busy_per_iter_us"] - a["busy_per_iter_us"])
    assert d.totals["d_launches"] == pytest.approx(b["launches_per_iter"] - a["launches_per_iter"])
    for table in (d.modules, d.ops):
        for col in ("d_busy_us", "d_launches", "d_kernels", "d_idle_us"):
            assert table[col].sum() == pytest.approx(d.totals[col], abs=1e-9)
    assert d.ops.set_index(["module", "op"]).loc[("blocks.0", "add+addmm"), "busy_us_b"] == 9


def test_cli(runs, tmp_path):
    res = CliRunner().invoke(main, ["diff", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "d"), "--wide"])
    assert res.exit_code == 0, res.output
    assert "became 2 Triton kernels" in res.output and "sum to these exactly" in res.output
    data = json.loads((tmp_path / "d" / "diff.json").read_text())
    assert data["totals"]["d_launches"] == -2
    assert {"diff.md", "diff_modules.csv", "diff_ops.csv", "diff.json"} <= {p.name for p in (tmp_path / "d").iterdir()}
    assert CliRunner().invoke(main, ["diff", str(tmp_path / "nope"), str(runs[1])]).exit_code == 3
    assert CliRunner().invoke(main, ["diff", str(tmp_path / "mlp"), str(runs[1])]).exit_code == 2  # two runs


def test_python_api(runs):
    import tracekit

    d = tracekit.diff(*runs)
    assert d.totals["d_launches"] == -2 and d.coverage_b == 1.0
    pairs = tracekit.diff(runs[0].parent)
    assert len(pairs) == 1 and pairs[0].a == "eager" and pairs[0].b == "default"


def test_cpu_traces_say_there_is_no_gpu_op_to_attribute(tmp_path):
    """The README's main job on a CPU makes CPU-only traces: `tracekit diff` says so, instead of
    "Attributed to a module: A nan%" and a diff.md of empty tables (exit 0)."""
    from owndata import CPU_RUNS

    eager, default = CPU_RUNS / "vit16x6x384" / "eager", CPU_RUNS / "vit16x6x384" / "default"
    res = CliRunner().invoke(main, ["diff", str(eager), str(default), "--out", str(tmp_path / "d")])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("no GPU activity: diff attributes GPU ops") and "nan" not in res.stdout
    md = (tmp_path / "d" / "diff.md").read_text()
    assert "no GPU activity: diff attributes GPU ops" in md and "nan" not in md and "|" not in md
    res = CliRunner().invoke(main, ["diff", str(CPU_RUNS), "--out", str(tmp_path / "all")])
    assert res.exit_code == 0, res.output
    assert " ".join(res.stdout.split()) == (
        "no GPU activity: diff attributes GPU ops: 3 pair(s) of CPU-only runs left out (vit16x6x384 b8 fp32 cpu) "
        "vit16x6x384/eager: integrity ok vit16x6x384/default: integrity ok vit16x6x384/onnx: integrity ok")  # issue 40


@pytest.mark.parametrize("b, warning", [
    ("h100/vit-study/vit16x6x384-b1/default", "batch 8 vs 1"),
    ("cpu/vit16x6x384/default", "device cuda vs cpu"),
    ("h100/vit-study/vit16x6x384/default", None),
])
def test_runs_of_different_workloads_are_flagged(b, warning):
    """As `analyze` flags another device: a diff of runs that differ in model, batch, dtype or
    device (their run.json) compares workloads, not modes, and says so."""
    from owndata import DATA

    res = CliRunner().invoke(main, ["diff", str(DATA / "h100/vit-study/vit16x6x384/eager"), str(DATA / b)])
    assert res.exit_code == 0, res.output
    flagged = f"warning: A and B differ in {warning}: this diff compares workloads, not modes"
    assert (res.stdout.splitlines()[0] == flagged) if warning else "warning" not in res.stdout

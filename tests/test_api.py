"""The Python API: tracekit.profile on a module defined here, tracekit.analyze as DataFrames."""

import json
import subprocess
import sys

import pytest
import torch
from torch import nn

import tracekit
from tracekit import backends
from tracekit.trace import TraceError

QUICK = dict(warmup=1, iters=3, profile_iters=2)


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.body(x)


def test_analyze_returns_the_tables_of_tracekit_analyze(fixtures):
    result = tracekit.analyze(fixtures / "h100")
    kernels = result.runs.set_index("run")["kernels"]
    assert [kernels[f"vit16x6x384_{m}.pt.trace.json.gz"] for m in ("eager", "default", "reduce-overhead")] == \
        [660, 600, 610]  # the figures `tracekit analyze` prints for these traces (tests/test_cli.py)
    assert result["kernels"] is result.tables["kernels"] and len(result["streams"]) == 3  # one per trace
    assert result["no_such_table"].empty
    assert result["runs"] is result.runs and "profiler_overhead" in result.overhead


def test_analyze_returns_the_reports_own_tables(tmp_path):
    """tracekit.analyze returns what the reports show, nothing left out: CPU op changes, each run against
    its baseline module by module, busy time per kind of module (the figures of tests/report/test_modules_report.py)."""
    from tests.analysis.attribution.test_diff import RECORD, compiled_mlp, eager_mlp
    from tests.owndata import CPU_RUNS
    from tests.tracebuilder import write_run

    write_run(tmp_path / "mlp" / "eager", eager_mlp(), model="mlp", mode="eager", attribution={"module_scopes": True})
    write_run(tmp_path / "mlp" / "default", compiled_mlp(), model="mlp", mode="default", attribution=RECORD,
              latency_ms=(0.8, 0.7, 0.9))
    result = tracekit.analyze(tmp_path)
    assert isinstance(result, tracekit.api.Result) and result["modules"] is result.modules
    assert result.modules["d_busy_us"].sum() == -4.0
    busy = result.module_busy.set_index(["mode", "module"])["busy_per_iter_us"]
    assert busy[("eager", "blocks.*.mlp")] == 25 and busy[("default", "blocks.*.mlp")] == 21
    changes = tracekit.analyze(CPU_RUNS).cpu_op_changes.set_index(["run", "op"])
    assert changes.loc[("vit16x6x384/default", "aten::gelu"), "d_calls_per_iter"] == -6  # fused away by Inductor


def test_analyze_errors_carry_their_exit_codes(tmp_path):
    with pytest.raises(TraceError) as err:
        tracekit.analyze(tmp_path / "missing")
    assert err.value.code == 3
    with pytest.raises(TraceError, match="no traces found") as err:
        tracekit.analyze(tmp_path)
    assert err.value.code == 4
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TraceError) as err:
        tracekit.analyze(tmp_path)
    assert err.value.code in (6, 7) and "bad.json" in str(err.value)


def test_analyze_shows_its_speedup_table_in_a_notebook(study):
    html = tracekit.analyze(study)._repr_html_()
    assert "<table" in html and "reduce-overhead" in html and "2.00x" in html  # 0.08 ms / 0.04 ms


def test_profile_rejects_bad_arguments_before_running(tmp_path):
    with pytest.raises(backends.UnknownMode):
        tracekit.profile(TinyNet(), (torch.randn(2, 16),), modes=["eager", "turbo"], out=tmp_path)
    with pytest.raises(ValueError, match="plain folder name"):
        tracekit.profile(TinyNet(), (torch.randn(2, 16),), name="a/b", out=tmp_path)
    with pytest.raises(ValueError, match="not a built-in model"):
        tracekit.profile(TinyNet(), (torch.randn(2, 16),), name="mlp", out=tmp_path)
    with pytest.raises(ValueError, match="fp32, bf16 or fp16"):
        tracekit.profile(TinyNet().double(), (torch.randn(2, 16, dtype=torch.float64),), out=tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_profile_runs_each_mode_like_tracekit_trace(tmp_path):
    model = TinyNet()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(6, 16)
    result = tracekit.profile(model, (x,), modes=["eager", "jit"], phase="train-step", out=tmp_path,
                              name="tiny", log=lambda m: None, **QUICK)
    assert [m.status for m in result.manifests] == ["ok", "ok"]
    eager, jit = result.manifests
    assert eager.source.to_dict() == {"kind": "python", "class": f"{__name__}.TinyNet"}
    assert eager.spec.batch == 6 and eager.spec.dtype == "fp32" and eager.spec.device == "cpu"
    assert eager.latency_ms.n == 3 and eager.extra == {} and eager.parameters == 16 * 32 + 32 + 32 * 4 + 4
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # each mode trained a copy
    assert sorted(result.runs["run"]) == ["tiny-train-step/eager", "tiny-train-step/jit"]
    assert (result.runs["iterations"] == 2).all()
    row = result.comparison.set_index("mode").loc["jit"]
    assert row["baseline_run"] == "tiny-train-step/eager" and row["speedup"] > 0
    assert (tmp_path / "tiny-train-step" / "jit" / "run.json").is_file()
    # The CLI reads the folder like any other.
    r = subprocess.run([sys.executable, "-m", "tracekit", "analyze", str(tmp_path), "--json", "--out",
                        str(tmp_path / "reports")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(row["run"] for row in json.loads(r.stdout)["runs"]) == sorted(result.runs["run"])


@pytest.mark.gpu
def test_profile_on_the_gpu_compares_cuda_graphs_with_eager(tmp_path):
    model = TinyNet().cuda()
    result = tracekit.profile(model, torch.randn(1, 16, device="cuda"), modes=["eager", "cudagraphs"], out=tmp_path,
                              name="tiny", log=lambda m: None, **QUICK)
    row = result.comparison.set_index("mode").loc["cudagraphs"]
    assert row["status"] == "ok" and row["launches_ratio"] < 1  # one graph launch replaces the kernels' launches


def test_print_shows_a_short_summary(study):
    """print(result) gives the answer and the tables it holds, not the dataclass' repr of every DataFrame."""
    result = tracekit.analyze(study)
    lines = str(result).splitlines()
    assert str(result) == repr(result) and len(lines) == 4 and max(map(len, lines)) < 300
    assert lines[0] == f"tracekit.Result: 2 run(s) under {study}, compared with eager"
    assert lines[1] == "  vit16x6x384 b8 fp32 cuda: reduce-overhead 2.00x (1.40-2.57) over eager (0.080 -> 0.040 ms)"
    assert lines[2].startswith("    why: Δ GPU busy ") and lines[3].startswith("  .runs 2x")

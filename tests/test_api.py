"""The Python API: tracekit.profile on a module defined here, tracekit.analyze as DataFrames."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
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
    assert result["jobs"].empty                          # a table no trace here gave: empty
    with pytest.raises(KeyError, match="no analysis makes a table named 'no_such_table'"):
        result["no_such_table"]                          # a misspelt name: an error, not an empty result
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


CONV_B1 = Path(__file__).resolve().parent / "data" / "h200" / "predict-h200" / "conv-b1" / "eager"


def test_whatif_predicts_a_run_from_python_as_tracekit_whatif_does():
    """The committed H200 eager run of a small CNN at batch 1 (README "Predict before you compile"): as one
    CUDA graph replay, 0.053 ms an iteration from 0.231 ms, calibrated to its unprofiled 0.231 ms; its
    measured cudagraphs run took 0.057 ms (tests/analysis/test_critical_path.py)."""
    p = tracekit.whatif(CONV_B1, cuda_graphs=True)
    assert isinstance(p, tracekit.api.Prediction) and p.edits == ["cuda-graphs"] and not p.cannot_predict
    assert round(p.predicted_latency_ms, 4) == 0.0531 and round(p.measured_latency_ms, 4) == 0.2307
    assert round(p.modelled_latency_ms, 4) == 0.2308 and p.calibrated and round(p.host_scale, 4) == 0.3916
    before, after = p.critical_path_before, p.critical_path_after
    assert list(before.columns[:3]) == ["rank", "step", "latency_us"] and "kernel_us" in before
    assert list(before["step"]) == list(after["step"]) and len(before) >= 3   # one row per profiled iteration
    parts = [c for c in before.columns if c.endswith("_us") and c != "latency_us"]
    assert np.allclose(before[parts].sum(axis=1), before["latency_us"])      # the parts add up
    assert after["cpu_us"].sum() == 0 and after["kernel_us"].iloc[1:].mean() == pytest.approx(49.78, abs=0.01)
    d = p.to_dict()
    assert list(d) == ["path", "edits", "predicted_latency_ms", "predicted_low_ms", "predicted_high_ms",
                       "confidence", "measured_latency_ms", "modelled_latency_ms", "calibrated", "host_scale",
                       "gpu_scale", "host_source", "critical_path_before", "critical_path_after", "notes", "missing",
                       "interval_sources", "replay_costs", "unreadable", "integrity"]   # issue 40: integrity
    assert d["host_source"] == "fitted"   # launch-bound: the host's factor fitted to the latency
    # issue 39: the interval from its sources; the H200's own replay costs (replay_gpus/nvidia-h200.json)
    assert p.predicted_low_ms < p.predicted_latency_ms < p.predicted_high_ms
    assert set(d["interval_sources"]) == {"timer", "replay", "iterations", "fit"}
    assert d["interval_sources"]["replay"] == [0.0527, 0.0552] and d["predicted_high_ms"] == 0.0552
    assert d["replay_costs"]["measured"] and d["replay_costs"]["measured_on"] == ["NVIDIA H200"]
    assert p.confidence == d["confidence"] == "normal"   # its eager iteration reads nothing from the GPU
    assert (d["replay_costs"]["graph_launch_us"], d["replay_costs"]["replay_gap_us"]) == (27.699, 0.256)
    assert [(c["check"], c["status"]) for c in d["integrity"]] == [("accelerator", "ok")]
    assert d["critical_path_before"]["cpu_us"] == 190.58 and d["critical_path_after"]["gpu_gap_us"] == 3.33
    assert str(p).splitlines()[1:] == [
        "  predicted iteration 0.053 ms (0.053-0.055 ms), from 0.231 ms modelled (calibrated to the unprofiled "
        "0.231 ms (host time x0.39, GPU time x1.00))",
        "  critical path before: cpu 191 µs (85%), launch 33 µs (15%)",
        "  critical path after:  kernel 50 µs (94%), gpu_gap 3 µs (6%)",
        "  note: replay costs of the NVIDIA H200, measured on it (benchmarks/replay_probe.py): 27.7 µs + 0.46 µs a "
        "kernel of host time per replay, 0.26 µs between replayed kernels",
        f"  {p.integrity['trace'].iloc[0]}: integrity ok"]


def test_whatif_takes_faster_as_a_mapping_or_as_strings(tmp_path):
    from tracebuilder import eager_trace, write_run

    run = write_run(tmp_path / "w" / "eager", eager_trace(), latency_ms=(0.05, 0.045, 0.055))
    by_map = tracekit.whatif(run, faster={"gemm": 2}, host_faster=2)
    by_text = tracekit.whatif(run, faster=["gemm=2"], host_faster=2)
    assert by_map.edits == by_text.edits == ["faster gemm=2", "host-faster 2"]
    assert by_map.to_dict() == by_text.to_dict() == tracekit.whatif(run, faster="gemm=2", host_faster=2).to_dict()
    # host-bound (eager_trace: 100 µs iterations, 10 µs kernels): half the host time, half the iteration
    assert by_map.predicted_latency_ms == pytest.approx(by_map.modelled_latency_ms / 2, rel=0.01)


def test_whatif_errors_name_what_is_wrong(tmp_path):
    from tracebuilder import eager_trace, write_run

    from tracekit.analysis.critical_path import AnnotationError
    from tracekit.analysis.critical_path.edits import EditError

    run = write_run(tmp_path / "w" / "eager", eager_trace())
    with pytest.raises(EditError, match=r"--faster zzz=2: the pattern matches no kernel class, kernel, op or module"):
        tracekit.whatif(run, faster={"zzz": 2})
    with pytest.raises(ValueError, match="expected PATTERN=FACTOR"):   # an EditError is a ValueError
        tracekit.whatif(run, faster=["gemm"])
    with pytest.raises(EditError, match="expected a factor above 0"):
        tracekit.whatif(run, host_faster=0)
    with pytest.raises(EditError, match="no edit"):
        tracekit.whatif(run)
    with pytest.raises(AnnotationError, match="no CPU op or annotation named 'nope'"):
        tracekit.whatif(run, cuda_graphs=True, annotation="nope")
    with pytest.raises(TraceError) as err:
        tracekit.whatif(tmp_path / "missing", cuda_graphs=True)
    assert err.value.code == 3
    with pytest.raises(TraceError) as err:
        tracekit.whatif(tmp_path, cuda_graphs=True)     # a folder without a trace of its own
    assert err.value.code == 4


def test_whatif_says_what_cannot_be_predicted(tmp_path):
    from tracebuilder import TraceBuilder, write_run

    cpu = TraceBuilder()
    cpu.cpu_op("aten::mm", 0, 10)
    p = tracekit.whatif(write_run(tmp_path / "cpu", cpu, device_type="cpu"), cuda_graphs=True)
    assert p.cannot_predict == "no GPU ops in the trace: there is no host-GPU critical path to find"
    assert p.predicted_latency_ms is None and p.critical_path_before.empty
    trace = p.integrity["trace"].iloc[0]   # issue 40: each input's integrity, as tracekit analyze checks it
    assert p.to_dict() == {"path": str(tmp_path / "cpu"), "predicted_latency_ms": None,
                           "cannot_predict": p.cannot_predict, "unreadable": [], "integrity": [
                               {"trace": trace, "rank": 0, "check": "accelerator", "status": "ok", "count": 0,
                                "detail": "none"}]}
    assert str(p) == f"{tmp_path / 'cpu'}: cannot predict: {p.cannot_predict}\n  {trace}: integrity ok"
    one = TraceBuilder()
    one.step(1, 0, 100)
    one.kernel("gemm", start=15, dur=10, launch_at=10)
    run = write_run(tmp_path / "one", one, latency_ms=(0.05, 0.045, 0.055))
    assert tracekit.whatif(run, cuda_graphs=True).cannot_predict == \
        "1 launch in the trace: no launch overhead to remove or re-time"
    assert tracekit.whatif(run, faster={"gemm": 2}).predicted_latency_ms == pytest.approx(0.05, rel=0.01)

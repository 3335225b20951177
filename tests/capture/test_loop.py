"""tracekit.record around a hand-written training loop of a 3-layer MLP: a normal run folder."""

import gzip
import json

import pytest
import torch
from torch import nn

import tracekit
from tracekit.cli import main

COUNTS = dict(warmup=2, iters=4, profile_iters=3)  # the window: step 7 (profiler warm-up), steps 8-10


def train(path, mode="eager", steps=14, fail_at=None, **counts):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    forward = torch.compile(model) if mode == "default" else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracekit.record(path, mode=mode, phase="train-step", batch=16, **{**COUNTS, **counts}) as rec:
        for i in range(steps):
            if i == fail_at:
                raise RuntimeError("their loop broke")
            loss = nn.functional.cross_entropy(forward(torch.randn(16, 32)), torch.randint(0, 4, (16,)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
    return rec


def test_a_recorded_training_loop_is_a_normal_run(tmp_path):
    rec = train(tmp_path / "mlp3")
    m = json.loads((tmp_path / "mlp3" / "eager" / "run.json").read_text())
    assert m["status"] == "ok" and m["model"] == "mlp3" and m["mode"] == "eager" and m["label"] == "mlp3"
    assert m["spec"]["phase"] == "train-step" and m["spec"]["batch"] == 16 and m["device_type"] == "cpu"
    assert m["source"]["kind"] == "loop" and m["source"]["file"] == __file__
    assert m["environment"]["torch"] == torch.__version__
    # 14 steps: 2 warm-up, 4 timed, 1 profiler warm-up, 3 profiled, 4 timed after the window.
    assert m["steps"] == 14 and len(m["steps_ms"]) == 8 and m["latency_ms"]["n"] == 8
    assert m["latency_ms"]["timer"] == "perf_counter" and m["latency_ms"]["median"] > 0 and m["first_call_s"] > 0
    assert m["profile"]["iterations"] == 3 and len(m["profile"]["traces"]) == 1
    with gzip.open(tmp_path / "mlp3" / "eager" / m["profile"]["traces"][0]) as f:
        names = {e.get("name", "") for e in json.load(f)["traceEvents"]}
    # the one capture's profiled window, as a run's: the profiler starts at step 7 (its warm-up step, #0)
    assert {n for n in names if n.startswith("ProfilerStep#")} == {"ProfilerStep#1", "ProfilerStep#2",
                                                                   "ProfilerStep#3"}
    row = tracekit.analyze(tmp_path).runs.iloc[0]
    assert row["run"] == "mlp3/eager" and row["iterations"] == 3 and row["status"] == "ok"
    assert row["latency_median_ms"] == pytest.approx(m["latency_ms"]["median"])
    assert rec.manifest.status == "ok"


def test_recording_prints_none_of_kinetos_usdt_lines_and_keeps_the_loops_own(tmp_path, capfd):
    """Kineto writes "USDT:... profiler_start/stop" to file descriptor 2 when the window opens and closes."""
    import os
    with tracekit.record(tmp_path / "loop", **COUNTS) as rec:
        for i in range(12):
            os.write(2, f"loop step {i + 1}\n".encode())
            rec.step()
    err = capfd.readouterr().err
    assert rec.manifest.status == "ok" and "USDT" not in err
    own = [line for line in err.splitlines() if line.startswith("loop step")]
    assert own == [f"loop step {i}" for i in range(1, 13)]


def test_a_loop_too_short_for_the_window_is_a_failed_row(tmp_path):
    rec = train(tmp_path / "short", steps=5)
    assert rec.manifest.status == "failed" and "ended after 5 steps" in rec.manifest.reason
    assert rec.manifest.profile.iterations == 0 and rec.manifest.profile.traces == []


def test_an_exception_in_the_loop_is_recorded_and_goes_on(tmp_path):
    with pytest.raises(RuntimeError, match="their loop broke"):
        train(tmp_path / "broken", fail_at=3)
    m = json.loads((tmp_path / "broken" / "eager" / "run.json").read_text())
    assert m["status"] == "failed" and m["reason"].startswith("RuntimeError in the loop at step 4: their loop broke")


@pytest.mark.slow
def test_compare_treats_recorded_eager_and_compiled_loops_like_any_runs(tmp_path):
    from click.testing import CliRunner

    train(tmp_path / "mlp3", "eager")
    train(tmp_path / "mlp3", "default")
    r = CliRunner().invoke(main, ["compare", str(tmp_path / "mlp3" / "eager"), str(tmp_path / "mlp3" / "default")])
    assert r.exit_code == 0, r.output
    comparison = tracekit.analyze(tmp_path).comparison.set_index("mode")
    assert comparison.loc["default", "baseline_run"] == "mlp3/eager"
    assert comparison.loc["default", "workload"] == "mlp3 b16 fp32 train-step cpu"
    assert comparison.loc["default", "speedup"] > 0


@pytest.mark.gpu
def test_a_recorded_loop_on_the_gpu_is_timed_with_cuda_events_and_traces_kernels(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with tracekit.record(tmp_path / "gpu-mlp", phase="train-step", **COUNTS) as rec:
        for _ in range(12):
            loss = model(torch.randn(64, 256, device="cuda")).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
    assert rec.manifest.status == "ok" and rec.manifest.latency_ms.timer == "cuda_events"
    row = tracekit.analyze(tmp_path).runs.iloc[0]
    assert row["has_gpu"] and row["iterations"] == 3 and row["kernels"] > 0

import math

import pandas as pd
import pytest

from tracekit.analysis.comparison.compare import compare
from tracekit.analysis.comparison.suite_comparison import check_claims, comparison

H100 = "NVIDIA H100 80GB HBM3"


def _row(run, model, mode, latency, **kw):
    base = {"run": run, "model": model, "mode": mode, "batch": 8, "dtype": "fp32", "phase": "inference",
            "device_type": "cuda", "device_name": H100, "status": "ok", "reason": "", "has_gpu": True,
            "latency_median_ms": latency, "op": None, "iterations": 10}
    return {**base, **kw}


RUNS = pd.DataFrame([
    _row("vit/eager", "vit", "eager", 2.0, kernels_per_iter=66, launches_per_iter=66, busy_per_iter_us=1700,
         idle_per_iter_us=1200, idle_host_wait_us=10_000, utilization=0.59, peak_memory_MB=100, max_abs_diff=0.0),
    _row("vit/reduce-overhead", "vit", "reduce-overhead", 1.6, kernels_per_iter=64, launches_per_iter=2,
         busy_per_iter_us=1600, idle_per_iter_us=100, idle_host_wait_us=500, utilization=0.94, peak_memory_MB=150,
         max_abs_diff=2e-6),
    _row("vit/default", "vit", "default", 2.5, kernels_per_iter=59, launches_per_iter=59, busy_per_iter_us=1500,
         idle_per_iter_us=1300, idle_host_wait_us=12_000, utilization=0.54, peak_memory_MB=100, max_abs_diff=1e-6),
    _row("mm/eager", "matmul4096", "eager", 0.2, dtype="fp16", op="matmul4096", achieved_TFLOPs=687.2,
         pct_peak_compute=69.4, achieved_GBps=503.3, pct_peak_bw=15.0),
    _row("sm/eager", "softmax16384", "eager", 0.1, dtype="fp16", batch=4096, op="softmax16384",
         achieved_TFLOPs=3.4, pct_peak_compute=0.3, achieved_GBps=2684.4, pct_peak_bw=80.1),
    _row("smt/eager", "softmax16384-triton", "eager", 0.08, dtype="fp16", batch=4096, op="softmax16384",
         achieved_TFLOPs=4.2, pct_peak_compute=0.4, achieved_GBps=3355.4, pct_peak_bw=100.2),
    _row("big/eager", "vit", "eager", math.nan, batch=64, status="oom", reason="CUDA out of memory"),
    _row("fb/eager", "matmul4096", "eager", 0.6, dtype="fp16", phase="forward-backward", op="matmul4096",
         achieved_TFLOPs=229.1, pct_peak_compute=23.1),
])


def test_speedups_compare_with_the_eager_run_of_the_same_workload():
    cmp = comparison(RUNS).set_index("run")
    assert cmp.loc["vit/reduce-overhead", "speedup_vs_eager"] == pytest.approx(2.0 / 1.6)
    assert cmp.loc["vit/default", "speedup_vs_eager"] == pytest.approx(0.8)
    # The Triton softmax computes the op softmax16384: compared with eager torch.softmax.
    assert cmp.loc["smt/eager", "contender"] == "softmax16384-triton (eager)"
    assert cmp.loc["smt/eager", "speedup_vs_eager"] == pytest.approx(0.1 / 0.08)
    assert math.isnan(cmp.loc["big/eager", "speedup_vs_eager"])  # batch 64 has no eager result
    assert cmp.loc["fb/eager", "workload"] == "matmul4096 b8 fp16 cuda forward-backward"


def test_a_suite_takes_its_speedups_from_the_comparison_engine():
    """One engine: a suite's speedups, ranges and baselines are compare()'s, its workloads those of the op.
    Runs without p10-p90 latencies (older run.json files) get the engine's range of ±1 standard deviation
    (5% each side here: 1.25x * (1 -+ hypot(0.05, 0.05)) = 1.16-1.34), where a suite showed none."""
    runs = RUNS.assign(latency_std_ms=RUNS["latency_median_ms"] * 0.05)
    cmp = comparison(runs).set_index("run")
    engine = compare(runs, "eager", of_op=True).set_index("run")
    assert engine.loc["smt/eager", "baseline_run"] == "sm/eager"  # the Triton variant against the op's eager
    assert cmp.loc["smt/eager", "speedup_vs_eager"] == engine.loc["smt/eager", "speedup"] == pytest.approx(0.1 / 0.08)
    assert cmp.loc["vit/reduce-overhead", ["speedup_low_vs_eager", "speedup_high_vs_eager"]].round(2).tolist() == \
        engine.loc["vit/reduce-overhead", ["speedup_low", "speedup_high"]].round(2).tolist() == [1.16, 1.34]


def test_a_jobs_runs_compare_with_the_eager_run_of_the_same_parallelism():
    """distributed.toml's DDP and FSDP2 jobs of one model: each compared with its own eager job (an FSDP2
    run against DDP's eager showed 0.36x), never with the other's."""
    jobs = pd.DataFrame([_row(f"{p}/{m}", "vit", m, ms, phase="train-step", parallel=f"{p} x2")
                         for p, m, ms in (("ddp", "eager", 27.6), ("ddp", "default", 34.3), ("fsdp", "eager", 77.4),
                                          ("fsdp", "default", 81.6))])
    cmp = comparison(jobs).set_index("run")
    assert cmp.loc["fsdp/default", "speedup_vs_eager"] == pytest.approx(77.4 / 81.6)
    assert cmp.loc["fsdp/eager", "speedup_vs_eager"] == pytest.approx(1.0)
    assert cmp.loc["ddp/default", "speedup_vs_eager"] == pytest.approx(27.6 / 34.3)
    assert cmp.loc["fsdp/eager", "workload"] == "vit b8 fp32 cuda train-step fsdp x2"


def test_rates_of_a_forward_call_only():
    cmp = comparison(RUNS).set_index("run")
    assert cmp.loc["mm/eager", "achieved_TFLOPs"] == 687.2
    assert math.isnan(cmp.loc["fb/eager", "achieved_TFLOPs"])  # the stated work is one forward call's


def test_cpu_only_rows_have_no_gpu_figures():
    cpu = RUNS.assign(device_type="cpu", device_name="AMD EPYC", has_gpu=False)
    cmp = comparison(cpu)
    assert cmp["kernels_per_iter"].isna().all() and cmp["host_wait_per_iter_us"].isna().all()


def test_claims_are_checked_against_measured_values():
    claims = [
        {"text": "a", "metric": "speedup", "model": "vit", "mode": ["reduce-overhead"], "range": [1.3, 1.4]},
        {"text": "b", "metric": "launches_vs_eager", "mode": "reduce-overhead", "range": [0.005, 0.04]},
        {"text": "c", "metric": "kernels_vs_eager", "mode": "reduce-overhead", "range": [0.005, 0.04]},
        {"text": "d", "metric": "speedup", "model": "vit", "range": [0.7, 1.3]},
        {"text": "e", "metric": "speedup", "model": "nothing", "range": [1, 2]},
    ]
    table = check_claims(claims, comparison(RUNS)).set_index("claim")
    value = lambda claim: [round(v, 4) for *_, v in table.loc[claim, "measured"]]  # noqa: E731
    assert table.loc["a", "verdict"] == "contradicted" and value("a") == [1.25]
    assert table.loc["a", "measured"][0][:2] == ("vit b8 fp32 cuda", "reduce-overhead")
    assert table.loc["b", "verdict"] == "consistent" and value("b") == [0.0303]  # 2/66
    assert table.loc["c", "verdict"] == "contradicted" and value("c") == [0.9697]  # 64/66
    assert table.loc["d", "verdict"] == "consistent"  # 1.25 and 0.8; the eager baselines are not claims' runs
    assert table.loc["e", "verdict"] == "no data"


def test_a_run_on_another_device_than_asked_is_not_compared():
    onnx = _row("vit/onnx", "vit", "onnx", 50.0, device_type="cpu", device_name="Intel Xeon", has_gpu=False,
                requested_device="cuda")
    cmp = comparison(pd.concat([RUNS, pd.DataFrame([onnx])], ignore_index=True)).set_index("run")
    assert math.isnan(cmp.loc["vit/onnx", "speedup_vs_eager"])

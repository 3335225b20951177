"""Per-iteration results on our own H100 traces (tests/data/h100/vit-study: 10 ProfilerStep
iterations each, run.json beside them)."""

import pytest
from owndata import H100_STUDY as STUDY

from tracekit.analysis.metrics import idle
from tracekit.analysis.runs import analyze


def _study(run: str):
    a = analyze(STUDY, only={run})
    return a.runs.iloc[0], a.table("iterations"), a.table("launch_apis").set_index("api")


def test_batch_1_eager_iterations_are_each_launch_bound():
    run, it, apis = _study("vit16x6x384-b1/eager")
    assert len(it) == run["iterations"] == 10
    # every iteration launches the same work: the model's kernels and memsets, one launch each
    assert it["kernels"].nunique() == 1 and it["host_launches"].nunique() == 1
    assert apis["launches_per_iter"].sum() == it["host_launches"].iloc[0]
    assert (apis["gpu_ops_per_launch"] == 1).all()
    # every gap's next op was launched inside a marked iteration: per-iteration idle adds up
    idle_per_iter = it[[f"idle_{c}_us" for c in idle.CAUSES]].sum(axis=1)
    assert idle_per_iter.sum() == pytest.approx(run["idle_us"])
    # each iteration waits on the host most of its idle time, and more than it computes
    assert (it["idle_host_wait_us"] > 0.8 * idle_per_iter).all()
    assert (it["idle_host_wait_us"] > it["gpu_busy_us"]).all()
    assert run["cuda_graph_recoverable_us_per_iter"] == pytest.approx(it["idle_host_wait_us"].mean())
    # the host spends CPU time in framework ops before each iteration's first launch
    assert (it["framework_cpu_before_first_launch_us"] > 0).all()
    assert (it["framework_cpu_before_first_launch_us"] <= it["first_launch_after_us"]).all()


def test_reduce_overhead_is_one_graph_launch_an_iteration():
    run, it, apis = _study("vit16x6x384/reduce-overhead")
    assert apis.loc["cudaGraphLaunch", "launches_per_iter"] == 1
    assert apis.loc["cudaGraphLaunch", "kernels_per_launch"] > 50
    # the first step also runs ops queued before the window (no launch call in the trace)
    assert (it["host_launches"].iloc[1:] == 2).all()
    assert it["idle_host_wait_us"].sum() == run["idle_host_wait_us"] == 0
    assert run["verdict"] == "gpu-bound"


def test_every_analysis_runs_on_every_hta_fixture(fixtures):
    """Other GPUs and vendors, two ranks, CPU-only and counters-only traces: all analyzed, none an error."""
    a = analyze(fixtures / "hta")
    traces = sorted(p.relative_to(fixtures / "hta").as_posix() for p in (fixtures / "hta").rglob("*.gz"))
    assert a.errors == [] and sorted(a.runs["trace"]) == traces
    gpu = a.runs[a.runs["has_gpu"]]
    verdicts = dict(zip(a.runs.loc[~a.runs["has_gpu"], "trace"], a.runs.loc[~a.runs["has_gpu"], "verdict"]))
    # the counters-only trace has launch calls but no GPU op: GPU activity was not recorded (issue 17)
    assert {t.split("/")[0]: v for t, v in verdicts.items()} == {"cpu_only": "no GPU activity",
                                                                "cupti_profiler": "undetermined"}
    assert gpu["verdict"].isin(["launch-bound", "gpu-bound", "mixed", "undetermined"]).all()
    assert list(gpu[[f"idle_{c}_us" for c in idle.CAUSES]].sum(axis=1)) == pytest.approx(list(gpu["idle_us"]))
    for name in ("streams", "idle_histogram", "launch_apis", "kernels", "kernel_classes", "verdict_evidence"):
        assert set(a.table(name)["trace"]) <= set(gpu["trace"]) and len(a.table(name)), name

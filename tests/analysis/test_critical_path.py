"""The critical path of an iteration and the what-if re-timing, on hand-made traces with known
answers (tests/tracebuilder.py) and on real traces."""

import math

import numpy as np
import pytest
from tracebuilder import TID, TraceBuilder, add_gpu_sync, add_host_call, add_sync_call, eager_trace

from tracekit.analysis import critical_path as cp
from tracekit.analysis.critical_path.calibrate import calibrate
from tracekit.analysis.critical_path.edits import Edit, EditError, Replay, faster_edit
from tracekit.analysis.critical_path.graph import build
from tracekit.analysis.critical_path.kinds import CPU, HANDOFF
from tracekit.analysis.critical_path.predict import predict
from tracekit.analysis.critical_path import reasons
from tracekit.analysis.critical_path.retime import retime, weights
from tracekit.report.path_text import path_note, path_notes
from tracekit.trace import load


def _tables(t: TraceBuilder, tmp_path):
    return load(t.write(tmp_path / "t.pt.trace.json.gz"))


def _split(result, step: int) -> dict:
    row = result.split.set_index("step").loc[step]
    return {k.removesuffix("_us"): round(v, 6) for k, v in row.items() if k.endswith("_us") and v}


def test_a_host_bound_iteration_is_host_time_from_end_to_end(tmp_path):
    # eager_trace: 100 µs iterations, launches at 10 and 50 (4 µs each), kernels of 10 µs
    result = cp.analyze(_tables(eager_trace(), tmp_path))
    assert result.iterations["latency_us"].tolist() == [100.0, 100.0]
    # iteration 2: CPU 100-110, launch 110-114, CPU 114-150, launch 150-154, CPU after it to 200
    assert _split(result, 2) == {"latency": 100.0, "cpu": 92.0, "launch": 8.0}


def _queued(t: TraceBuilder, offset: float, step: int) -> None:
    """One GPU-bound iteration: three 40 µs kernels launched 5 µs apart, queued 1 µs apart."""
    t.step(step, offset, 30)
    for i, name in enumerate(("gemm", "elementwise_relu", "gemm")):
        t.kernel(name, start=offset + 3 + 41 * i, dur=40, launch_at=offset + 5 * i, launch_dur=2)


def test_a_gpu_bound_iteration_runs_through_its_kernels(tmp_path):
    t = TraceBuilder()
    _queued(t, 0, 1)
    result = cp.analyze(_tables(t, tmp_path))
    # launch 0-2, launch latency 2-3, kernels 3-43, 44-84, 85-125 with 1 µs gaps
    assert _split(result, 1) == {"latency": 125.0, "launch": 2.0, "launch_latency": 1.0, "gpu_gap": 2.0,
                                 "kernel": 120.0}
    segments = result.segments
    assert segments.loc[segments["part"] == "kernel", "class"].tolist() == ["GEMM/conv", "elementwise/fused",
                                                                           "GEMM/conv"][::-1]


def test_a_sync_returns_after_the_gpu_work_it_waits_for(tmp_path):
    t = TraceBuilder()
    t.step(1, 0, 110)
    t.kernel("gemm", start=3, dur=100, launch_at=0, launch_dur=2)
    add_sync_call(t, "cudaDeviceSynchronize", at=5, dur=100)   # returns at 105, 2 µs after the kernel
    result = cp.analyze(_tables(t, tmp_path))
    assert _split(result, 1) == {"latency": 110.0, "cpu": 5.0, "sync": 2.0, "kernel": 100.0, "launch_latency": 1.0,
                                 "launch": 2.0}


def test_a_cross_stream_wait_puts_the_recorded_stream_on_the_path(tmp_path):
    t = TraceBuilder()
    t.step(1, 0, 20)
    t.kernel("gemm", start=3, dur=50, stream=7, launch_at=0, launch_dur=2)
    record = add_host_call(t, "cudaEventRecord", at=3)
    wait = add_host_call(t, "cudaStreamWaitEvent", at=6)
    add_gpu_sync(t, start=7, dur=1, stream=8, correlation=wait, wait_on_stream=7,
                 wait_on_cuda_event_record_corr_id=record)
    t.kernel("relu", start=54, dur=10, stream=8, launch_at=9, launch_dur=2)
    result = cp.analyze(_tables(t, tmp_path))
    assert _split(result, 1) == {"latency": 64.0, "launch": 2.0, "launch_latency": 1.0, "kernel": 60.0,
                                 "stream_wait": 1.0}
    # without the cuda_sync event the wait is inferred (issue 38): the relu kernel, held 43 µs after its
    # launch, started 1 µs after the gemm of stream 7 ended; it no longer seems to wait for its launch
    t.events = [e for e in t.events if e.get("cat") != "cuda_sync"]
    blind = cp.analyze(_tables(t, tmp_path))
    assert _split(blind, 1) == _split(result, 1)
    assert {"code": reasons.INFERRED_WAITS, "waits": 1, "after_collective": 0} in blind.missing
    assert any("1 cross-stream waits inferred" in path_note(m) for m in blind.missing)
    # a wait event that does not name its record (NCCL's events, recorded outside the profiler's view:
    # wait_on_cuda_event_record_corr_id -1 in the H200 jobs' traces) is inferred the same way
    add_gpu_sync(t, start=7, dur=1, stream=8, correlation=wait, wait_on_stream=-1, wait_on_cuda_event_record_corr_id=-1)
    unnamed = cp.analyze(_tables(t, tmp_path))
    assert _split(unnamed, 1) == _split(result, 1)
    assert {"code": reasons.INFERRED_WAITS, "waits": 1, "after_collective": 0, "unnamed": 1} in unnamed.missing
    assert any(path_note(m).startswith("1 cross-stream waits whose event record the trace does not name: 1 "
                                       "cross-stream waits inferred") for m in unnamed.missing)


def test_a_thread_that_waits_for_another_hands_the_path_over(tmp_path):
    t = TraceBuilder()
    t.step(1, 0, 100)
    t.kernel("gemm", start=5, dur=5, launch_at=0, launch_dur=2)          # main thread
    for at in (20, 30):                                                  # autograd's device thread
        t.events.append({"ph": "X", "cat": "cpu_op", "name": "x", "pid": 100, "tid": 2, "ts": t.base + at,
                         "dur": 1, "args": {}})
    b1 = t.kernel("relu", start=25, dur=5, launch_at=20, launch_dur=2)
    b2 = t.kernel("relu", start=35, dur=5, launch_at=30, launch_dur=2)
    for e in t.events:
        if e.get("args", {}).get("correlation") in (b1, b2) and e["cat"] == "cuda_runtime":
            e["tid"] = 2
    t.kernel("gemm", start=55, dur=5, launch_at=50, launch_dur=2)        # main thread again
    g = build([(0, _tables(t, tmp_path))])
    main = g.thread[np.flatnonzero(g.name == "cudaLaunchKernel")]
    handoffs = g.edge_kind == HANDOFF
    assert handoffs.sum() == 2 and len(set(main.tolist())) == 2
    # the main thread's gap around the other thread's calls is waiting, not CPU time
    main_cpu = (g.edge_kind == CPU) & (g.thread[g.src] == g.thread[g.dst]) & (g.thread[g.dst] == g.thread[0])
    assert g.lag[main_cpu].tolist() == [0.0]


@pytest.mark.parametrize("name", ["own:vit16x6x384-b1/eager", "own:vit16x6x384-b1/reduce-overhead",
                                  "hta/critical_path/simple_add", "hta/critical_path/cuda_event_sync",
                                  "hta/alexnet", "hta/trace_filter", "hta/ns_resolution_trace"])
def test_retiming_without_an_edit_gives_the_traced_times_back(real_trace, name):
    found = real_trace(name)
    files = [found] if found.is_file() else sorted(found.rglob("*.json.gz"))
    for f in files:
        tables = load(f)
        g = build([(0, tables)])
        tm = retime(g, *weights(g))
        assert np.nanmax(np.abs(tm.start - g.ts)) < 1e-6 and np.nanmax(np.abs(tm.end - g.end)) < 1e-6
        result = cp.analyze(tables)
        # an iteration's parts add up to its length (within the µs of clock skew between host and GPU)
        parts = result.split[[c for c in result.split if c.endswith("_us") and c != "latency_us"]].sum(axis=1)
        assert np.allclose(parts, result.split["latency_us"], atol=1.0)


def _gpu_bound(iterations: int = 4) -> TraceBuilder:
    """GPU-bound iterations: the host launches three 40 µs kernels every 30 µs, which queue
    1 µs apart on the GPU (123 µs of GPU work an iteration)."""
    t = TraceBuilder()
    for i in range(iterations):
        t.step(i + 1, 30 * i, 30)
        for j, name in enumerate(("gemm", "elementwise_relu", "gemm")):
            t.kernel(name, start=3 + 41 * (3 * i + j), dur=40, launch_at=30 * i + 5 * j, launch_dur=2)
    return t


def test_back_to_back_gpu_bound_iterations_last_their_gpu_work(tmp_path):
    result = cp.analyze(_tables(_gpu_bound(), tmp_path))
    assert result.iterations["latency_us"].tolist()[1:] == [123.0] * 3
    assert _split(result, 3) == {"latency": 123.0, "gpu_gap": 3.0, "kernel": 120.0}


@pytest.mark.parametrize("launch_us, expected", [(15.0, 123.0), (150.0, 150.0)])
def test_cuda_graphs_leave_the_gpu_work_or_the_graph_launch(tmp_path, launch_us, expected):
    # GPU-bound: three 40 µs kernels and their 1 µs replay gaps; host-bound: one graph launch
    result = predict(_tables(_gpu_bound(), tmp_path), [Edit("cuda-graphs")], replay=Replay(launch_us, 1.0))
    assert result.predicted_ms * 1e3 == pytest.approx(expected)
    assert not result.calibration.calibrated and result.calibration.note == {"code": reasons.NO_LATENCY}
    assert "uncalibrated" in path_note(result.calibration.note)


def test_a_faster_kernel_class_is_a_faster_iteration(tmp_path):
    tables = _tables(_gpu_bound(), tmp_path)
    assert predict(tables, [faster_edit("gemm=2")]).predicted_ms * 1e3 == pytest.approx(123 - 40)
    assert predict(tables, [faster_edit("*relu*=4")]).predicted_ms * 1e3 == pytest.approx(123 - 30)
    with pytest.raises(EditError, match="zzz"):
        predict(tables, [faster_edit("zzz=2")])
    with pytest.raises(EditError, match="factor"):
        faster_edit("gemm=0")


def test_host_faster_shortens_a_host_bound_iteration(tmp_path):
    result = predict(_tables(eager_trace(), tmp_path), [Edit("host-faster", factor=2)])
    assert result.modelled_ms * 1e3 == pytest.approx(100) and result.predicted_ms * 1e3 == pytest.approx(50)


def test_host_faster_scales_the_host_time_inside_a_launch_call_its_op_began_in(tmp_path):
    """Issue 39 (HTA's traces): a launch call of 3 ms whose kernel began 2 ms into it (a synchronous
    launch, a graph replay): those 2 ms are host time, so a host twice as fast starts the kernel 1 ms
    in, and the 3.2 ms iteration (the call, then 0.2 ms of CPU to the marker's end) takes 1.6 ms."""
    t = TraceBuilder()
    for i in range(3):
        t.step(i + 1, 4000 * i, 3200)
        t.kernel("gemm", start=4000 * i + 2000, dur=100, launch_at=4000 * i, launch_dur=3000)
    result = predict(_tables(t, tmp_path), [Edit("host-faster", factor=2)])
    assert result.modelled_ms == pytest.approx(3.2) and result.predicted_ms == pytest.approx(1.6)


def test_calibration_fits_the_host_time_to_the_unprofiled_latency(tmp_path):
    t = TraceBuilder()
    for i in range(4):
        t.step(i + 1, 100 * i, 100)
        t.kernel("gemm", start=100 * i + 15, dur=10, launch_at=100 * i + 10)
    traced = cp.analyze(_tables(t, tmp_path))
    cal = calibrate(traced.graph, traced.steps, traced.markers, 0.05)
    assert cal.calibrated and cal.host_scale == pytest.approx(0.5, rel=0.01)
    assert cal.modelled_ms == pytest.approx(0.05, rel=0.003) and cal.traced_ms == pytest.approx(0.1)
    # a measurement no host time can reach is said, not hidden
    slow = calibrate(traced.graph, traced.steps, traced.markers, 1.0)
    assert slow.host_scale == 1.5 and slow.note["code"] == reasons.LATENCY_ABOVE
    assert "unreliable" in path_note(slow.note)
    assert math.isnan(calibrate(traced.graph, traced.steps, traced.markers, None).measured_ms)
    # the profiler slowed this host 8x (a launch-bound run of tiny kernels, issue 39's mobilenet): the
    # host is given that stretch and the kernels keep their 10 µs, rather than the host stopped at x0.25
    # and the GPU bent to half its time to fit
    stretched = calibrate(traced.graph, traced.steps, traced.markers, 0.1 / 8)
    # (each 100 µs step is host time, its kernel inside it: the host x1/8 gives the 12.5 µs measured)
    assert stretched.calibrated and stretched.gpu_scale == 1.0
    assert stretched.host_scale == pytest.approx(1 / 8, rel=0.01)
    assert stretched.modelled_ms == pytest.approx(0.0125, rel=0.003)
    assert stretched.note["code"] == reasons.HOST_STRETCHED and path_note(stretched.note) == (
        "host-bound: the profiler slowed the host more than 4x: host time x0.125, the GPU ops as traced")


def test_a_trace_without_markers_is_one_iteration_from_its_first_cpu_op(tmp_path):
    """Issue 39 (HTA's simple_add trace, 493 ms of CPU ops before its first CUDA call): without
    markers the iteration is the whole trace, its CPU ops before the first launch included."""
    t = TraceBuilder()
    t.cpu_op("aten::randn", 0, 500)                              # 500 µs of CPU before any CUDA call
    t.kernel("gemm", start=520, dur=30, launch_at=500, launch_dur=10)
    result = cp.analyze(_tables(t, tmp_path))
    assert result.latency_us() == pytest.approx(550)             # from 0, not from the launch at 500
    assert {"code": reasons.NO_MARKERS} in result.problems
    assert _split(result, 0)["cpu"] == pytest.approx(500)


def test_no_gpu_ops_is_said_not_computed(tmp_path):
    t = TraceBuilder()
    t.cpu_op("aten::mm", 0, 10)
    with pytest.raises(ValueError, match="no GPU ops"):
        cp.analyze(_tables(t, tmp_path))
    assert TID  # the helper's thread id is the one the builder writes


NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def _nccl_rank(rank: int, arrive: float) -> TraceBuilder:
    """A GPU-bound iteration: a gemm [0, arrive) on stream 7; an all_reduce (Seq 1) on stream 20
    waiting for it, until 700 (the last rank arrives at 600, the transfer takes 100); a gemm
    [700, 900) on stream 7 waiting for the all_reduce. The host launches it all by 20."""
    t = TraceBuilder(distributed={"rank": rank, "world_size": 2, "backend": "nccl"})
    t.step(1, -20, 50)
    t.kernel("gemm", start=0, dur=arrive, launch_at=-10)
    for at, waiting, recorded, kernel in ((-5, 20, 7, None), (15, 7, 20, None)):
        record = add_host_call(t, "cudaEventRecord", at=at)
        wait = add_host_call(t, "cudaStreamWaitEvent", at=at + 2)
        add_gpu_sync(t, start=at + 3, dur=1, stream=waiting, correlation=wait, wait_on_stream=recorded,
                     wait_on_cuda_event_record_corr_id=record)
        if at < 0:
            t.cpu_op("record_param_comms", 5, 10, **{"Collective name": "allreduce", "Seq": 1,
                                                    "Process Group Name": "0", "In msg nelems": 256,
                                                    "dtype": "Float"})
            t.kernel(NCCL, start=arrive, dur=700 - arrive, stream=20, launch_at=8)
    t.kernel("gemm", start=700, dur=200, launch_at=20)
    return t


def test_a_job_waits_for_its_last_rank_at_the_collective(tmp_path):
    ranks = [(r, load(_nccl_rank(r, arrive).write(tmp_path / f"rank{r}.pt.trace.json.gz")))
             for r, arrive in ((0, 400), (1, 600))]
    result = cp.analyze(ranks)
    fast, slow = _split_rank(result, 0), _split_rank(result, 1)
    # rank 0: its second gemm (200) after the all_reduce, which ends 100 µs after rank 1 arrived;
    # before that the path is on rank 1 (its gemm, launch and the host before it: 620): waiting for it
    assert fast == {"latency": 920.0, "kernel": 200.0, "comm": 100.0, "rank_wait": 620.0}
    assert slow == {"latency": 920.0, "kernel": 800.0, "comm": 100.0, "launch_latency": 6.0, "launch": 4.0,
                    "cpu": 10.0}   # rank 1 before its first call: its CPU time
    job = predict(ranks, [Edit("balance-ranks")])
    assert job.modelled_ms * 1e3 == pytest.approx(920)   # the slowest rank's iteration, from its marker's start
    # balanced (issue 38): rank 1's gemm, 200 µs longer than rank 0's, takes rank 0's 400 µs; both arrive
    # at 400, end the all_reduce at 500 and their last gemm at 700: 720 from the markers' start
    assert job.predicted_ms * 1e3 == pytest.approx(720)
    assert job.balanced.set_index("rank")["gpu_excess_us"].to_dict() == pytest.approx({1: 200.0})


def _split_rank(result, rank: int) -> dict:
    row = result.split.set_index(["rank", "step"]).loc[(rank, 1)]
    return {k.removesuffix("_us"): round(v, 6) for k, v in row.items() if k.endswith("_us") and v}


def test_a_real_two_rank_job_retimes_to_its_trace(fixtures):
    folder = fixtures / "dist" / "hta-trace-filter-sampled-2rank"
    ranks = [(r, load(folder / f"sampled_rank-{r}.json.gz")) for r in (0, 1)]
    g = build(ranks)
    assert (g.edge_kind == 6).sum() > 0          # matched collectives join the ranks
    tm = retime(g, *weights(g))
    assert np.nanmax(np.abs(tm.start - g.ts)) < 1e-6 and np.nanmax(np.abs(tm.end - g.end)) < 1e-6


def test_a_gpu_bound_run_takes_its_host_factor_from_the_unprofiled_host_time(tmp_path):
    traced = cp.analyze(_tables(_gpu_bound(), tmp_path))   # 30 µs markers, 123 µs of GPU work a step
    cal = calibrate(traced.graph, traced.steps, traced.markers, 0.123, host_ms=0.015)
    assert cal.host_scale == pytest.approx(0.5) and cal.gpu_scale == 1.0 and cal.note["host_ms"] == 0.015
    assert "host time per call" in path_note(cal.note)
    # the GPU ran 10% longer profiled than not: its ops scaled to the measurement
    faster_gpu = calibrate(traced.graph, traced.steps, traced.markers, 0.123 * 0.9, host_ms=0.015)
    assert faster_gpu.gpu_scale == pytest.approx(0.9, rel=0.01) and faster_gpu.host_scale == pytest.approx(0.5)
    blind = calibrate(traced.graph, traced.steps, traced.markers, 0.123)
    assert blind.host_scale == 0.25 and blind.note["host_ms"] is None
    assert "says nothing of the host" in path_note(blind.note)


def test_analyze_with_the_critical_path_in_every_report(tmp_path):
    from click.testing import CliRunner
    from tracebuilder import write_run

    from tracekit.cli import main

    t = TraceBuilder()
    for i in range(4):   # host-bound: 100 µs iterations, two 10 µs kernels each
        t.step(i + 1, 100 * i, 100)
        t.kernel("gemm", start=100 * i + 15, dur=10, launch_at=100 * i + 10)
        t.kernel("gemm", start=100 * i + 55, dur=10, launch_at=100 * i + 50)
    write_run(tmp_path / "runs" / "w" / "eager", t, latency_ms=(0.05, 0.045, 0.055))
    cpu = TraceBuilder()
    cpu.cpu_op("aten::mm", 0, 10)
    write_run(tmp_path / "runs" / "c" / "eager", cpu, device_type="cpu", requested_device="cpu")
    r = CliRunner().invoke(main, ["analyze", str(tmp_path / "runs"), "--critical-path", "--out", str(tmp_path / "r")])
    assert r.exit_code == 0, r.output
    assert "critical path: share of each part" in r.output
    assert "c/eager: critical path: no critical path: no GPU ops in the trace" in r.output
    for name in ("summary.md", "index.html"):
        assert "Critical path" in (tmp_path / "r" / name).read_text()
    split = __import__("pandas").read_csv(tmp_path / "r" / "critical_path.csv")
    assert split["step"].tolist() == [1, 2, 3, 4]
    # calibrated to the unprofiled 50 µs: the host's time halved (the iteration is all host time)
    runs = __import__("pandas").read_csv(tmp_path / "r" / "runs.csv").set_index("run")
    assert runs.loc["w/eager", "cp_latency_us"] == pytest.approx(50, rel=0.01)
    assert runs.loc["w/eager", "cp_host_scale"] == pytest.approx(0.5, rel=0.01)
    assert runs.loc["w/eager", "cp_cpu_share"] + runs.loc["w/eager", "cp_launch_share"] == pytest.approx(1)
    # as one graph replay: the two 10 µs kernels, their gap and launch latency, or the replay's host cost
    predicted = runs.loc["w/eager", "cuda_graphs_predicted_ms"]
    assert 0.02 < predicted < 0.05 and runs.loc["w/eager", "cuda_graphs_saving_ms"] == pytest.approx(0.05 - predicted)
    r = CliRunner().invoke(main, ["analyze", str(tmp_path / "runs"), "--json", "--out", str(tmp_path / "r2")])
    out = __import__("json").loads(r.output)
    assert "critical_path" not in out   # without the option: the prediction only, in the runs
    assert any(row.get("cuda_graphs_predicted_ms") for row in out["runs"])
    assert not (tmp_path / "r2" / "critical_path.csv").exists()


@pytest.mark.parametrize("workload", ["conv-b1", "torchvision-resnet18-b64", "conv-b1-forward-backward"])
def test_the_committed_h200_runs_predict_their_cuda_graphs_within_ten_percent(workload):
    """The H200 runs of workloads/predict-h200.toml kept in the repository (tests/data/h200/predict-h200): the
    prediction from the eager run folder alone against the measured cudagraphs run."""
    from pathlib import Path

    from tracekit.analysis.critical_path.predict import from_run
    from tracekit.analysis.critical_path.run_inputs import run_inputs
    from tracekit.manifest import Manifest

    cells = Path(__file__).resolve().parents[2] / "tests" / "data" / "h200" / "predict-h200" / workload
    found = run_inputs(cells / "eager")
    predicted = from_run(found.ranks, found.manifest, [Edit("cuda-graphs")]).predicted_ms
    measured = Manifest.read(cells / "cudagraphs").latency("median")
    assert predicted == pytest.approx(measured, rel=0.10)


def test_the_ops_and_modules_on_a_gpu_bound_path_are_named(tmp_path):
    """ResNet-18, batch 64, eager on the H200 (committed): the path runs through the kernels, so
    its ops and modules are those of the kernels: convolutions first, the stem's conv1 the module
    with the most time (its 7x7 convolution on 224x224 inputs), kernels before any host call."""
    import shutil
    from pathlib import Path

    from tracekit.api import analyze as api_analyze

    cell = Path(__file__).resolve().parents[2] / "tests" / "data" / "h200" / "predict-h200" / \
        "torchvision-resnet18-b64" / "eager"
    shutil.copytree(cell, tmp_path / "r18" / "eager")
    result = api_analyze(tmp_path, critical_path=True)
    top = result["critical_path_top"]
    first = {by: rows.iloc[0] for by, rows in top[top["key"] != ""].groupby("by")}
    assert first["op"]["key"] == "convolution" and first["op"]["share"] > 0.5
    assert first["module"]["key"] == "conv1"
    assert first["name"]["part"] == "kernel"
    for by, rows in top.groupby("by"):   # shares of the path, largest first
        assert rows["share"].is_monotonic_decreasing and rows["share"].sum() <= 1 + 1e-9


def test_the_annotation_option_says_what_marks_an_iteration(tmp_path):
    """Iterations marked by a user annotation (no ProfilerStep markers): with the option, one
    critical path per annotation; without it, the whole trace as one; an annotation the trace
    lacks is said in the note, not an analysis failure."""
    from tracebuilder import write_run

    from tracekit.analysis.options import AnalysisOptions
    from tracekit.analysis.runs import analyze

    t = TraceBuilder()
    for i in range(4):   # host-bound: 100 µs iterations, two 10 µs kernels each
        t.cpu_op("train_step", 100 * i, 100, cat="user_annotation")
        t.kernel("gemm", start=100 * i + 15, dur=10, launch_at=100 * i + 10)
        t.kernel("gemm", start=100 * i + 55, dur=10, launch_at=100 * i + 50)
    write_run(tmp_path / "w" / "eager", t, latency_ms=(0.05, 0.045, 0.055))

    def run(annotation):
        a = analyze(tmp_path, AnalysisOptions(critical_path=True, annotation=annotation))
        return a.runs.iloc[0], a.table("critical_path")
    row, split = run("train_step")
    assert split["step"].tolist() == [0, 1, 2, 3] and row["critical_path_note"] == ()
    assert row["cp_latency_us"] == pytest.approx(50, rel=0.01)   # calibrated to the unprofiled 50 µs
    row, split = run(None)
    assert len(split) == 1 and {"code": reasons.NO_MARKERS} in row["critical_path_note"]
    assert "no ProfilerStep markers" in path_notes(row["critical_path_note"])
    row, split = run("nope")
    assert split.empty and row["failed_analyses"] == ""
    assert row["critical_path_note"] == ({"code": reasons.NO_PATH,
                                          "why": {"code": reasons.NO_ANNOTATION, "annotation": "nope"}},)
    assert path_notes(row["critical_path_note"]) == ("no critical path: no CPU op or annotation named 'nope' in "
                                                     "the trace")
    assert math.isnan(row["cuda_graphs_predicted_ms"])


def _nested(t: TraceBuilder, offset: float = 0.0) -> None:
    """One outer ``fwd`` [0, 700) holding an inner one [200, 500) (HTA's simple_add nests its forward
    annotations so): launch A at 50 (kernel 60-70); in the inner, launch B at 300 (kernel 310-1000);
    after the inner, still in the outer, launch C at 600 (kernel 1001-1011, queued behind B)."""
    t.cpu_op("fwd", offset, 700, cat="user_annotation")
    t.cpu_op("fwd", offset + 200, 300, cat="user_annotation")
    t.kernel("gemm", start=offset + 60, dur=10, launch_at=offset + 50)
    t.kernel("gemm", start=offset + 310, dur=690, launch_at=offset + 300)
    t.kernel("gemm", start=offset + 1001, dur=10, launch_at=offset + 600)


def test_an_outer_annotation_instance_runs_through_the_nested_one(tmp_path):
    """Issue 39 (HTA's simple_add: nested instances of its forward annotation): the outer instance's
    path runs through the inner one, its GPU work included, to the kernel of its own last launch
    (1,011 µs), instead of ending at its last call outside the inner one with the inner as a CPU
    tail (700 µs); the inner one is timed from its own start (800 µs), not from the outer's finish;
    the iteration is the outer one's."""
    t = TraceBuilder()
    _nested(t)
    result = cp.analyze(_tables(t, tmp_path), annotation="fwd")
    it = result.iterations.set_index("step")
    assert it["within"].tolist() == [-1, 0]
    assert it["latency_us"].tolist() == [1011.0, 800.0]
    # kernel C 10, its gap 1, kernel B 690, B's launch latency 6, launches A and B 4 each, CPU 50 + 246
    assert _split(result, 0) == {"latency": 1011.0, "cpu": 296.0, "launch": 8.0, "launch_latency": 6.0,
                                 "gpu_gap": 1.0, "kernel": 700.0}
    assert _split(result, 1) == {"latency": 800.0, "cpu": 100.0, "launch": 4.0, "launch_latency": 6.0,
                                 "kernel": 690.0}
    assert result.latency_us() == 1011.0
    # the call after the inner instance's end is the outer one's
    g = result.graph
    launches = np.flatnonzero(g.name == "cudaLaunchKernel")
    assert result.steps[launches[np.argsort(g.ts[launches])]].tolist() == [0, 1, 0]


def test_a_faster_host_never_makes_a_nested_instance_more_than_twice_as_fast(tmp_path):
    """Issue 39: whatif --annotation with nested instances: a 2x faster host halves the host's part
    of each instance (outer 1,011 -> 859 µs: kernels 700, gap 1 and launch latency 6 stay; inner 800 ->
    748 µs), never more, and the prediction is the outer instance's (the inner is part of it, not one
    more iteration to average with it: 859, where the old chaining gave the inner 228 µs from the
    outer's finish)."""
    t = TraceBuilder()
    _nested(t)
    result = predict(_tables(t, tmp_path), [Edit("host-faster", factor=2)], annotation="fwd")
    before = result.before.iterations.set_index("step")["latency_us"]
    after = result.after.iterations.set_index("step")["latency_us"]
    assert after.tolist() == pytest.approx([859.0, 748.0])
    assert (after >= before / 2).all()
    assert result.modelled_ms * 1e3 == pytest.approx(1011) and result.predicted_ms * 1e3 == pytest.approx(859)
    # a CUDA graph of the outer instance is one replay, its nested instance's kernels in it
    graphs = predict(_tables(t, tmp_path), [Edit("cuda-graphs")], annotation="fwd", replay=Replay(20.0, 1.0))
    # one graph launch (20 µs) at the outer's first call, then the 3 kernels 1 µs apart: 6 + 10 + 1 + 690 + 1 + 10
    assert graphs.predicted_ms * 1e3 == pytest.approx(20 + 6 + 10 + 1 + 690 + 1 + 10)


def _t_paced() -> TraceBuilder:
    """Five 100 µs steps, each one launch at +10 (4 µs) of a 90 µs kernel: the host's 100 µs set the
    traced pace; with a host a tenth faster the GPU's 90 µs would."""
    t = TraceBuilder()
    for i in range(5):
        t.step(i + 1, 100 * i, 100)
        t.kernel("gemm", start=100 * i + 15, dur=90, launch_at=100 * i + 10)
    return t


def test_a_gpu_bound_fit_never_shrinks_kernels_to_make_room_for_host_time(tmp_path):
    """Issue 39: unprofiled 91 µs, and a host measured at 95.2 µs a call (x0.952): the GPU alone
    (90 µs of kernel) meets 91 µs, so the kernels keep their time and the host's factor is lowered
    to x0.91 (91 of its 100 traced µs), where the fit used to shrink the kernels to x0.5 and still
    miss."""
    traced = cp.analyze(_tables(_t_paced(), tmp_path))
    cal = calibrate(traced.graph, traced.steps, traced.markers, 0.091, 0.0952)
    assert cal.gpu_scale == 1.0 and cal.host_scale == pytest.approx(0.91, rel=0.003)
    assert cal.host_source == "measured" and cal.note["host_lowered_from"] == pytest.approx(0.952)
    assert path_note(cal.note) == (
        "GPU-bound: GPU ops 0% faster unprofiled than traced; host time x0.95 from the unprofiled host time per "
        "call (0.095 ms); lowered to x0.91, where the GPU's own time leaves the host no more (no kernel is shrunk "
        "to make room for host time)")


def test_without_host_ms_the_host_time_is_estimated_from_the_trace(tmp_path):
    """Issue 39: a run.json without host_ms: the host's unprofiled time per iteration is the traced
    iteration less the profiler's 4.2 µs per recorded event (host_estimate): 100 µs less one launch
    call = 95.8 µs, and 100 less 11 events (ten CPU ops and the launch) = 53.8 µs; the note says it
    was estimated, and the prediction's host_source."""
    from tracebuilder import write_run

    from tracekit.analysis.critical_path.host_estimate import estimate
    from tracekit.analysis.critical_path.predict import predict_run

    tables = _tables(_t_paced(), tmp_path)
    traced = cp.analyze(tables)
    guess = estimate(tables, traced.markers[0])
    assert (guess.traced_ms, guess.events, guess.host_ms) == (0.1, 1.0, pytest.approx(0.0958))
    cal = calibrate(traced.graph, traced.steps, traced.markers, 0.091, None, guess)
    assert cal.host_source == "estimated" and cal.gpu_scale == 1.0 and cal.host_scale == pytest.approx(0.91, rel=0.003)
    assert "estimated from the trace, no host_ms in run.json: the traced iteration (0.100 ms) less the " \
           "profiler's 4.2 µs for each of its 1 recorded ops and runtime calls (0.096 ms)" in path_note(cal.note)
    busy = _t_paced()
    for i in range(5):
        for j in range(10):
            busy.cpu_op("aten::view", 100 * i + 20 + 5 * j, 2)
    assert estimate(_tables(busy, tmp_path), traced.markers[0]).host_ms == pytest.approx(0.1 - 11 * 0.0042)
    write_run(tmp_path / "w" / "eager", busy, latency_ms=(0.091, 0.09, 0.092))
    p = predict_run(tmp_path / "w" / "eager", [Edit("host-faster", factor=2)])
    assert p.host_source == "estimated" and p.to_dict()["host_source"] == "estimated"
    assert p.notes[0]["host_source"] == "estimated" and p.notes[0]["events"] == 11

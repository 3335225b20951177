import pytest
from tracebuilder import TraceBuilder, add_sync_call

from tracekit.analysis.metrics.timeline import CPU_LANE, iteration_timeline, pick_step
from tracekit.trace import load


def test_one_iteration_gpu_ops_by_launch_over_the_cpu_calls(tmp_path):
    t = TraceBuilder()
    for n, o in enumerate((0, 100, 200), 1):
        t.step(n, o, 100)
    t.kernel("a", start=120, dur=10, launch_at=110)                 # step 2
    t.kernel("b", start=205, dur=10, stream=8, launch_at=190)       # launched in step 2, runs in step 3
    t.kernel("c", start=230, dur=10, launch_at=220)                 # step 3
    t.graph_launch(at=150, kernels=[(160, 5), (170, 5)])            # step 2: one launch, two kernels
    add_sync_call(t, "cudaDeviceSynchronize", at=180, dur=8)        # step 2, no GPU op
    tables = load(t.write(tmp_path / "t.json"))
    assert pick_step(tables.markers) == 2
    tl = iteration_timeline(tables)
    assert set(tl["step"]) == {2}
    marker = tl[tl["kind"] == "iteration"].iloc[0]
    assert (marker["lane"], marker["start_us"], marker["dur_us"]) == (CPU_LANE, 0.0, 100.0)
    gpu = tl[tl["kind"] == "kernel"].sort_values("start_us")
    assert list(gpu["name"]) == ["a", "graph_k0", "graph_k1", "b"]
    assert list(gpu["start_us"]) == [20.0, 60.0, 70.0, 105.0]       # relative to the marker's start
    assert list(gpu["lane"]) == ["GPU 0 stream 7"] * 3 + ["GPU 0 stream 8"]
    cpu = tl[tl["lane"] == CPU_LANE].set_index("name")
    assert cpu.loc["cudaGraphLaunch", "kind"] == "launch" and cpu.loc["cudaGraphLaunch", "start_us"] == 50.0
    assert cpu.loc["cudaDeviceSynchronize", "kind"] == "sync"
    assert (cpu["kind"] == "launch").sum() == 3                      # a, graph, b
    assert iteration_timeline(tables, step=3)["name"].tolist().count("c") == 1


def test_no_markers_no_timeline(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=10, dur=5, launch_at=0)
    tables = load(t.write(tmp_path / "t.json"))
    assert pick_step(tables.markers) is None and iteration_timeline(tables).empty
    assert iteration_timeline(load(t.write(tmp_path / "u.json")), step=7).empty


@pytest.mark.parametrize("n, middle", [(1, 1), (2, 2), (10, 6)])
def test_pick_step_is_the_middle_marker(tmp_path, n, middle):
    t = TraceBuilder()
    for i in range(1, n + 1):
        t.step(i, i * 10, 10)
    assert pick_step(load(t.write(tmp_path / "t.json")).markers) == middle

import math

import pytest
from tracebuilder import TraceBuilder, add_sync_call

from tracekit.analysis.metrics import launches
from tracekit.trace import load


def _tables(t, tmp_path):
    return load(t.write(tmp_path / "t.json"))


def test_launch_table_latency_and_apis(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=10, dur=5, launch_at=0, launch_dur=4)                   # latency 10
    t.kernel("b", start=30, dur=5, launch_at=20, launch_dur=6, api="cudaLaunchKernelExC")  # latency 10
    t.graph_launch(at=40, kernels=[(60, 5), (66, 5), (72, 5)])                  # latency 20, 3 kernels
    t.memset(start=90, dur=1, launch_at=85)                                      # latency 5
    tables = _tables(t, tmp_path)
    lt = launches.launch_table(tables)
    assert list(lt["api"]) == ["cudaLaunchKernel", "cudaLaunchKernelExC", "cudaGraphLaunch", "cudaMemsetAsync"]
    assert list(lt["latency_us"]) == [10, 10, 20, 5]
    assert list(lt["kernels"]) == [1, 1, 3, 0]
    apis = launches.by_api(lt, iterations=2).set_index("api")
    assert apis.loc["cudaGraphLaunch", "gpu_ops_per_launch"] == 3
    assert apis.loc["cudaLaunchKernel", "launches_per_iter"] == 0.5
    s = launches.summary(tables, lt)
    assert s["launch_latency_p50_us"] == pytest.approx(10.0)
    assert s["kernels_per_launch"] == pytest.approx(5 / 4)
    assert s["launch_interval_us"] == pytest.approx((85 - 0) / 3)
    assert s["gpu_us_per_launch"] == pytest.approx((5 + 5 + 15 + 1) / 4)
    assert s["feed_ratio"] == pytest.approx(s["gpu_us_per_launch"] / s["launch_interval_us"])
    assert s["short_kernels"] == 5 and s["short_kernel_share"] == 1.0


def test_short_kernel_share_of_time(tmp_path):
    t = TraceBuilder()
    t.kernel("long", start=0, dur=90, launch_at=-5)
    t.kernel("short", start=100, dur=5, launch_at=95)
    t.kernel("short", start=110, dur=5, launch_at=105)
    s = launches.summary(_tables(t, tmp_path), launches.launch_table(_tables(t, tmp_path)))
    assert s["short_kernels"] == 2
    assert s["short_kernel_share"] == pytest.approx(2 / 3)
    assert s["short_kernel_time_share"] == pytest.approx(10 / 100)


def test_dispatch_before_first_launch(tmp_path):
    t = TraceBuilder()
    t.step(1, 0, 100)
    t.cpu_op("aten::linear", 10, 40)       # framework op; its child is nested inside
    t.cpu_op("aten::addmm", 20, 20)
    t.kernel("k", start=70, dur=10, launch_at=60)
    tables = _tables(t, tmp_path)
    d = launches.dispatch_per_iteration(tables, launches.launch_table(tables))
    assert d["first_launch_after_us"].item() == pytest.approx(60.0)
    assert d["framework_cpu_before_first_launch_us"].item() == pytest.approx(40.0)  # nested op counted once


def test_no_launches(tmp_path):
    t = TraceBuilder()
    t.kernel("orphan", start=0, dur=5, launch_at=None)
    tables = _tables(t, tmp_path)
    s = launches.summary(tables, launches.launch_table(tables))
    assert math.isnan(s["launch_latency_p50_us"]) and s["short_kernels"] == 1


def test_feed_interval_leaves_out_time_blocked_in_a_sync(tmp_path):
    """A loop that waits for the GPU every iteration: the host's own pace is its launches' spacing."""
    t = TraceBuilder()
    t.kernel("a", start=5, dur=100, launch_at=0)
    t.kernel("b", start=105, dur=100, launch_at=10)
    add_sync_call(t, "cudaStreamSynchronize", at=15, dur=195)   # returns at 210, when b ends
    t.kernel("c", start=225, dur=100, launch_at=220)
    tables = _tables(t, tmp_path)
    s = launches.summary(tables, launches.launch_table(tables))
    assert s["launch_interval_us"] == pytest.approx((220 - 195) / 2)
    assert s["feed_ratio"] == pytest.approx(100 / 12.5)     # the GPU, not the host, sets the pace

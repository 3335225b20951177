"""Each idle cause on a hand-made trace with a known answer."""

import pytest
from owndata import h100_trace
from tracebuilder import TraceBuilder, add_gpu_sync, add_sync_call

from tracekit.analysis.metrics import idle
from tracekit.trace import load


def _causes(t, tmp_path, **kw):
    g = idle.gaps(load(t.write(tmp_path / "t.json")), **kw)
    return list(zip(g["cause"], g["gap_us"].round(6)))


def test_host_wait_the_launch_came_after_the_gpu_went_idle(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, launch_at=-5)
    t.kernel("b", start=50, dur=10, launch_at=30)      # GPU idle from 10; launch only at 30
    assert _causes(t, tmp_path) == [("host_wait", 40.0)]


def test_launch_latency_queued_but_a_short_gap(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, launch_at=-5)
    t.kernel("b", start=13, dur=10, launch_at=2)       # launched while a ran; 3 µs gap
    assert _causes(t, tmp_path) == [("launch_latency", 3.0)]


def test_queued_long_gap_is_other_without_sync_evidence(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, launch_at=-5)
    t.kernel("b", start=60, dur=10, launch_at=2)       # queued, yet 50 µs idle: > 30 µs threshold
    assert _causes(t, tmp_path) == [("other", 50.0)]


def test_queued_long_gap_with_a_gpu_side_wait_is_sync(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, launch_at=-5)
    add_gpu_sync(t, start=8, dur=52)                   # the stream waits on an event
    t.kernel("b", start=60, dur=10, launch_at=2)
    assert _causes(t, tmp_path) == [("sync", 50.0)]


def test_a_gpu_side_wait_on_another_stream_explains_nothing(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, stream=7, launch_at=-5)
    add_gpu_sync(t, start=8, dur=52, stream=8)         # stream 8 waits; b runs on stream 7
    t.kernel("b", start=60, dur=10, stream=7, launch_at=2)
    assert _causes(t, tmp_path) == [("other", 50.0)]
    add_gpu_sync(t, start=8, dur=52, stream=-1, name="Context Sync")   # a wait of the whole device does
    assert _causes(t, tmp_path) == [("sync", 50.0)]


def test_host_blocked_in_a_synchronize_is_sync_until_the_call_returns(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, launch_at=-5)
    add_sync_call(t, "cudaDeviceSynchronize", at=1, dur=12)   # host waits for a until 13
    t.kernel("b", start=40, dur=10, launch_at=30)             # GPU idle 10-40
    # sync 10-13 (the host was blocked), then host wait 13-40 (it took 17 µs to launch b, 10 more to start)
    assert _causes(t, tmp_path) == [("sync", 3.0), ("host_wait", 27.0)]


def test_a_host_blocked_until_the_next_op_starts_is_all_sync(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, launch_at=-5)
    add_sync_call(t, "cudaStreamSynchronize", at=1, dur=19)   # blocked 1-20, then straight into
    t.memcpy(start=40, dur=5, launch_at=20, api="cudaMemcpy", launch_dur=30,   # a blocking copy (20-50)
             kind="Memcpy DtoH (Device -> Pageable)")         # that issues the next op itself
    assert _causes(t, tmp_path) == [("sync", 30.0)]


def test_back_to_back_syncs_hold_the_host_until_the_last_returns(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, launch_at=-5)
    add_sync_call(t, "cudaStreamSynchronize", at=1, dur=11)   # 1-12
    add_sync_call(t, "cudaDeviceSynchronize", at=12, dur=8)   # 12-20: blocked without a break until 20
    add_sync_call(t, "cudaEventSynchronize", at=25, dur=2)    # a later, separate sync: not the gap's
    t.kernel("b", start=60, dur=10, launch_at=40)             # GPU idle 10-60
    assert _causes(t, tmp_path) == [("sync", 10.0), ("host_wait", 40.0)]


def test_a_sync_that_returned_before_the_gap_explains_nothing(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, launch_at=-5)
    add_sync_call(t, "cudaDeviceSynchronize", at=1, dur=9)    # returns at 10, as a ends
    t.kernel("b", start=40, dur=10, launch_at=30)
    assert _causes(t, tmp_path) == [("host_wait", 30.0)]


def test_split_gap_counts_once_and_keeps_its_iteration(tmp_path):
    t = TraceBuilder()
    t.step(1, -10, 100)
    t.kernel("a", start=0, dur=10, launch_at=-5)
    add_sync_call(t, "cudaDeviceSynchronize", at=1, dur=14)   # returns at 15
    t.kernel("b", start=60, dur=10, launch_at=50)             # GPU idle 10-60: sync 5, host wait 45
    t.kernel("c", start=73, dur=10, launch_at=55)             # queued: launch latency 3
    g = idle.gaps(load(t.write(tmp_path / "t.json")))
    assert list(g["gap"]) == [0, 0, 1] and list(g["iteration"]) == [1, 1, 1]
    assert list(zip(g["start"] - t.base, g["end"] - t.base)) == [(10, 15), (15, 60), (70, 73)]
    b = idle.breakdown(g).iloc[0]
    assert (b["idle_gaps"], b["gaps_sync"], b["gaps_host_wait"], b["gaps_launch_latency"]) == (2, 1, 1, 1)
    assert (b["idle_sync_us"], b["idle_host_wait_us"], b["idle_us"]) == pytest.approx((5.0, 45.0, 53.0))
    per = idle.breakdown(g, ["iteration"]).iloc[0]
    assert per["idle_gaps"] == 2 and per["idle_us"] == pytest.approx(53.0)
    h = idle.histogram(g).set_index(["bin_us", "cause"])
    # the 50 µs gap is binned by its whole length, each part under its cause
    assert h.loc[("50-100", "sync"), "idle_us"] == pytest.approx(5.0)
    assert h.loc[("50-100", "host_wait"), "idle_us"] == pytest.approx(45.0)
    assert h.loc[("2-5", "launch_latency"), "gaps"] == 1


def test_a_sync_on_another_thread_holds_nothing_back(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, launch_at=-5)
    add_sync_call(t, "cudaStreamSynchronize", at=1, dur=12, tid=999)   # e.g. a data-loading thread
    t.kernel("b", start=40, dur=10, launch_at=30)
    assert _causes(t, tmp_path) == [("host_wait", 30.0)]


def test_no_launch_found_is_other(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, launch_at=-5)
    t.kernel("b", start=25, dur=10, launch_at=None)
    assert _causes(t, tmp_path) == [("other", 15.0)]


def test_threshold_is_configurable(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, launch_at=-5)
    t.kernel("b", start=60, dur=10, launch_at=2)
    assert _causes(t, tmp_path, launch_latency_max_us=100) == [("launch_latency", 50.0)]


def test_device_gaps_merge_streams_per_stream_gaps_do_not(tmp_path):
    t = TraceBuilder()
    t.kernel("a", start=0, dur=10, stream=7, launch_at=-5)
    t.kernel("b", start=5, dur=30, stream=8, launch_at=-4)    # covers a's stream gap
    t.kernel("c", start=20, dur=10, stream=7, launch_at=15)   # stream 7 idle 10-20
    assert _causes(t, tmp_path) == []                          # the device never idles
    assert _causes(t, tmp_path, per_stream=True) == [("host_wait", 10.0)]


def test_graph_replay_gaps_are_launch_latency(tmp_path):
    t = TraceBuilder()
    t.graph_launch(at=0, kernels=[(10, 5), (16, 5), (23, 5)])
    assert _causes(t, tmp_path) == [("launch_latency", 1.0), ("launch_latency", 2.0)]


def test_breakdown_sums_and_iterations(tmp_path):
    t = TraceBuilder()
    t.step(1, -10, 40)
    t.step(2, 30, 100)
    t.kernel("a", start=0, dur=10, launch_at=-5)
    t.kernel("b", start=13, dur=10, launch_at=2)       # launch latency 3, iteration 1
    t.kernel("c", start=60, dur=10, launch_at=40)      # host wait 37, iteration 2
    g = idle.gaps(load(t.write(tmp_path / "t.json")))
    b = idle.breakdown(g).iloc[0]
    assert b["idle_us"] == pytest.approx(40.0) and b["idle_gaps"] == 2
    assert b["idle_host_wait_us"] == pytest.approx(37.0) and b["gaps_launch_latency"] == 1
    per = idle.breakdown(g, ["iteration"]).set_index("iteration")
    assert per.loc[1, "idle_launch_latency_us"] == pytest.approx(3.0)
    assert per.loc[2, "idle_host_wait_us"] == pytest.approx(37.0)
    h = idle.histogram(g)
    assert h["gaps"].sum() == 2 and h["idle_us"].sum() == pytest.approx(40.0)
    assert h.loc[(h["bin_us"] == "20-50") & (h["cause"] == "host_wait"), "gaps"].item() == 1


def _raw_idle_us(path) -> float:
    """Span minus busy time of the GPU ops, from the raw JSON events (a plain merge of intervals)."""
    import gzip
    import json
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ops = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    busy, cur_s, cur_e = 0.0, *ops[0]
    for s, e in ops[1:]:
        if s > cur_e:
            busy, cur_s = busy + cur_e - cur_s, s
        cur_e = max(cur_e, e)
    return (max(e for _, e in ops) - ops[0][0]) - (busy + cur_e - cur_s)


def test_real_eager_vit_is_mostly_host_wait():
    """Acceptance: on our eager H100 ViT trace (batch 8, profiled) host wait is well over 80%
    of GPU idle time, and the gaps add up to the span less the busy time."""
    path = h100_trace("vit16x6x384/eager")
    b = idle.breakdown(idle.gaps(load(path))).iloc[0]
    assert b["idle_host_wait_us"] / b["idle_us"] > 0.9
    assert b["idle_us"] == pytest.approx(_raw_idle_us(path), abs=0.01)


@pytest.mark.parametrize("path", ["alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
                                  "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                                  "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                                  "trace_filter/sampled_rank-0.json.gz", "trace_filter/sampled_rank-1.json.gz"])
def test_idle_causes_sum_to_idle_on_real_traces(fixtures, path):
    from tracekit.analysis.metrics.summary import summarize
    tables = load(fixtures / "hta" / path)
    b = idle.breakdown(idle.gaps(tables)).iloc[0]
    assert sum(b[f"idle_{c}_us"] for c in idle.CAUSES) == pytest.approx(b["idle_us"])
    assert b["idle_us"] == pytest.approx(summarize(tables)["idle_us"], rel=1e-9, abs=1e-6)

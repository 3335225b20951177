"""Collective calls, communication GPU ops and the communication breakdown of one rank,
on hand-made traces with known answers."""

import math

import pytest
from tracebuilder import TraceBuilder

from tracekit.analysis.distributed import collectives, communication
from tracekit.analysis.metrics import idle
from tracekit.trace import load

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


@pytest.mark.parametrize("raw, name", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "all_reduce"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "send_recv"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", "reduce_scatter"),
    ("ncclDevKernel_Generic", "other"),
    ("nccl:_all_gather_base", "all_gather"), ("nccl:all_to_all", "all_to_all"),
    ("c10d::allreduce_", "all_reduce"), ("c10d::_reduce_scatter_base_", "reduce_scatter"),
    ("c10d::alltoall_base_", "all_to_all"), ("gloo:broadcast", "broadcast"), ("gloo:all_reduce", "all_reduce"),
    ("allgather_into_tensor_coalesced", "all_gather"), ("_allgather_base", "all_gather"), ("barrier", "barrier"),
    ("send", "send"), ("recv", "recv"), (None, ""),
])
def test_collective_names(raw, name):
    assert collectives.collective_name(raw) == name


def test_metadata_from_the_record_param_comms_around_the_launch(tmp_path):
    t = TraceBuilder()
    t.cpu_op("c10d::allreduce_", 0, 30)
    t.cpu_op("record_param_comms", 2, 25, **{"Collective name": "allreduce", "In msg nelems": 1000,
                                             "Out msg nelems": 1000, "Group size": 2, "dtype": "BFloat16",
                                             "Process Group Name": "0", "Seq": 7})
    t.cpu_op("nccl:all_reduce", 4, 20)
    t.kernel(NCCL, start=40, dur=50, stream=20, launch_at=10)
    t.kernel("gemm", start=0, dur=30, launch_at=-10)
    c = collectives.calls(load(t.write(tmp_path / "t.json")))
    assert len(c) == 1
    r = c.iloc[0]
    assert (r["where"], r["collective"], r["process_group"], r["seq"], r["dtype"]) == ("gpu", "all_reduce", "0", 7,
                                                                                       "BFloat16")
    assert (r["message_bytes"], r["dur_us"], r["stream"]) == (2000, 50, 20)
    assert r["ts"] == t.base + 40


def test_metadata_on_the_kernel_itself_wins(tmp_path):
    t = TraceBuilder()
    t.cpu_op("record_param_comms", 0, 25, **{"Collective name": "broadcast", "Seq": 1})
    t.kernel("ncclDevKernel_Generic", start=40, dur=5, launch_at=10,
             args={"Collective name": "_allgather_base", "Seq": 3, "In msg nelems": 8, "dtype": "Float",
                   "Process Group Name": "5"})
    r = collectives.calls(load(t.write(tmp_path / "t.json"))).iloc[0]
    assert (r["collective"], r["seq"], r["process_group"], r["message_bytes"]) == ("all_gather", 3, "5", 32)


def test_without_metadata_the_enclosing_op_then_the_kernel_name(tmp_path):
    t = TraceBuilder()
    t.cpu_op("nccl:_all_gather_base", 0, 20)
    t.kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", start=30, dur=5, launch_at=5)   # inside the op
    t.kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", start=60, dur=5, launch_at=40)  # outside any
    c = collectives.calls(load(t.write(tmp_path / "t.json")))
    assert list(c["collective"]) == ["all_gather", "send_recv"]
    assert c["seq"].isna().all() and (c["process_group"] == "").all() and c["message_bytes"].isna().all()


def test_gloo_calls_and_their_device_copies(tmp_path):
    """ProcessGroupGloo on CUDA tensors: copies to the host inside c10d::allreduce_ (main thread),
    the collective on a worker thread (gloo:all_reduce), copies back inside it."""
    t = TraceBuilder()
    t.cpu_op("c10d::allreduce_", 0, 10)
    t.memcpy(12, 4, nbytes=4096, launch_at=2, kind="Memcpy DtoH (Device -> Pinned)")
    t.cpu_op("gloo:all_reduce", 20, 60, cat="user_annotation", tid=7)
    t.memcpy(85, 5, nbytes=4096, launch_at=70, tid=7, kind="Memcpy HtoD (Pinned -> Device)")
    t.memcpy(200, 5, nbytes=99, launch_at=150)                        # a copy of no collective
    t.kernel("gemm", start=30, dur=40, launch_at=25)
    tables = load(t.write(tmp_path / "t.json"))
    assert list(collectives.communication_ops(tables)) == [True, False, True, False]   # ordered by start
    c = collectives.calls(tables)
    assert list(c[["where", "collective", "thread"]].iloc[0]) == ["cpu", "all_reduce", "7"]
    assert (c["message_bytes"].iloc[0], c["dur_us"].iloc[0]) == (4096, 60)
    b = communication.breakdown(tables)
    # communication: copies [12,16) [85,90) and the host's run [20,80); computation: gemm [30,70)
    assert b["communication_us"] == 4 + 60 + 5 and b["computation_us"] == 40
    assert b["comm_overlap_us"] == 40 and b["exposed_communication_us"] == 29
    assert b["comm_comp_overlap"] == pytest.approx(40 / 69)


def test_breakdown_as_hta_defines_it(tmp_path):
    t = TraceBuilder()
    t.kernel("gemm", start=0, dur=100, stream=7, launch_at=-5)
    t.kernel(NCCL, start=50, dur=100, stream=20, launch_at=-4)
    t.kernel(NCCL, start=200, dur=20, stream=20, launch_at=150)
    t.memcpy(160, 10, launch_at=150)                                  # memory: neither
    t.step(1, -10, 300)
    tables = load(t.write(tmp_path / "t.json"))
    b = communication.breakdown(tables)
    assert (b["computation_us"], b["communication_us"], b["comm_overlap_us"]) == (100, 120, 50)
    assert b["comm_comp_overlap"] == pytest.approx(50 / 120) and b["exposed_communication_us"] == 70
    assert b["non_compute_us"] == (150 + 10 + 20) - 100 and b["window_us"] == 300
    assert b["comm_timeline"] == "gpu"


def test_a_rank_without_gpu_ops_is_measured_on_the_host(tmp_path):
    t = TraceBuilder(device_name=None)
    t.cpu_op("aten::mm", 0, 50)
    t.cpu_op("aten::add", 60, 20)
    t.cpu_op("c10d::allreduce_", 40, 5)
    t.cpu_op("gloo:all_reduce", 45, 40, cat="user_annotation", tid=7)
    t.cpu_op("aten::sum", 50, 10, tid=7)                                # gloo's own work: not computation
    b = communication.breakdown(load(t.write(tmp_path / "t.json")))
    assert (b["computation_us"], b["communication_us"], b["comm_overlap_us"]) == (70, 40, 25)
    assert b["comm_timeline"] == "cpu" and math.isnan(b["non_compute_us"])


def test_no_collectives(tmp_path):
    t = TraceBuilder()
    t.kernel("gemm", start=0, dur=10, launch_at=-5)
    tables = load(t.write(tmp_path / "t.json"))
    assert collectives.calls(tables).empty
    b = communication.breakdown(tables)
    assert b["communication_us"] == 0 and math.isnan(b["comm_comp_overlap"]) and b["computation_us"] == 10


def test_idle_gaps_inside_calls_are_clipped_to_them(tmp_path):
    t = TraceBuilder()
    t.kernel("gemm", start=0, dur=10, launch_at=-5)
    t.cpu_op("gloo:all_reduce", 5, 40, cat="user_annotation", tid=7)   # [5, 45)
    t.kernel("gemm", start=60, dur=10, launch_at=55)                   # gap [10, 60): host wait
    t.kernel("gemm", start=70, dur=10, launch_at=50)
    tables = load(t.write(tmp_path / "t.json"))
    pieces = collectives.idle_in_calls(idle.gaps(tables), collectives.calls(tables))
    assert pieces.assign(start=pieces["start"] - t.base, end=pieces["end"] - t.base).to_dict("records") == [
        {"call": 0, "start": 10.0, "end": 45.0, "cause": "host_wait"}]


def test_a_kernel_launched_before_the_trace_began(tmp_path):
    """Issue 31: an NCCL kernel whose launch call is not in the trace (launched before the profiler
    started), in a trace with record_param_comms, made `tracekit analyze` exit 70 (NaN merge keys).
    It is counted, attributed to no launch, and the integrity line says so."""
    from click.testing import CliRunner

    from tracekit.analysis.trace_analysis import analyze_trace
    from tracekit.cli import main

    t = TraceBuilder()
    t.cpu_op("record_param_comms", 2, 25, **{"Collective name": "allreduce", "Seq": 7, "Process Group Name": "0"})
    t.kernel(NCCL, start=40, dur=50, stream=20, launch_at=10)
    t.kernel(NCCL, start=100, dur=20, stream=20, launch_at=None)   # its launch call is not in the trace
    t.kernel("gemm", start=0, dur=30, launch_at=-10)
    path = t.write(tmp_path / "t.json")
    tables = load(path)
    c = collectives.calls(tables)
    assert list(c["collective"]) == ["all_reduce", "all_reduce"] and list(c["dur_us"]) == [50, 20]
    assert c["seq"].iloc[0] == 7 and math.isnan(c["seq"].iloc[1])   # no launch: no record_param_comms around it
    r = analyze_trace(tables)
    assert r.row["kernels"] == 3 and r.row["collectives"] == 2 and r.row["failed_analyses"] == ""
    no_call = r.tables["attribution"].query("rule == 'none: no launch call in the trace'")
    assert no_call[["kernel", "kernels", "busy_us", "idle_other_us"]].to_dict("records") == [
        {"kernel": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kernels": 1, "busy_us": 20.0,
         "idle_other_us": 10.0}]   # the gap [90, 100) before it: no launch call, no cause
    checks = r.tables["integrity"].set_index("check")
    assert r.row["integrity"] == "warning" and checks.loc["launch calls", ["count", "total"]].tolist() == [1, 3]
    res = CliRunner().invoke(main, ["analyze", str(path), "--out", str(tmp_path / "reports")])
    assert res.exit_code == 0, res.output
    assert "integrity warning: 1 of 3 GPU ops have no launch call in the trace" in res.output

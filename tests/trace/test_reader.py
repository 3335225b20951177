import gzip
import json

import pytest
from owndata import CPU_ONNX, h100_trace
from tracebuilder import TraceBuilder

from tracekit.trace import TraceError, load


def test_reads_gzipped_and_plain_alike(tmp_path):
    t = TraceBuilder()
    t.kernel("gemm", start=10, dur=5, stream=7, launch_at=2)
    t.memcpy(start=20, dur=3, nbytes=4096, launch_at=16)
    plain = load(t.write(tmp_path / "a.pt.trace.json"))
    gz = load(t.write(tmp_path / "a.pt.trace.json.gz"))
    for tables in (plain, gz):
        assert list(tables.gpu_ops["kind"]) == ["kernel", "memcpy"]
        assert list(tables.gpu_ops["dur"]) == [5.0, 3.0]
        assert tables.gpu_ops["end"].iloc[0] == tables.gpu_ops["ts"].iloc[0] + 5.0
        assert tables.gpu_ops["bytes"].iloc[1] == 4096
        assert list(tables.host_calls["name"]) == ["cudaLaunchKernel", "cudaMemcpyAsync"]
        # launch and GPU op share the correlation id
        assert list(tables.host_calls["correlation"]) == list(tables.gpu_ops["correlation"])
        assert tables.meta["categories"]["ac2g"] == 4  # flow events are counted, not tabulated


def test_markers_and_cpu_only_trace(tmp_path):
    t = TraceBuilder(device_name=None)
    t.step(1, 0, 100)
    t.step(2, 100, 120)
    t.cpu_op("aten::mm", 5, 50)
    tables = load(t.write(tmp_path / "cpu.json"))
    assert not tables.has_gpu
    assert list(tables.markers["step"]) == [1, 2]
    assert list(tables.markers["dur"]) == [100.0, 120.0]
    assert "aten::mm" in set(tables.cpu_ops["name"])


def test_lenient_field_types(tmp_path):
    """ROCm writes stream as a hex string; Inductor's cpu_op writes grid as text (real traces)."""
    doc = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 0, "ts": 1.0, "dur": 2.0,
         "args": {"stream": "0x3", "device": 0, "correlation": 9}},
        {"ph": "X", "cat": "cpu_op", "name": "triton_poi", "pid": 1, "tid": 1, "ts": 0.5, "dur": 1.0,
         "args": {"grid": "grid(100,)"}},
    ]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    tables = load(path)
    assert tables.gpu_ops["stream"].iloc[0] == 3
    assert tables.gpu_ops["correlation"].iloc[0] == 9


@pytest.mark.parametrize("content, problem", [
    (b"", "empty file"),
    (b"{\"traceEvents\": [", "truncated JSON"),
    (b"not json at all", "not valid JSON"),
    (b"{\"foo\": 1}", "without 'traceEvents'"),
])
def test_bad_files_raise_trace_error_naming_the_file(tmp_path, content, problem):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        load(path)
    assert problem in str(err.value)
    assert str(path) in str(err.value)


def test_truncated_gzip(tmp_path):
    data = gzip.compress(json.dumps(TraceBuilder().build()).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="gzip"):
        load(path)


def test_onnx_runtime_profile():
    """ONNX Runtime's own profile: operator runs become CPU ops, each model_run an iteration."""
    path = next(CPU_ONNX.glob("*.ort.json.gz"))
    raw = json.loads(gzip.decompress(path.read_bytes()))
    nodes = [e for e in raw if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    runs = [e for e in raw if e.get("cat") == "Session" and e["name"] == "model_run"]
    tables = load(path)
    assert tables.meta["source"] == "onnxruntime" and not tables.has_gpu
    assert len(tables.cpu_ops) == len(nodes) + len(runs)
    assert list(tables.markers["dur"]) == [float(e["dur"]) for e in sorted(runs, key=lambda e: e["ts"])]
    assert set(tables.cpu_ops["name"]) >= {e["args"]["op_name"] for e in nodes}


def test_real_h100_trace():
    tables = load(h100_trace("vit16x6x384/eager"))
    assert (tables.gpu_ops["kind"] == "kernel").sum() == 660
    assert tables.devices["name"].iloc[0] == "NVIDIA H100 80GB HBM3"
    assert set(tables.host_calls["name"]) >= {"cudaLaunchKernel", "cudaLaunchKernelExC"}


def test_ort_profile_warm_up_runs_are_dropped():
    from tracekit.trace.ort import drop_first_runs

    raw = [{"cat": "Session", "name": "session_initialization", "ts": 0, "dur": 5},
           {"cat": "Session", "name": "model_run", "ts": 10, "dur": 10},
           {"cat": "Node", "name": "a_kernel_time", "ts": 12, "dur": 2},
           {"cat": "Session", "name": "model_run", "ts": 30, "dur": 10},
           {"cat": "Node", "name": "a_kernel_time", "ts": 31, "dur": 2}]
    assert drop_first_runs(raw, 1) == raw[3:]
    assert drop_first_runs(raw, 2) == raw  # nothing would be left


def test_an_id_past_int64_is_no_id(tmp_path):
    """Found by tests/test_fuzz.py (issue 31): a correlation of 1e300 was cast to int64 with a
    RuntimeWarning and wrapped to a negative garbage id; it is now unknown (-1), as a missing one."""
    import warnings

    t = TraceBuilder()
    t.kernel("a", start=0, dur=5, launch_at=-5)
    t.kernel("b", start=10, dur=5, launch_at=5)
    t.events[-2]["args"]["correlation"] = 1e300   # the kernel (the last event is its flow event)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tables = load(t.write(tmp_path / "t.json"), workers=1)
    assert list(tables.gpu_ops["correlation"]) == [1, -1]

"""Issue 17, parts 1-2: trace integrity reported per run, old formats and odd files; each case
with its exit code, message and figures."""

import gzip
import json
import math
import os

import pytest
from click.testing import CliRunner
from tracebuilder import TraceBuilder, eager_trace

from tracekit.analysis.result import Result
from tracekit.analysis.runs import analyze
from tracekit.analysis.trace_analysis import analyze_trace
from tracekit.cli import main
from tracekit.errors import ExitCode
from tracekit.report.worded import worded
from tracekit.trace import load

EPOCH_US = 1.66e15  # timestamps in µs since the epoch, as Kineto writes them on some systems


def _cli(path, tmp_path, *extra):
    r = CliRunner().invoke(main, ["analyze", str(path), "--out", str(tmp_path / "reports"), *extra])
    assert "Traceback" not in r.output
    return r


def _row(path):
    return analyze_trace(load(path))


def _said(path):
    """The run row of the trace at ``path`` with the texts the reports show (tracekit.report.worded)."""
    return worded(Result.of(analyze(path))).runs.iloc[0]


def test_outlier_timestamp_is_dropped_and_counted(tmp_path):
    """One memset at ts 0 in a trace of µs since the epoch: dropped, so the span stays 150 µs."""
    t = TraceBuilder(base_ts=EPOCH_US)
    t.events += eager_trace().events
    for e in t.events:
        e["ts"] += EPOCH_US - 1_000_000.0
    t.events.append({"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7, "ts": 0.0,
                     "dur": 1.0, "args": {"device": 0, "stream": 7, "correlation": 99}})
    path = t.write(tmp_path / "t.json")
    r = _row(path)
    assert r.row["active_span_us"] == pytest.approx(150.0) and r.row["gpu_busy_us"] == pytest.approx(40.0)
    assert r.row["verdict"] == "launch-bound" and r.row["integrity"] == "warning"
    assert "1 events far outside the trace's time range dropped as outliers" in _said(path)["integrity_detail"]
    res = _cli(path, tmp_path)
    assert res.exit_code == ExitCode.PARTIAL
    assert "1 events far outside the trace's time range dropped as outliers" in res.output


@pytest.mark.parametrize("field, value", [("ts", 1e18), ("dur", 1e300)])
def test_absurd_ts_or_dur_is_an_outlier(tmp_path, field, value):
    t = eager_trace()
    t.kernel("absurd", start=200, dur=10, launch_at=195)
    t.events[-2][field] = value
    r = _row(t.write(tmp_path / "t.json"))
    assert r.row["kernels"] == 4 and r.row["active_span_us"] == pytest.approx(150.0)
    assert r.row["integrity"] == "warning"
    assert _cli(tmp_path / "t.json", tmp_path).exit_code == ExitCode.PARTIAL


def test_gpu_ops_without_correlation_ids_leave_launches_unknown(tmp_path):
    t = eager_trace()
    for e in t.events:
        e.get("args", {}).pop("correlation", None)
    r = _row(t.write(tmp_path / "t.json"))
    assert r.row["kernels"] == 4 and math.isnan(r.row["host_launches"])
    assert r.row["integrity"] == "failed" and r.row["verdict"] == "undetermined"
    assert _said(tmp_path / "t.json")["evidence"] == (
        "trace integrity failed: 4 of 4 GPU ops have no correlation id: their launches are "
        "unknown (the trace's launches are unknown)")


def test_launch_calls_without_gpu_ops_say_gpu_activity_was_not_recorded(tmp_path):
    t = eager_trace()
    t.events = [e for e in t.events if e.get("cat") not in ("kernel", "ac2g")]
    r = _row(t.write(tmp_path / "t.json"))
    assert not r.row["has_gpu"] and r.row["verdict"] == "undetermined"
    note = _said(tmp_path / "t.json")["note"]
    assert note.startswith("4 launch calls but no GPU op: GPU activity was not recorded; profile with "
                           "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])")
    assert "CPU ops only" not in note


@pytest.mark.parametrize("device_cat, host_cat, host_api, kind", [
    ("mtia_ccp_events", "mtia_runtime", "mtiaLaunchKernel", "MTIA"),
    ("kernel", "xpu_runtime", "urEnqueueKernelLaunch", "XPU"),
    ("kernel", "cuda_runtime", "hipLaunchKernel", "ROCm/HIP"),
])
def test_other_accelerators_are_devices(tmp_path, device_cat, host_cat, host_api, kind):
    t = eager_trace()
    for e in t.events:
        if e.get("cat") == "kernel":
            e["cat"] = device_cat
        elif e.get("cat") == "cuda_runtime":
            e.update(cat=host_cat, name=host_api)
    r = _row(t.write(tmp_path / "t.json"))
    assert r.row["has_gpu"] and r.row["kernels"] == 4 and r.row["host_launches"] == 4
    assert r.row["gpu_busy_us"] == pytest.approx(40.0) and r.row["verdict"] == "launch-bound"
    assert r.tables["integrity"].set_index("check").at["accelerator", "what"] == kind


def test_2021_categories_are_read_fully(tmp_path):
    """torch < 1.11 wrote Kernel, Memcpy, Memset, Runtime, Operator."""
    t = eager_trace()
    t.cpu_op("aten::mm", 12, 20)
    t.memcpy(start=80, dur=5, launch_at=75)
    t.memset(start=90, dur=2, launch_at=86)
    old = {"kernel": "Kernel", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset", "cuda_runtime": "Runtime",
           "cpu_op": "Operator"}
    for e in t.events:
        e["cat"] = old.get(e.get("cat"), e.get("cat"))
    r = _row(t.write(tmp_path / "t.json"))
    assert (r.row["cpu_ops"], r.row["kernels"], r.row["memcpys"], r.row["memsets"]) == (1, 4, 1, 1)
    assert r.row["host_launches"] == 6 and r.row["iterations"] == 2


@pytest.mark.parametrize("value, got", [("5", "int"), ("null", "null"), ('"x"', "str"), ('{"a": 1}', "object")])
def test_trace_events_of_the_wrong_type_is_exit_9(tmp_path, value, got):
    path = tmp_path / "t.json"
    path.write_text('{"schemaVersion": 1, "traceEvents": ' + value + "}")
    r = _cli(path, tmp_path)
    assert r.exit_code == ExitCode.BAD_CONTENT
    assert f"{path}: unexpected trace content (Expected `array`, got `{got}` - at `$.traceEvents`)" in r.output


@pytest.mark.parametrize("name, data", [("e.json.gz", gzip.compress(b"")), ("w.json", b"  \n\t "),
                                        ("wz.json.gz", gzip.compress(b" \n"))],
                         ids=["empty-gzip", "whitespace", "whitespace-gzip"])  # gzip's mtime: ids stable for xdist
def test_empty_gzip_or_whitespace_is_empty_exit_7(tmp_path, name, data):
    (tmp_path / name).write_bytes(data)
    r = _cli(tmp_path / name, tmp_path)
    assert r.exit_code == ExitCode.NOT_JSON and f"{tmp_path / name}: empty file (no JSON in it)" in r.output


@pytest.mark.parametrize("workers", [1, 2])
def test_utf8_bom_is_accepted(tmp_path, workers, monkeypatch):
    from tracekit.trace import stream
    monkeypatch.setattr(stream, "CHUNK_BYTES", 2000)
    plain = eager_trace().write(tmp_path / "plain.json")
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert analyze_trace(load(bom, workers=workers)).row == analyze_trace(load(plain)).row
    assert _cli(bom, tmp_path).exit_code == 0


def _deep(path):
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1, "dur": 1, "x": '
                    + "[" * 100_000 + "]" * 100_000 + "}]}")
    return path


def test_json_nested_too_deep_is_one_line_and_the_folder_goes_on(tmp_path):
    (tmp_path / "traces").mkdir()
    deep = _deep(tmp_path / "traces" / "deep.json")
    eager_trace().write(tmp_path / "traces" / "good.json")
    r = _cli(deep, tmp_path)
    assert r.exit_code == ExitCode.BAD_CONTENT
    assert r.output.strip().endswith(f"{deep}: JSON nested deeper than the decoder allows: not a trace it can read")
    r = _cli(tmp_path / "traces", tmp_path)
    assert r.exit_code == ExitCode.PARTIAL and (tmp_path / "reports" / "summary.md").exists()
    assert "good.json" in (tmp_path / "reports" / "summary.md").read_text()


def test_unreadable_subfolder_is_listed(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    eager_trace().write(tmp_path / "a" / "good.json")
    (tmp_path / "locked").mkdir()
    real = os.scandir

    def scandir(p="."):
        if str(p).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(p))
        return real(p)
    monkeypatch.setattr(os, "scandir", scandir)
    result = analyze(tmp_path)
    assert len(result.runs) == 1
    assert result.errors == [(str(tmp_path / "locked"), "unreadable folder (permission denied)", ExitCode.NOT_FOUND)]


def test_json_prints_the_error_object_when_the_only_file_is_bad(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": 5}')
    r = CliRunner().invoke(main, ["analyze", str(path), "--json", "--out", str(tmp_path / "r")])  # stdout apart
    assert r.exit_code == ExitCode.BAD_CONTENT
    doc = json.loads(r.stdout.splitlines()[0])
    assert doc == {"runs": [], "errors": [{"path": str(path), "code": 9, "problem":
                   "unexpected trace content (Expected `array`, got `int` - at `$.traceEvents`)"}]}


def test_integrity_section_in_every_report(tmp_path):
    t = eager_trace()
    t.events = [e for e in t.events if e.get("cat") not in ("kernel", "ac2g")]
    path = t.write(tmp_path / "t.json")
    r = _cli(path, tmp_path)
    assert "t.json: integrity FAILED: 4 launch calls but no GPU op" in " ".join(r.output.split())
    for name in ("summary.md", "index.html"):
        text = (tmp_path / "reports" / name).read_text()
        assert "Trace integrity" in text and "GPU activity was not recorded" in text
    doc = json.loads(_cli(path, tmp_path, "--json").stdout)
    assert doc["runs"][0]["integrity"] == "failed"
    assert [row["check"] for row in doc["integrity"]] == ["GPU activity", "accelerator"]


def _mtia_trace() -> TraceBuilder:
    """The shape of HTA's mtia_inference_trace: mtia_runtime launch calls, and device events
    (mtia_ccp_events) that are kernels, DMA transfers (dma_request) and the device side of
    events (event_record, event_wait). Kernel [0,10) and [60,70) on stream 7; a DMA [75,85);
    between the kernels the device waits on an event [10,60) while the second kernel, launched
    at 2, is queued: a 50 µs sync gap, then a 5 µs gap before the DMA (launched at 50: launch latency)."""
    t = TraceBuilder(device_name="MTIA")
    t.kernel("fc_relu", start=0, dur=10, launch_at=-5, api="mtiaLaunchKernel")
    t.kernel("event_record", start=10, dur=0, launch_at=-3, api="mtiaEventRecord")
    t.kernel("event_wait", start=10, dur=50, launch_at=-1, api="mtiaStreamWaitEvent")
    t.kernel("fc", start=60, dur=10, launch_at=2, api="mtiaLaunchKernel")
    t.kernel("dma_request", start=75, dur=10, launch_at=50, api="mtiaMemcpyAsync")
    for e in t.events:
        e["cat"] = {"kernel": "mtia_ccp_events", "cuda_runtime": "mtia_runtime"}.get(e.get("cat"), e.get("cat"))
    return t


def test_mtia_device_events_are_kernels_copies_and_syncs(tmp_path):
    """Issue 31: MTIA's dma_request, event_record and event_wait are not kernels, and the
    device type shown is mtia."""
    path = _mtia_trace().write(tmp_path / "mtia.json")
    tables = load(path)
    assert list(tables.syncs["name"]) == ["event_record", "event_wait"]
    r = _row(path)
    assert (r.row["kernels"], r.row["memcpys"], r.row["gpu_ops"]) == (2, 1, 3)
    assert r.row["gpu_busy_us"] == pytest.approx(30.0) and r.row["active_span_us"] == pytest.approx(85.0)
    assert r.row["idle_sync_us"] == pytest.approx(50.0) and r.row["idle_launch_latency_us"] == pytest.approx(5.0)
    assert r.tables["integrity"].set_index("check").at["accelerator", "what"] == "MTIA"
    assert r.tables["transfers"].set_index("direction").at["memcpy", "count"] == 1
    runs = analyze(path).runs
    assert runs.at[0, "device_type"] == "mtia" and runs.at[0, "kernels"] == 2
    res = _cli(path, tmp_path)
    assert res.exit_code == 0 and "mtia" in res.output


def test_a_sampled_trace_missing_most_launch_calls_is_undetermined(tmp_path):
    """The shape of HTA's trace_compare_base (a sampled trace: 2 of its 18 GPU ops have their
    launch call): not "integrity ok" with a verdict from a host wait nobody measured."""
    t = TraceBuilder()
    t.step(1, 0, 2000)
    t.kernel("gemm", start=10, dur=5, launch_at=2)
    t.kernel("gemm", start=40, dur=5, launch_at=30)
    for i in range(16):
        t.kernel("relu", start=100 + 100 * i, dur=5)    # launched, but not recorded in the sample
    r = _row(t.write(tmp_path / "sampled.json"))
    assert r.row["gpu_ops"] == 18 and r.row["integrity"] == "failed" and r.row["verdict"] == "undetermined"
    assert _said(tmp_path / "sampled.json")["evidence"] == (
        "trace integrity failed: 16 of 18 GPU ops have no launch call in the trace (launched before the profiler "
        "started, or host calls not recorded): counted, attributed to no launch, the idle before them has no cause; "
        "over 50%: host wait is unmeasured")
    few = eager_trace()   # a few missing (ops queued before the profiler started) is a warning
    few.kernel("spill", start=-20, dur=5)
    r = _row(few.write(tmp_path / "few.json"))
    assert r.row["integrity"] == "warning" and r.row["verdict"] == "launch-bound"
    assert _said(tmp_path / "few.json")["integrity_detail"].startswith(
        "1 of 5 GPU ops have no launch call in the trace")

"""Issue 39: the replay costs of each GPU (replay_costs.py, the files benchmarks/replay_probe.py
writes) and the interval of a prediction (uncertainty.py), on hand-made inputs of known answer."""

import json
import math

import pytest
from tracebuilder import TraceBuilder, write_run

from tracekit.analysis.critical_path.edits import Edit
from tracekit.analysis.critical_path.predict import predict
from tracekit.analysis.critical_path.replay_costs import (
    FOLDER,
    Replay,
    costs_of,
    default_replay,
    replay_for,
    slug,
    table,
    write_costs,
)
from tracekit.analysis.critical_path.uncertainty import Spread, combine
from tracekit.trace import load


def _probe(device: str, per_replay: float, per_kernel: float, wobble: float = 0.0) -> dict:
    """A replay_probe.py result: host time per call exactly per_replay + per_kernel x kernels, the
    1-kernel graph ``wobble`` µs off the line; gaps median 0.3, p10 0.2, p90 0.5; a replayed tiny
    kernel 0.1 µs longer than eager."""
    rows = [{"kernels": n, "input": [16], "host_us": per_replay + per_kernel * n + (wobble if n == 1 else 0.0)}
            for n in (1, 16, 64, 256, 1024)]
    rows.append({"kernels": 64, "input": [64, 3, 224, 224], "host_us": 500.0})   # not in the fit
    return {"device": device, "torch": "2.11", "backend": rows, "replay_kernel_us": 1.0, "eager_kernel_us": 0.9,
            "replay_gap_us": {"median": 0.3, "p10": 0.2, "p90": 0.5}}


def test_the_probe_writes_the_costs_file_the_table_reads(tmp_path):
    """A probe's result -> costs (the least-squares line of the cudagraphs mode's host time, the gaps'
    median and p10-p90) -> replay_gpus/<device>.json, which the table reads back by device name."""
    path = write_costs(_probe("NVIDIA H100 80GB HBM3", 20.0, 0.5), tmp_path, source="probe.json")
    assert path.name == "nvidia-h100-80gb-hbm3.json" == slug("NVIDIA H100 80GB HBM3")
    record = table(tmp_path)["NVIDIA H100 80GB HBM3"]
    assert record == json.loads(path.read_text()) and record["source"] == "probe.json"
    assert (record["graph_launch_us"], record["per_kernel_us"]) == (pytest.approx(20.0), pytest.approx(0.5))
    assert record["graph_launch_us_range"] == [pytest.approx(20.0), pytest.approx(20.0)]   # on the line
    assert (record["replay_gap_us"], record["replay_gap_us_range"]) == (0.3, [0.2, 0.5])
    assert record["kernel_delta_us"] == 0.0 and record["kernel_delta_us_range"] == [0.0, pytest.approx(0.1)]
    off = costs_of(_probe("X", 20.0, 0.5, wobble=4.0))   # the line misses the 1-kernel point: its residual
    low, high = off["graph_launch_us_range"]
    assert low < off["graph_launch_us"] < high and high - low == pytest.approx(2 * (4.0 - (off["graph_launch_us"] + off[
        "per_kernel_us"] - 20.5)), rel=1e-6)
    with pytest.raises(ValueError, match="replay_probe"):
        costs_of({"device": "Y", "replay_gap_us": {"median": 0.3, "p90": 0.5}})   # a probe from before the mode


def test_each_gpu_gets_its_own_costs_else_the_largest_known(tmp_path):
    write_costs(_probe("NVIDIA H100 80GB HBM3", 30.0, 0.6), tmp_path)
    write_costs(_probe("NVIDIA H200", 20.0, 0.5), tmp_path)
    known = table(tmp_path)
    h200 = replay_for("NVIDIA H200", known)
    assert h200.measured and h200.measured_on == ("NVIDIA H200",)
    assert (h200.graph_launch_us, h200.per_kernel_us) == (pytest.approx(20.0), pytest.approx(0.5))
    a100 = replay_for("NVIDIA A100-SXM4-80GB", known)   # not measured: the largest of each, both GPUs named
    assert not a100.measured and a100.measured_on == ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
    assert (a100.graph_launch_us, a100.per_kernel_us) == (pytest.approx(30.0), pytest.approx(0.6))
    assert a100.ranges["graph_launch_us"] == (pytest.approx(20.0), pytest.approx(30.0))
    assert a100.at(0).graph_launch_us == pytest.approx(20.0) and a100.at(1).kernel_delta_us == pytest.approx(0.1)
    with pytest.raises(ValueError, match="no replay costs"):
        replay_for("NVIDIA H200", {})


def test_the_committed_table_holds_the_h200_and_a_trace_picks_it_by_its_device(tmp_path):
    """replay_gpus/nvidia-h200.json: 27.7 µs + 0.46 µs a kernel, 0.26 µs between replayed kernels
    (reports/h200/predict/replay-probe.json); a trace's deviceProperties name chooses it."""
    assert (FOLDER / "nvidia-h200.json").exists()
    h200 = table()["NVIDIA H200"]
    assert round(h200["graph_launch_us"], 1) == 27.7 and round(h200["per_kernel_us"], 2) == 0.46
    assert round(h200["replay_gap_us"], 2) == 0.26
    t = TraceBuilder(device_name="NVIDIA H200")
    t.kernel("gemm", start=10, dur=5, launch_at=0)
    tables = load(t.write(tmp_path / "t.pt.trace.json.gz"))
    assert default_replay([(0, tables)]).measured and default_replay([(0, tables)]).device == "NVIDIA H200"


def test_independent_sources_add_in_quadrature():
    """10 ms predicted, the timer's ends 9-11 and the replay's 9.5-10.5: 10 -+ sqrt(1 + 0.25 + 0.02^2)."""
    iv = combine(10.0, {"timer": (11.0, 9.0), "replay": (9.5, 10.5), "broken": (math.nan, 10.0)})
    assert iv.sources == {"timer": (9.0, 11.0), "replay": (9.5, 10.5), "fit": (pytest.approx(9.98),
                                                                                  pytest.approx(10.02))}
    assert iv.low_ms == pytest.approx(10 - math.sqrt(1 + 0.25 + 0.02 ** 2))
    assert iv.high_ms == pytest.approx(10 + math.sqrt(1 + 0.25 + 0.02 ** 2))


def _gpu_bound() -> TraceBuilder:
    """Four GPU-bound iterations: three 40 µs kernels each, queued 1 µs apart (123 µs an iteration)."""
    t = TraceBuilder()
    for i in range(4):
        t.step(i + 1, 30 * i, 30)
        for j, name in enumerate(("gemm", "elementwise_relu", "gemm")):
            t.kernel(name, start=3 + 41 * (3 * i + j), dur=40, launch_at=30 * i + 5 * j, launch_dur=2)
    return t


def test_the_replay_costs_ranges_give_the_interval_of_a_cuda_graph_prediction(tmp_path):
    """Replayed, each iteration is three 40 µs kernels and three gaps: 120 + 3 x gap. With the gap's range
    0.5-2 µs and a kernel up to 1 µs longer in a replay, the replay source is 121.5-129 µs (120 + 1.5,
    120 + 6 + 3); the interval's ends are those, with the fit's 0.2% in quadrature."""
    tables = load(_gpu_bound().write(tmp_path / "t.pt.trace.json.gz"))
    replay = Replay(15.0, 1.0, ranges={"replay_gap_us": (0.5, 2.0), "kernel_delta_us": (0.0, 1.0)})
    result = predict(tables, [Edit("cuda-graphs")], replay=replay, spread=Spread())
    assert result.predicted_ms * 1e3 == pytest.approx(123.0)
    low, high = result.interval.sources["replay"]
    assert (low * 1e3, high * 1e3) == (pytest.approx(121.5), pytest.approx(129.0))
    assert set(result.interval.sources) == {"replay", "iterations", "fit"}   # uncalibrated: no timer source
    fit = 0.123 * 0.002
    assert result.interval.low_ms == pytest.approx(0.123 - math.hypot(0.0015, fit))
    assert result.interval.high_ms == pytest.approx(0.123 + math.hypot(0.006, fit))
    assert predict(tables, [Edit("cuda-graphs")], replay=replay).interval is None   # asked for only


def test_the_timer_spread_moves_a_calibrated_prediction(tmp_path):
    """A host-bound run (100 µs iterations of host time, a 1 µs kernel each) calibrated to 50 µs
    unprofiled, its timer's p10-p90 45-55 µs: with the host 2x faster the prediction is half the
    calibrated iteration, so the timer source is 22.5-27.5 µs."""
    t = TraceBuilder()
    for i in range(4):
        t.step(i + 1, 100 * i, 100)
        t.kernel("gemm", start=100 * i + 15, dur=1, launch_at=100 * i + 10)
    tables = load(t.write(tmp_path / "t.pt.trace.json.gz"))
    result = predict(tables, [Edit("host-faster", factor=2)], 0.05, spread=Spread((0.045, 0.055)))
    assert result.predicted_ms == pytest.approx(0.025, rel=0.003)
    low, high = result.interval.sources["timer"]
    assert (low, high) == (pytest.approx(0.0225, rel=0.003), pytest.approx(0.0275, rel=0.003))
    assert result.interval.low_ms < low and high < result.interval.high_ms


def _reading(t: TraceBuilder, attention: bool) -> TraceBuilder:
    """Three 100 µs steps; in each an optimizer step reading the device twice (aten::item ->
    aten::_local_scalar_dense) and, with ``attention``, a fused SDPA call."""
    for i in range(3):
        o = 100 * i
        t.step(i + 1, o, 100)
        t.kernel("gemm", start=o + 15, dur=10, launch_at=o + 10)
        t.cpu_op("Optimizer.step#AdamW.step", o + 30, 40)
        for j in range(2):
            t.cpu_op("aten::item", o + 32 + 10 * j, 5)
            t.cpu_op("aten::_local_scalar_dense", o + 33 + 10 * j, 3)
        if attention:
            t.cpu_op("module::encoder.layer.0.attention", o + 75, 20)
            t.cpu_op("aten::_scaled_dot_product_efficient_attention", o + 76, 10)
    return t


def test_a_trace_that_reads_the_device_makes_a_cuda_graph_prediction_low_confidence(tmp_path):
    """Issue 39: the eager iteration reads GPU values on the host (here AdamW's step count, twice an
    iteration): a capture cannot, so the program it records differs; the prediction says low
    confidence and why, first among its notes; with fused SDPA calls the reason names them. A trace
    that reads nothing keeps normal confidence; an edit other than cuda-graphs is not concerned."""
    from tracekit.analysis.critical_path import reasons
    from tracekit.analysis.critical_path.capture_risk import capture_risks
    from tracekit.analysis.critical_path.path import marker_table
    from tracekit.report.path_text import path_note

    tables = load(_reading(TraceBuilder(), attention=True).write(tmp_path / "r.pt.trace.json.gz"))
    [risk] = capture_risks([(0, tables)], {0: marker_table(tables)})
    # the steady iteration (the first and last of three left out): 2 reads, 1 SDPA call
    assert risk == {"code": reasons.CAPTURE_READS, "reads": 2.0, "ops": {"aten::_local_scalar_dense": 2.0},
                    "where": ["Optimizer.step#AdamW.step"], "attention": 1.0}
    words = path_note(risk)
    assert words.startswith("low confidence: the eager iteration reads GPU values on the host 2 times "
                            "(aten::_local_scalar_dense 2, in Optimizer.step#AdamW.step)")
    assert "SDPA's fused kernels (1 calls an iteration)" in words
    result = predict(tables, [Edit("cuda-graphs")], replay=Replay(10.0, 1.0))
    assert result.confidence == "low" and result.notes[0] == risk
    assert predict(tables, [Edit("host-faster", factor=2)]).confidence == "normal"
    quiet = TraceBuilder()
    for i in range(3):
        quiet.step(i + 1, 100 * i, 100)
        quiet.kernel("gemm", start=100 * i + 15, dur=10, launch_at=100 * i + 10)
        quiet.cpu_op("aten::_scaled_dot_product_efficient_attention", 100 * i + 20, 10)   # SDPA alone: no reason
    quiet_tables = load(quiet.write(tmp_path / "q.pt.trace.json.gz"))
    assert capture_risks([(0, quiet_tables)], {0: marker_table(quiet_tables)}) == []
    assert predict(quiet_tables, [Edit("cuda-graphs")], replay=Replay(10.0, 1.0)).confidence == "normal"
    # in a Hugging Face transformers model SDPA's fused kernels alone are a reason: its capture builds a mask
    hf = predict(quiet_tables, [Edit("cuda-graphs")], replay=Replay(10.0, 1.0), transformers=True)
    assert hf.confidence == "low" and hf.notes[0] == {"code": reasons.CAPTURE_MASK, "attention": 1.0}
    assert path_note(hf.notes[0]).startswith("low confidence: its attention runs SDPA's fused kernels (1 calls an "
                                             "iteration) in a Hugging Face transformers model")
    # the interval leaves out the kernels the capture may change, and the terminal says so
    from tracekit.report.formats.whatif import _interval_text
    low = {"predicted_low_ms": 0.05, "predicted_high_ms": 0.056, "confidence": "low"}
    assert _interval_text(low) == " (0.050-0.056 ms with eager's kernels), LOW CONFIDENCE (note below)"
    assert _interval_text({**low, "confidence": "normal"}) == " (0.050-0.056 ms)"


def test_a_transformers_runs_fused_attention_is_low_confidence_outside_decode(tmp_path):
    """tracekit.whatif of a run folder: an ``hf:`` model whose eager iteration runs SDPA's fused kernels and reads
    nothing is of low confidence (its capture builds a mask: on an H200 bert and electra replayed the unfused
    math attention); the same trace of a built-in model, or of an hf: model's decode step, is not."""
    import tracekit

    def sdpa() -> TraceBuilder:
        t = TraceBuilder()
        for i in range(3):
            t.step(i + 1, 100 * i, 100)
            t.kernel("gemm", start=100 * i + 15, dur=10, launch_at=100 * i + 10)
            t.kernel("fmha", start=100 * i + 35, dur=10, launch_at=100 * i + 30)
            t.cpu_op("aten::_scaled_dot_product_efficient_attention", 100 * i + 29, 4)
        return t

    hf = tracekit.whatif(write_run(tmp_path / "hf", sdpa(), model="hf:bert?layers=6"), cuda_graphs=True)
    assert hf.confidence == "low" and hf.notes[0].startswith("low confidence: its attention runs SDPA's fused kernels")
    assert tracekit.whatif(write_run(tmp_path / "vit", sdpa()), cuda_graphs=True).confidence == "normal"
    decode = write_run(tmp_path / "decode", sdpa(), model="hf:gpt2")
    run = json.loads((decode / "run.json").read_text())
    run["spec"]["phase"] = "decode"
    (decode / "run.json").write_text(json.dumps(run))
    assert tracekit.whatif(decode, cuda_graphs=True).confidence == "normal"
    # where the run checked its capture path, that check decides, not the transformers rule
    same = write_run(tmp_path / "hf-same", sdpa(), model="hf:bert?layers=6",
                     capture_path={"differs": False, "added": {}, "removed": {}})
    assert tracekit.whatif(same, cuda_graphs=True).confidence == "normal"
    other = write_run(tmp_path / "vit-other", sdpa(), capture_path={
        "differs": True, "added": {"aten::arange": 4, "aten::where": 2}, "removed": {"aten::all": 1},
        "calls_added": 9, "calls_removed": 1})
    low = tracekit.whatif(other, cuda_graphs=True)
    assert low.confidence == "low" and low.notes[0] == (
        "low confidence: told a CUDA graph captured it (torch.cuda.is_current_stream_capturing() true), the step ran "
        "other ops: 9 calls more (aten::arange 4, aten::where 2), 1 fewer (aten::all 1); the replay runs their "
        "kernels, not only the eager ones predicted")
    failed = write_run(tmp_path / "vit-failed", sdpa(), capture_path={"differs": True, "error": "RuntimeError: boom"})
    assert tracekit.whatif(failed, cuda_graphs=True).notes[0].endswith(
        "the step failed (RuntimeError: boom): the captured program is another one than the eager one predicted")


def test_a_gpu_the_fit_scaled_has_the_traced_gpu_as_the_other_end(tmp_path):
    """A GPU-bound run (three 40 µs kernels 1 µs apart an iteration) measured at 100 µs unprofiled: the fit
    scales its kernels by 97/120; replayed (gaps 1 µs) it is then 100 µs, and 123 µs with the kernels as
    traced: the gpu source's ends, since the fit cannot tell a profiler's stretch from gaps."""
    tables = load(_gpu_bound().write(tmp_path / "t.pt.trace.json.gz"))
    result = predict(tables, [Edit("cuda-graphs")], 0.1, replay=Replay(15.0, 1.0), spread=Spread())
    assert result.calibration.gpu_scale == pytest.approx(97 / 120, rel=0.003)
    assert result.predicted_ms == pytest.approx(0.1, rel=0.003)
    low, high = result.interval.sources["gpu"]
    assert (low, high) == (result.predicted_ms, pytest.approx(0.123))

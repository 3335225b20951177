"""A cuda-graphs prediction with the kernels of the run's capture path
(tracekit.analysis.critical_path.capture_kernels): the eager run's calibrated prediction moved by what the
capture path's trace adds, both as traced."""

import json
import os

import pytest
from tracebuilder import TraceBuilder, write_run

import tracekit
from tracekit.trace.discover import discover


def _iterations(kernels: int) -> TraceBuilder:
    """4 iterations of 200 µs, each launching ``kernels`` kernels of 40 µs, 45 µs apart."""
    t = TraceBuilder()
    for i in range(4):
        t.step(i + 1, 200 * i, 200)
        for k in range(kernels):
            t.kernel("gemm", start=200 * i + 10 + 45 * k, dur=40, launch_at=200 * i + 5 + 45 * k)
    return t


def test_the_capture_paths_kernels_move_the_prediction_and_settle_its_confidence(tmp_path):
    eager = _iterations(2)
    plain = tracekit.whatif(write_run(tmp_path / "plain", eager, model="hf:mistral", capture_path={
        "differs": True, "added": {"aten::arange": 4}, "removed": {}, "calls_added": 4, "calls_removed": 0}),
        cuda_graphs=True)
    assert plain.confidence == "low"   # the path differs and nothing says how
    folder = write_run(tmp_path / "traced", eager, model="hf:mistral", capture_path={
        "differs": True, "added": {"aten::arange": 4}, "removed": {}, "calls_added": 4, "calls_removed": 0,
        "trace": "host_1.capture-path.pt.trace.json.gz"})
    _iterations(4).write(folder / "host_1.capture-path.pt.trace.json.gz")
    assert [len(r.traces) for r in discover(tmp_path / "traced")] == [1]   # no run's trace, no run of its own
    moved = tracekit.whatif(folder, cuda_graphs=True)
    # a replay of 2 (4) kernels of 40 µs a gap apart (the largest known: the trace names no device) is GPU-bound
    # (a replay's host time is about 30 µs): 2 more kernels add 2 x (40 µs + gap) an iteration
    gap = moved.replay_costs["replay_gap_us"]
    assert moved.predicted_latency_ms - plain.predicted_latency_ms == pytest.approx(2 * (40 + gap) / 1e3, abs=2e-5)
    assert moved.predicted_low_ms - plain.predicted_low_ms == pytest.approx(2 * (40 + gap) / 1e3, abs=2e-5)
    assert moved.confidence == "normal" and moved.notes[0].startswith(
        "with the kernels of the step's capture path (host_1.capture-path.pt.trace.json.gz")
    assert not any(n.startswith("low confidence") for n in moved.notes)
    # tracekit analyze's "CUDA graphs could save" rests on the same prediction
    [row] = tracekit.analyze(folder).runs.to_dict("records")
    assert row["cuda_graphs_predicted_ms"] == pytest.approx(moved.predicted_latency_ms, abs=1e-4)


def test_a_capture_paths_trace_that_cannot_be_read_is_a_note(tmp_path):
    folder = write_run(tmp_path / "r", _iterations(2), capture_path={
        "differs": True, "added": {}, "removed": {}, "calls_added": 1, "calls_removed": 0,
        "trace": "host_1.capture-path.pt.trace.json.gz"})
    (folder / "host_1.capture-path.pt.trace.json.gz").write_bytes(b"not gzip")
    result = tracekit.whatif(folder, cuda_graphs=True)
    assert result.confidence == "low" and any(n.startswith(
        "the capture path's trace (host_1.capture-path.pt.trace.json.gz) not used:") for n in result.notes)
    run = json.loads((folder / "run.json").read_text())
    assert run["capture_path"]["trace"] == "host_1.capture-path.pt.trace.json.gz"
    # a name that leaves the folder, a FIFO or a folder of that name: no capture trace, the eager prediction
    _iterations(4).write(tmp_path / "outside.capture-path.pt.trace.json.gz")
    for odd in ("../outside.capture-path.pt.trace.json.gz", "fifo", "folder"):
        run["capture_path"]["trace"] = odd
        (folder / "run.json").write_text(json.dumps(run))
        if odd == "fifo":
            os.mkfifo(folder / odd)
        (folder / "folder").mkdir(exist_ok=True)
        odd_result = tracekit.whatif(folder, cuda_graphs=True)
        assert odd_result.confidence == "low" and not any("capture path's" in n for n in odd_result.notes), odd

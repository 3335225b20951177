"""Cross-check GPU utilization with TensorBoard's profiler plugin (torch-tb-profiler 0.4.3).

TensorBoard's "GPU Utilization" is kernel busy time (kernels only, no memcpy
or memset) within its step window, over the window
(torch_tb_profiler/profiler/gpu_metrics_parser.py, ``calculate_gpu_utilization``).
Given the window TensorBoard chose, our kernel busy time reproduces its figure
exactly on every real trace with kernels: the two tools measure busy time alike.

What differs is the window. ``summary.step_utilization`` takes the first
ProfilerStep marker (or first CPU op) to the later of the last marker's end
(or last CPU op) and the last kernel's end. TensorBoard ends its window where
its steps end (event_parser.py, ``_update_steps_duration``). It counts as steps
both the host's ProfilerStep ranges and the copies Kineto writes on the GPU
timeline (``gpu_user_annotation`` "ProfilerStep#N", ending with the step's last
kernel), and the last to start, a GPU-side copy, closes the window; without
markers its one step is the CPU side of the trace, extended only by kernels it
matched to launches inside it. Two effects follow:

* with markers, TensorBoard's window closes at the last step's last kernel,
  ours at the host marker's end (after the runner's final synchronize), so
  ours reads a little lower (our H100 study traces);
* kernels that run past TensorBoard's window are left out: the last few after
  the host's last event (the eager fixture), those after the last marker
  (ns_resolution), or, with CUDA graphs, nearly the whole replay: for the
  reduce-overhead fixture it shows 52% where the GPU is busy 94% of its active
  span; on our own reduce-overhead trace stripped of its step markers, it
  leaves out three quarters of the GPU's busy time.

Elsewhere step_utilization is within ``STEP_WINDOW_TOLERANCE`` of it.

tracekit's headline ``utilization`` is busy time over the GPU's active span,
which needs no window choice at all.
"""

import logging
import tempfile
from pathlib import Path

import numpy as np
import pytest
from owndata import H100_RUNS, h100_trace

from tracekit.analysis.metrics.intervals import union
from tracekit.analysis.metrics.summary import step_utilization, summarize
from tracekit.trace import load

pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler is not installed (make setup installs it)")

# Utilization points by which step_utilization's window may differ from TensorBoard's,
# for the largest tail of kernels past TensorBoard's window in these traces (ns_resolution).
STEP_WINDOW_TOLERANCE = 0.005
TRACES = ["hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz",
          "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
          "hta/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
          "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "hta/triton_example/triton_example.json.gz",
          *(f"own:{run}" for run in H100_RUNS)]


def _tensorboard(path: Path, monkeypatch) -> tuple[float, float, float]:
    """TensorBoard's GPU utilization of the trace's GPU, and the step window (start, end µs)
    it computed it over (read from the arguments of its GPU-metrics parser)."""
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.gpu_metrics_parser import GPUMetricsParser
    logging.disable(logging.WARNING)
    window = []
    parse = GPUMetricsParser.parse_events

    def spy(events, global_start, global_end, steps_start, steps_end):
        window[:] = [steps_start, steps_end]
        return parse(events, global_start, global_end, steps_start, steps_end)

    monkeypatch.setattr(GPUMetricsParser, "parse_events", staticmethod(spy))
    data = RunProfileData.parse("worker", None, str(path), tempfile.mkdtemp())
    [util] = [u for u in data.gpu_metrics_parser.gpu_utilization if u is not None]
    return util, *window


def _busy_share(tables, start: float, end: float) -> float:
    """Our kernel busy time within [start, end) over its length."""
    k = tables.gpu_ops[tables.gpu_ops["kind"] == "kernel"]
    s, e = union(np.clip(k["ts"].to_numpy(), start, end), np.clip(k["end"].to_numpy(), start, end))
    return float((e - s).sum()) / (end - start)


@pytest.mark.parametrize("name", TRACES)
def test_same_gpu_utilization_as_tensorboard(real_trace, monkeypatch, name):
    path = real_trace(name)
    tables = load(path)
    tb, start, end = _tensorboard(path, monkeypatch)
    assert _busy_share(tables, start, end) == pytest.approx(tb, rel=1e-9)          # same busy time
    assert step_utilization(tables) == pytest.approx(tb, abs=STEP_WINDOW_TOLERANCE)  # nearly the same window


def test_cuda_graph_kernels_fall_outside_tensorboards_window(monkeypatch, tmp_path):
    """Our reduce-overhead trace without its ProfilerStep markers (as a trace taken without a
    schedule has none): TensorBoard cannot tie the graph replays to a step."""
    import gzip
    import json
    doc = json.loads(gzip.decompress(h100_trace("vit16x6x384/reduce-overhead").read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    path = tmp_path / "unmarked.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    tables = load(path)
    tb, start, end = _tensorboard(path, monkeypatch)
    assert _busy_share(tables, start, end) == pytest.approx(tb, rel=1e-9)
    # TensorBoard's window is the CPU side of the run...
    cpu = tables.cpu_ops[tables.cpu_ops["cat"] == "cpu_op"]
    assert (start, end) == (cpu["ts"].min(), cpu["end"].max())
    # ...while the GPU ran the graphs for much longer, busy most of its active span:
    # most kernels and three quarters of the busy time fall outside TensorBoard's figure.
    k = tables.gpu_ops[tables.gpu_ops["kind"] == "kernel"]
    row = summarize(tables)
    assert (k["end"] > end).mean() > 0.5 and row["utilization"] > 0.9
    assert tb * (end - start) < 0.3 * row["gpu_busy_us"]

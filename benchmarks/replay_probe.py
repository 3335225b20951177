"""The two costs of a CUDA graph replay on this GPU, for the ``cuda-graphs`` what-if (issue 30).

Usage: python benchmarks/replay_probe.py OUT.json

Writes OUT.json (everything measured) and this GPU's costs for the what-if,
tracekit/analysis/critical_path/replay_gpus/<device>.json (``replay_costs.write_costs``: the file
``tracekit whatif --cuda-graphs`` reads for traces of this GPU; commit it).

* host cost per replay: back-to-back calls of a one-kernel graph through the same wrapper
  the ``cudagraphs`` backend uses (copy the input into the captured buffer, replay), timed
  with CUDA events over 2,000 calls: the GPU has next to nothing to do, so the period is the
  host's (``graph_launch_us``);
* the GPU's gap between consecutive kernels of a replay: a graph of 256 dependent tiny
  kernels replayed under torch.profiler, the gaps read from the trace by tracekit's reader
  (``replay_gap_us``, median and mean), beside the same kernels launched eagerly behind a long
  kernel so that they queue (``eager_queued_gap_us``) and the per-kernel time of replays
  timed with CUDA events (``replay_per_kernel_us``: kernel plus gap, unprofiled).

* the host's time per call of tracekit's own ``cudagraphs`` mode (the backend's replay inside
  the runner's inference step) for graphs of 1 to 1,024 tiny kernels and two input sizes,
  timed as the runner times ``host_ms`` (:func:`tracekit.capture.timers.host_times`), with CUDA events
  per call beside it (``backend``), and the least-squares line through it
  (``graph_launch_fit``: µs per replay plus µs per kernel).

Needs a CUDA GPU; prints the JSON it writes.
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from tracekit.analysis.critical_path.replay_costs import write_costs
from tracekit.trace.reader import load, trace_files


def timed(fn, calls: int) -> float:
    """µs per call of ``fn``, back to back, by CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def graph_of(n: int, x: torch.Tensor) -> torch.cuda.CUDAGraph:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(n):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            x.add_(1)
    return g


def gaps(folder: Path) -> np.ndarray:
    ops = load(trace_files(folder)[0]).gpu_ops.sort_values("ts")
    ops = ops[ops["kind"] == "kernel"]
    return ops["ts"].to_numpy()[1:] - ops["end"].to_numpy()[:-1], ops["dur"].to_numpy()


class Chain(torch.nn.Module):
    """``n`` dependent tiny kernels (x + 1, n times)."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def forward(self, x):
        for _ in range(self.n):
            x = x + 1
        return x


def backend_costs() -> list[dict]:
    """Host time and CUDA-event latency per call of the cudagraphs mode, by graph size and input."""
    from tracekit import backends
    from tracekit.capture import timers
    from tracekit.capture.phases import make_step
    from tracekit.manifest.spec import RunSpec

    rows = []
    for n, shape in [(1, (16,)), (16, (16,)), (64, (16,)), (256, (16,)), (1024, (16,)), (64, (64, 3, 224, 224))]:
        module, x = Chain(n), torch.zeros(*shape, device="cuda")
        prepared = backends.get("cudagraphs").prepare(module, (x,), RunSpec("mlp", "cudagraphs", device="cuda"))
        step = make_step(prepared.fn, module, "inference")
        host = timers.host_times(lambda: step((x,)), "cuda", calls=200)["median"] * 1e3
        events, _ = timers.time_calls(lambda: step((x,)), 200, "cuda")
        rows.append({"kernels": n, "input": list(shape), "host_us": host, "events_us": float(np.median(events)) * 1e3})
    return rows


def main(out: Path) -> dict:
    x, inp = torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
    one, many = graph_of(1, x), graph_of(256, x)
    static = inp.clone()

    def wrapper():  # what tracekit.backends.cudagraphs' replay does per call
        if static.data_ptr() != inp.data_ptr():
            static.copy_(inp)
        one.replay()

    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "graph_launch_us": timed(wrapper, 2000), "bare_replay_us": timed(one.replay, 2000),
              "replay_per_kernel_us": (timed(many.replay, 200) - timed(one.replay, 200)) / 255}
    with tempfile.TemporaryDirectory() as d:
        for name, body in (("replay", lambda: many.replay()),
                           ("eager", lambda: (torch.cuda._sleep(2_000_000), [x.add_(1) for _ in range(256)]))):
            folder = Path(d) / name
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA],
                                        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(folder))):
                body()
                torch.cuda.synchronize()
            g, dur = gaps(folder)
            g = g[-255:] if name == "eager" else g   # the eager trace starts with the long sleep kernel
            result[f"{name}_gap_us"] = {"median": float(np.median(g)), "mean": float(g.mean()),
                                        "p10": float(np.percentile(g, 10)), "p90": float(np.percentile(g, 90)),
                                        "kernels": int(len(dur))}
            result[f"{name}_kernel_us"] = float(np.median(dur))
    result["eager_queued_gap_us"] = result.pop("eager_gap_us")
    result["backend"] = rows = backend_costs()
    small = [r for r in rows if r["input"] == [16]]
    slope, intercept = np.polyfit([r["kernels"] for r in small], [r["host_us"] for r in small], 1)
    result["graph_launch_fit"] = {"per_replay_us": float(intercept), "per_kernel_us": float(slope)}
    out.write_text(json.dumps(result, indent=1) + "\n")
    result["costs_file"] = str(write_costs(result, source=str(out)))
    return result


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=1))

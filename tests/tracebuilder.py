"""Hand-made Kineto traces with known answers, a few lines each.

    t = TraceBuilder()
    t.kernel("gemm", start=0, dur=10, stream=7, launch_at=-5)   # launch call 5 µs before
    t.graph_launch(at=20, kernels=[(30, 5), (36, 5)])            # one cudaGraphLaunch, two kernels
    path = t.write(tmp_path / "t.pt.trace.json.gz")

Events follow Kineto's format (cat, ph, args names) as in real traces.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

PID, TID = 100, 100


class TraceBuilder:
    def __init__(self, base_ts: float = 1_000_000.0, device_name: str | None = "NVIDIA H100 80GB HBM3",
                 distributed: dict | None = None):
        self.base = base_ts
        self.events: list[dict] = []
        self._corr = 0
        self.device_name = device_name
        self.distributed = distributed  # Kineto's distributedInfo, e.g. {"rank": 1, "world_size": 2}

    def _next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def _launch(self, name: str, at: float, dur: float, corr: int, cat: str = "cuda_runtime", tid: int = TID) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid,
                            "ts": self.base + at, "dur": dur, "args": {"correlation": corr, "External id": corr}})
        self.events.append({"ph": "s", "id": corr, "pid": PID, "tid": tid, "ts": self.base + at,
                            "cat": "ac2g", "name": "ac2g"})

    def _gpu(self, cat: str, name: str, start: float, dur: float, stream: int, device: int, corr: int,
             **args) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": device, "tid": stream,
                            "ts": self.base + start, "dur": dur,
                            "args": {"device": device, "stream": stream, "correlation": corr,
                                     "External id": corr, **args}})
        self.events.append({"ph": "f", "id": corr, "pid": device, "tid": stream, "ts": self.base + start,
                            "cat": "ac2g", "name": "ac2g", "bp": "e"})

    def kernel(self, name: str = "k", start: float = 0.0, dur: float = 10.0, stream: int = 7, device: int = 0,
               launch_at: float | None = None, launch_dur: float = 4.0, api: str = "cudaLaunchKernel",
               args: dict | None = None) -> int:
        """A kernel [start, start+dur) µs, launched by ``api`` at ``launch_at`` (None: no launch call);
        ``args``: more Kineto args of the kernel (an NCCL kernel's "Collective name", ...)."""
        corr = self._next_corr()
        if launch_at is not None:
            self._launch(api, launch_at, launch_dur, corr,
                         cat="cuda_driver" if api.startswith("cu") and not api.startswith("cuda") else "cuda_runtime")
        self._gpu("kernel", name, start, dur, stream, device, corr, grid=[1, 1, 1], block=[128, 1, 1], **(args or {}))
        return corr

    def memcpy(self, start: float, dur: float, nbytes: int = 1 << 20, stream: int = 7, device: int = 0,
               launch_at: float | None = None, kind: str = "Memcpy HtoD (Pageable -> Device)",
               api: str = "cudaMemcpyAsync", launch_dur: float = 3.0, tid: int = TID) -> int:
        corr = self._next_corr()
        if launch_at is not None:
            self._launch(api, launch_at, launch_dur, corr, tid=tid)
        self._gpu("gpu_memcpy", kind, start, dur, stream, device, corr, bytes=nbytes)
        return corr

    def memset(self, start: float, dur: float, nbytes: int = 1024, stream: int = 7, device: int = 0,
               launch_at: float | None = None) -> int:
        corr = self._next_corr()
        if launch_at is not None:
            self._launch("cudaMemsetAsync", launch_at, 3.0, corr)
        self._gpu("gpu_memset", "Memset (Device)", start, dur, stream, device, corr, bytes=nbytes)
        return corr

    def graph_launch(self, at: float, kernels: list[tuple[float, float]], stream: int = 7, device: int = 0) -> int:
        """One cudaGraphLaunch at ``at`` replaying ``kernels`` [(start, dur), ...]; they share its correlation."""
        corr = self._next_corr()
        self._launch("cudaGraphLaunch", at, 8.0, corr)
        for i, (start, dur) in enumerate(kernels):
            self._gpu("kernel", f"graph_k{i}", start, dur, stream, device, corr)
        return corr

    def cpu_op(self, name: str, start: float, dur: float, cat: str = "cpu_op", tid: int = TID, **args) -> None:
        """A CPU op on thread ``tid``; ``args``: more Kineto args (record_param_comms' "Seq", ...)."""
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid,
                            "ts": self.base + start, "dur": dur, "args": {"External id": 0, **args}})

    def step(self, n: int, start: float, dur: float) -> None:
        """An iteration marker as torch.profiler's schedule writes it (ProfilerStep#n)."""
        self.cpu_op(f"ProfilerStep#{n}", start, dur, cat="user_annotation")

    def build(self) -> dict:
        props = [{"id": 0, "name": self.device_name, "numSms": 132}] if self.device_name else []
        meta = [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": "python3"}}]
        out = {"schemaVersion": 1, "deviceProperties": props, "traceEvents": meta + self.events,
               "displayTimeUnit": "ms"}
        if self.distributed:
            out["distributedInfo"] = self.distributed
        return out

    def write(self, path: Path) -> Path:
        """Write JSON, gzipped when the name ends in .gz."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(self.build()).encode()
        path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
        return path


def add_sync_call(t: TraceBuilder, name: str, at: float, dur: float, tid: int = TID) -> None:
    """A blocking host call (cudaDeviceSynchronize, ...) with no GPU op of its own, on thread ``tid``."""
    t.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": PID, "tid": tid,
                     "ts": t.base + at, "dur": dur, "args": {"correlation": 10_000 + len(t.events)}})


def add_gpu_sync(t: TraceBuilder, start: float, dur: float, stream: int = 7, device: int = 0,
                 name: str = "Stream Wait Event", **args) -> None:
    """A Kineto cuda_sync event: the GPU waiting (on an event, a stream) for [start, start+dur);
    ``args``: more of its args (correlation, wait_on_stream, wait_on_cuda_event_record_corr_id)."""
    t.events.append({"ph": "X", "cat": "cuda_sync", "name": name, "pid": device, "tid": stream,
                     "ts": t.base + start, "dur": dur, "args": {"device": device, "stream": stream, **args}})


def write_run(folder: Path, t: TraceBuilder | None, model: str = "vit16x6x384", mode: str = "eager",
              latency_ms: tuple[float, float, float] | None = (1.0, 0.9, 1.1), batch: int = 8,
              device_type: str = "cuda", requested_device: str = "cuda", status: str = "ok", **extra) -> Path:
    """A run folder as the runner writes it: ``folder/run.json`` (the manifest fields
    analyses read) beside the trace of ``t`` (None: a failed run without a trace).
    ``latency_ms``: (median, p10, p90) of the unprofiled iterations, or None."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {"model": model, "mode": mode, "device_type": device_type, "status": status, "reason": "",
                "spec": {"model": model, "mode": mode, "batch": batch, "dtype": "fp32", "device": requested_device,
                         "phase": "inference"},
                "environment": {"device_name": "NVIDIA H100 80GB HBM3"}, "profile": {"iterations": 2},
                "compile_s": 1.5, "peak_memory_MB": 100.0, "max_abs_diff": 0.0, **extra}
    if latency_ms:
        median, p10, p90 = latency_ms
        manifest["latency_ms"] = {"median": median, "p10": p10, "p90": p90, "std": (p90 - p10) / 2,
                                  "timer": "cuda_events"}
    (folder / "run.json").write_text(json.dumps(manifest))
    if t is not None:
        t.write(folder / "host_1.1.pt.trace.json.gz")
    return folder


def eager_trace() -> TraceBuilder:
    """2 iterations of 100 µs; each launches 2 kernels of 10 µs, 5 µs after each launch.
    GPU ops [15,25) [55,65) [115,125) [155,165): busy 40, span 150, idle 110, all host wait."""
    t = TraceBuilder()
    for i, o in enumerate((0, 100), 1):
        t.step(i, o, 100)
        t.kernel("gemm", start=o + 15, dur=10, launch_at=o + 10)
        t.kernel("relu", start=o + 55, dur=10, launch_at=o + 50)
    return t


def graph_trace() -> TraceBuilder:
    """2 iterations of 40 µs; each one cudaGraphLaunch of the same 2 kernels.
    GPU ops [10,30) [50,70): busy 40, span 60, idle 20 (host wait: launched at 45)."""
    t = TraceBuilder()
    for i, o in enumerate((0, 40), 1):
        t.step(i, o, 40)
        t.graph_launch(at=o + 5, kernels=[(o + 10, 10), (o + 20, 10)])
    return t


def add_cpu_range(t: TraceBuilder, name: str, start: float, dur: float, tid: int = TID, cat: str = "cpu_op") -> None:
    """A CPU op or range (``module::blocks.0``, ``aten::addmm``, ``## Call CompiledFxGraph k ##``) on thread ``tid``."""
    t.events.append({"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid, "ts": t.base + start, "dur": dur,
                     "args": {"External id": 0}})


def add_host_call(t: TraceBuilder, name: str, at: float, dur: float = 2.0, tid: int = TID) -> int:
    """A host API call that enqueues no GPU op in the trace (a launch made while a stream
    captures a CUDA graph, cudaStreamBeginCapture...); returns its correlation id."""
    corr = t._next_corr()
    t.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": PID, "tid": tid, "ts": t.base + at,
                     "dur": dur, "args": {"correlation": corr, "External id": corr}})
    return corr


def add_graph_launch(t: TraceBuilder, at: float, kernels: list[tuple[str, float, float]], stream: int = 7) -> int:
    """One cudaGraphLaunch at ``at`` replaying named kernels [(name, start, dur), ...]."""
    corr = t._next_corr()
    t._launch("cudaGraphLaunch", at, 8.0, corr)
    for name, start, dur in kernels:
        t._gpu("kernel", name, start, dur, stream, 0, corr)
    return corr

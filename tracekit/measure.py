"""The measuring stages of a run, in the process that holds the model: reference
output, backend preparation, first call (compile), warm-up, timing, the profiled
window that writes the trace; and what they need (peak memory, shutting down
Inductor's compile workers).

:func:`tracekit.runner.run` calls :func:`measure` for a run in one process, each rank
of a distributed run (:mod:`tracekit.distributed`) for its own part.
"""

from __future__ import annotations

import os
import resource
import socket
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Callable

import torch

from tracekit import attribution_record, models, outputs, timing
from tracekit.backends import Prepared
from tracekit.environment import describe
from tracekit.manifest import Manifest
from tracekit.phases import TRAINING, make_step, model_loss
from tracekit.quiet import kineto_lines_dropped
from tracekit.spec import RunSpec
from tracekit.trace.reader import trace_files


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def peak_memory(device: str) -> tuple[float, str]:
    """The peak memory of the run so far on ``device`` in MB, and where the figure
    comes from: ``torch.cuda.max_memory_allocated`` on a GPU, else the process's
    peak resident set (``ru_maxrss``, over the process's whole life)."""
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated(torch.device(device)) / 2**20, "cuda_max_memory_allocated"
    # Linux reports ru_maxrss in KiB: the process's peak resident set, over its whole life.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process_max_rss"


def stop_compile_workers() -> None:
    """Shut down Inductor's pool of compile-worker processes, if one started.

    With a cold cache, torch.compile starts a pool of subprocesses that go on
    importing torch in the background after the compile; left running they
    compete with the timed iterations for the CPU (on a 2-core machine a
    compiled transformer timed 125 ms instead of 5 ms, and eager calls made
    after it slowed 5x).
    """
    try:
        from torch._inductor.async_compile import shutdown_compile_workers
    except ImportError:  # a torch without the pool
        return
    shutdown_compile_workers()


def sync_events_config():
    """The profiler's experimental config that records CUDA synchronization events (Kineto's
    ``cuda_sync``: stream, event and device syncs and stream waits, with the stream and the
    ``cudaEventRecord`` each waits on): the cross-stream and host-GPU edges of the critical path
    (:mod:`tracekit.analysis.critical_path`). None on a torch without the option."""
    try:
        return torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    except (AttributeError, TypeError):
        return None


def measure(spec: RunSpec, backend, directory: Path, manifest: Manifest, stage,
            recorder: attribution_record.Recorder, module: torch.nn.Module, inputs: tuple,
            wrap: Callable[[torch.nn.Module], torch.nn.Module] | None = None,
            worker: str | None = None) -> list[float]:
    """The measuring stages of :func:`tracekit.runner.run` in this process, on the built ``module`` and
    ``inputs``; fills ``manifest``, writes the trace into ``directory`` (named ``worker``.<ts>...)
    and returns the timed latencies (ms). ``recorder`` records what attribution needs
    (:mod:`tracekit.attribution_record`). ``wrap``: applied to the module after the eager
    reference output and before the backend (a rank of a distributed run wraps it in DDP or
    FSDP, :mod:`tracekit.distributed`)."""
    build_on = backend.device(spec)
    stage("reference output")
    manifest.parameters = sum(p.numel() for p in module.parameters())
    with torch.no_grad():
        reference = outputs.clone(module(*inputs))
        _sync(build_on)
    shared = wrap(module) if wrap else module

    stage("prepare")
    if build_on.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(torch.device(build_on))
    t0 = time.perf_counter()
    with recorder.capture("prepare", build_on, module):
        prepared = backend.prepare(shared, inputs, spec)
    if not isinstance(prepared, Prepared):
        prepared = Prepared(prepared, build_on.split(":")[0])
    device = build_on if prepared.device_type == build_on.split(":")[0] else prepared.device_type
    manifest.prepare_s = time.perf_counter() - t0
    manifest.device_type = prepared.device_type
    manifest.backend = prepared.info
    if prepared.device_type != spec.device.split(":")[0]:
        # The name of the device that did the work (the CPU's, for ONNX Runtime's CPU provider on a
        # GPU machine), so the run is never shown, or held to peaks, as the GPU's.
        manifest.device_name = describe(device)["device_name"]
        manifest.add_note(f"ran on {prepared.device_type}, not {spec.device}: compare it only with "
                          f"{prepared.device_type} runs")
    step = prepared.step or make_step(prepared.fn, module, spec.phase)

    stage("compile (first call)")
    t0 = time.perf_counter()
    out = step(inputs)
    if spec.phase in TRAINING - {"forward"}:
        manifest.loss = "model's own" if model_loss(out) is not None else "synthetic (mean of squared outputs)"
    first = outputs.clone(out)
    del out
    _sync(device)
    manifest.first_call_s = time.perf_counter() - t0
    manifest.compile_s = manifest.prepare_s + manifest.first_call_s
    diff = outputs.max_abs_diff(first, reference)
    tolerance = outputs.tolerance(reference, spec.dtype, spec.mode)
    manifest.max_abs_diff, manifest.diff_tolerance, manifest.diff_ok = diff, tolerance, diff <= tolerance
    if diff > tolerance:
        manifest.add_note(f"output differs from eager by {diff:.3g}, above the {spec.dtype} tolerance {tolerance:.3g}")

    stage(f"warm-up ({spec.warmup} calls)")
    t0 = time.perf_counter()
    with recorder.capture("warmup", device, module):
        for _ in range(spec.warmup):
            step(inputs)
        _sync(device)
    manifest.warmup_s = time.perf_counter() - t0
    stop_compile_workers()

    stage(f"timing ({spec.iters} iterations, interleaved with a synchronised wall clock)")
    manifest.latency_ms, manifest.wall_ms, manifest.interleaving = timing.interleaved(
        lambda: step(inputs), spec.iters, device, fixed=spec.nproc > 1)
    samples = manifest.latency_ms["samples"]
    manifest.timer_agreement = timing.agreement(manifest.latency_ms["median"], manifest.wall_ms["median"])
    if spec.nproc == 1:   # a rank's calls run collectives: every rank would have to time them alike
        manifest.host_ms = timing.host_times(lambda: step(inputs), device)
    if work := models.cost(spec.model, spec.batch, spec.dtype):  # single ops: the minimum work of a call
        manifest.flop_per_iter, manifest.bytes_per_iter = work["flop"], work["bytes"]
        manifest.op = work.get("op", spec.model)
    manifest.peak_memory_MB, manifest.memory_source = peak_memory(device)

    stage(f"profiling ({spec.profile_iters} iterations)")
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    worker = worker or f"{socket.gethostname()}_{os.getpid()}"
    own_profiler = prepared.profile(directory, worker) if prepared.profile else nullcontext()
    with kineto_lines_dropped(), own_profiler, recorder.scopes(module), torch.profiler.profile(
        activities=activities, record_shapes=True, experimental_config=sync_events_config(),
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=spec.profile_iters, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(directory), worker_name=worker,
                                                                use_gzip=True),
    ) as prof:
        for i in range(1 + spec.profile_iters):
            step(inputs)
            if i in (0, spec.profile_iters):
                # After the profiler's warm-up step: its kernels finish before the window opens (else a
                # GPU-bound run's queued work, e.g. a whole CUDA-graph replay, runs inside profiled step 1
                # with no launch call in the trace). After the last step: its kernels finish inside it.
                _sync(device)
            prof.step()
    traces = [p.name for p in trace_files(directory)]
    manifest.profile = {"iterations": spec.profile_iters, "traces": traces}
    return samples

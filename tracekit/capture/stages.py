"""The stages of a run in the process that holds the model, in order: build, reference
output, prepare (the backend), first call (compile), warm-up, timing, the profiled window
that writes the trace. Each fills its part of the run's manifest (:class:`Lifecycle`) and
names itself there, so a failure says where it happened. :func:`measure` runs them from the
reference output on; a run in one process (:func:`tracekit.capture.runner.run`) and each rank of a
job (:mod:`tracekit.capture.ranks`) call it, the counters' workload the first ones
(:mod:`tracekit.counters.workload`)."""

from __future__ import annotations

import resource
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from tracekit.backends import Prepared
from tracekit.capture import outputs, timers
from tracekit.capture.environment import describe
from tracekit.capture.lifecycle import Lifecycle
from tracekit.capture.phases import TRAINING, make_step, model_loss
from tracekit.capture.profiling import profiler, worker_name
from tracekit.capture.provenance import ProvenanceRecorder
from tracekit.capture.quiet import kineto_lines_dropped
from tracekit.capture.resolved import ResolvedRun
from tracekit.manifest import Interleaving, Profile, Timer
from tracekit.trace.reader import trace_files


@dataclass
class Workload:
    """The model in this process as the stages go.

    module, inputs: the built model (eval mode) and its example inputs.
    device: where its calls run: the backend's build device, then, once prepared, where
        the work really runs (ONNX Runtime's CPU provider: "cpu").
    build_s: seconds the build took. step: one iteration of the run's phase, once prepared;
    profile: the backend's own profiler, where it has one (:attr:`Prepared.profile`).
    """

    module: torch.nn.Module
    inputs: tuple
    device: str
    build_s: float
    step: Callable[[tuple], Any] | None = None
    profile: Callable | None = None


def sync(device: str) -> None:
    """Wait for the device's queued work (a CUDA synchronize; nothing on the CPU)."""
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


def _capture(recorder: ProvenanceRecorder | None, where: str, device: str, module: torch.nn.Module):
    return recorder.capture(where, device, module) if recorder is not None else nullcontext()


def build(run: ResolvedRun) -> Workload:
    """Build the model and its inputs on the backend's device (:meth:`ResolvedRun.build`;
    raises what it raises)."""
    t0 = time.perf_counter()
    module, inputs = run.build()
    return Workload(module, inputs, run.backend.device(run.spec), time.perf_counter() - t0)


def reference_output(w: Workload, life: Lifecycle) -> list[torch.Tensor]:
    """Stage "reference output": the eager module's output (its tensors, copied), which the
    first call's output is compared with; records the parameter count."""
    life.stage("reference output")
    life.manifest.parameters = sum(p.numel() for p in w.module.parameters())
    with torch.no_grad():
        reference = outputs.clone(w.module(*w.inputs))
        sync(w.device)
    return reference


def prepare(w: Workload, run: ResolvedRun, life: Lifecycle, recorder: ProvenanceRecorder | None = None,
            wrap: Callable[[torch.nn.Module], torch.nn.Module] | None = None) -> None:
    """Stage "prepare": the backend makes the callable (``prepare_s``, ``backend``, where it
    runs); ``wrap`` is applied to the module first (DDP, FSDP). Sets ``w.step`` and ``w.device``."""
    spec, m, build_on = run.spec, life.manifest, w.device
    life.stage("prepare")
    if build_on.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(torch.device(build_on))
    shared = wrap(w.module) if wrap else w.module
    t0 = time.perf_counter()
    with _capture(recorder, "prepare", build_on, w.module):
        prepared = run.backend.prepare(shared, w.inputs, spec)
    if not isinstance(prepared, Prepared):
        prepared = Prepared(prepared, build_on.split(":")[0])
    w.device = build_on if prepared.device_type == build_on.split(":")[0] else prepared.device_type
    m.prepare_s = time.perf_counter() - t0
    m.device_type, m.backend = prepared.device_type, prepared.info
    if prepared.device_type != run.device_type:
        # The name of the device that did the work (the CPU's, for ONNX Runtime's CPU provider on a
        # GPU machine), so the run is never shown, or held to peaks, as the GPU's.
        m.device_name = describe(w.device)["device_name"]
        m.add_note(f"ran on {prepared.device_type}, not {spec.device}: compare it only with "
                   f"{prepared.device_type} runs")
    w.step = prepared.step or make_step(prepared.fn, w.module, spec.phase)
    w.profile = prepared.profile


def first_call(w: Workload, run: ResolvedRun, life: Lifecycle, reference: list[torch.Tensor] | None = None) -> None:
    """Stage "compile (first call)": ``first_call_s`` and ``compile_s`` (with ``prepare_s``),
    the loss a backward phase used, and the output's ``max_abs_diff`` from ``reference``
    (none without one) against the dtype's tolerance (:func:`tracekit.capture.outputs.tolerance`)."""
    spec, m = run.spec, life.manifest
    life.stage("compile (first call)")
    t0 = time.perf_counter()
    out = w.step(w.inputs)
    if spec.phase in TRAINING - {"forward"}:
        m.loss = "model's own" if model_loss(out) is not None else "synthetic (mean of squared outputs)"
    first = outputs.clone(out) if reference is not None else None
    del out
    sync(w.device)
    m.first_call_s = time.perf_counter() - t0
    m.compile_s = (m.prepare_s or 0.0) + m.first_call_s
    if reference is None:
        return
    diff = outputs.max_abs_diff(first, reference)
    tolerance = outputs.tolerance(reference, spec.dtype, spec.mode)
    m.max_abs_diff, m.diff_tolerance, m.diff_ok = diff, tolerance, diff <= tolerance
    if diff > tolerance:
        m.add_note(f"output differs from eager by {diff:.3g}, above the {spec.dtype} tolerance {tolerance:.3g}")


def warm_up(w: Workload, run: ResolvedRun, life: Lifecycle, recorder: ProvenanceRecorder | None = None) -> None:
    """Stage "warm-up": ``spec.warmup`` more calls (``warmup_s``), then Inductor's idle compile
    workers are stopped (:func:`stop_compile_workers`)."""
    life.stage(f"warm-up ({run.spec.warmup} calls)")
    t0 = time.perf_counter()
    with _capture(recorder, "warmup", w.device, w.module):
        for _ in range(run.spec.warmup):
            w.step(w.inputs)
        sync(w.device)
    life.manifest.warmup_s = time.perf_counter() - t0
    stop_compile_workers()


def timing_stage(w: Workload, run: ResolvedRun, life: Lifecycle) -> list[float]:
    """Stage "timing": ``spec.iters`` calls timed one by one, interleaved with the synchronised
    wall clock (:func:`tracekit.capture.timers.interleaved`; the same schedule on every rank of a job),
    the host's own time per call (one process only), a single op's work, the peak memory.
    Returns the timed latencies (ms, in call order)."""
    spec, m = run.spec, life.manifest
    life.stage(f"timing ({spec.iters} iterations, interleaved with a synchronised wall clock)")
    latency, wall, interleaving = timers.interleaved(lambda: w.step(w.inputs), spec.iters, w.device,
                                                     fixed=spec.nproc > 1)
    m.latency_ms, m.wall_ms, m.interleaving = Timer.of(latency), Timer.of(wall), Interleaving.of(interleaving)
    m.timer_agreement = timers.agreement(m.latency_ms.median, m.wall_ms.median)
    if spec.nproc == 1:   # a rank's calls run collectives: every rank would have to time them alike
        m.host_ms = Timer.of(timers.host_times(lambda: w.step(w.inputs), w.device))
    if work := run.cost():  # single ops: the minimum work of a call
        m.flop_per_iter, m.bytes_per_iter = work["flop"], work["bytes"]
        m.op = work.get("op", spec.model)
    m.peak_memory_MB, m.memory_source = peak_memory(w.device)
    return m.latency_ms.samples


def profiled_window(w: Workload, run: ResolvedRun, life: Lifecycle, directory: Path,
                    recorder: ProvenanceRecorder | None = None, worker: str | None = None) -> None:
    """Stage "profiling": one profiler warm-up step, then ``spec.profile_iters`` iterations
    under torch.profiler (:func:`tracekit.capture.profiling.profiler`), one ``ProfilerStep#N``
    marker each, written into ``directory`` as ``worker`` (:func:`worker_name` when None), with
    the backend's own profile where it has one; records ``profile``."""
    n = run.spec.profile_iters
    life.stage(f"profiling ({n} iterations)")
    worker = worker or worker_name()
    own_profiler = w.profile(directory, worker) if w.profile else nullcontext()
    scopes = recorder.scopes(w.module) if recorder is not None else nullcontext()
    window = torch.profiler.schedule(wait=0, warmup=1, active=n, repeat=1)
    with kineto_lines_dropped(), own_profiler, scopes, profiler(w.device, directory, worker, window) as prof:
        for i in range(1 + n):
            w.step(w.inputs)
            if i in (0, n):
                # After the profiler's warm-up step: its kernels finish before the window opens (else a
                # GPU-bound run's queued work, e.g. a whole CUDA-graph replay, runs inside profiled step 1
                # with no launch call in the trace). After the last step: its kernels finish inside it.
                sync(w.device)
            prof.step()
    life.manifest.profile = Profile(iterations=n, traces=[p.name for p in trace_files(directory)])


def measure(run: ResolvedRun, life: Lifecycle, w: Workload, directory: Path, recorder: ProvenanceRecorder,
            wrap: Callable[[torch.nn.Module], torch.nn.Module] | None = None, worker: str | None = None) -> list[float]:
    """The stages from the reference output to the profiled window on the built ``w``; returns
    the timed latencies (ms). ``recorder`` records what attribution needs
    (:mod:`tracekit.capture.provenance`); ``wrap``: see :func:`prepare`."""
    reference = reference_output(w, life)
    prepare(w, run, life, recorder, wrap)
    first_call(w, run, life, reference)
    warm_up(w, run, life, recorder)
    samples = timing_stage(w, run, life)
    profiled_window(w, run, life, directory, recorder, worker)
    return samples

"""The bodies of the capture's stages; their order is :meth:`tracekit.capture.capture_run.Capture.sequence`'s,
and nothing else calls them. Each fills its part of the run's manifest and names itself there (``c.stage``),
so a failure says where it happened.

A stage that runs the workload is a generator: it calls the step itself where this process holds
the model (:attr:`Workload.step`, once prepared), and where the user's loop makes the calls
(``tracekit.record``: no step here) it yields at each call instead, resumed by the loop's next
``rec.step()`` (:func:`called`).
"""

from __future__ import annotations

import resource
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

import msgspec
import torch

from tracekit.backends import Backend, Prepared
from tracekit.capture import capture_path, outputs, timers, twins
from tracekit.capture.environment import describe, libraries
from tracekit.capture.phases import TRAINING, make_step, model_loss
from tracekit.capture.profiling import profiler
from tracekit.capture.quiet import kineto_lines_dropped
from tracekit.capture.resolved import ResolvedRun
from tracekit.manifest import CapturePath, Interleaving, Profile, Timer
from tracekit.trace.reader import trace_files

if TYPE_CHECKING:
    from tracekit.capture.capture_run import Capture


@dataclass
class Workload:
    """The model in this process as the stages go.

    module, inputs: the built model (eval mode) and its example inputs (None and () for a
        recorded loop, whose model is the user's).
    device: where its calls run: the backend's build device, then, once prepared, where
        the work really runs (ONNX Runtime's CPU provider: "cpu").
    build_s: seconds the build took. step: one iteration of the run's phase, once prepared
        (None where the user's loop makes the calls); profile: the backend's own profiler,
        where it has one (:attr:`Prepared.profile`).
    """

    module: torch.nn.Module | None
    inputs: tuple
    device: str
    build_s: float | None = None
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


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation that failed for want of memory: torch's OutOfMemoryError, or a
    message saying "out of memory" (CUDA's) or "can't allocate memory" (the CPU allocator's)."""
    text = str(exc).lower()
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in text or "can't allocate memory" in text


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


def called(w: Workload) -> Iterator[None]:
    """One call of the step: made here where this process holds the prepared step (the
    generator then returns its output without yielding), else made by the user's loop while the
    generator waits at its one yield (it returns None). ``out = yield from called(w)``."""
    if w.step is None:
        yield
        return None
    return w.step(w.inputs)


def _capture(c: Capture, where: str, device: str, module: torch.nn.Module | None):
    return c.recorder.capture(where, device, module) if c.recorder is not None else nullcontext()


def build(run: ResolvedRun) -> Workload:
    """Build the model and its inputs on the backend's device (:meth:`ResolvedRun.build`;
    raises what it raises)."""
    t0 = time.perf_counter()
    module, inputs = run.build()
    return Workload(module, inputs, run.backend.device(run.spec), time.perf_counter() - t0)


def reference_output(w: Workload, c: Capture) -> list[torch.Tensor]:
    """Stage "reference output": the eager module's output (its tensors, copied), which the
    first call's output is compared with; records the parameter count."""
    c.stage("reference output")
    c.manifest.parameters = sum(p.numel() for p in w.module.parameters())
    with torch.no_grad():
        reference = outputs.clone(w.module(*w.inputs))
        sync(w.device)
    return reference


@contextmanager
def _capture_stream(backend: Backend, device: str) -> Iterator[None]:
    """Where the backend captures a CUDA graph in prepare (``graph_capture == "prepare"``), the
    context runs on one side stream, which first waits for the current stream's work and is waited
    for at the end: a rank's model is wrapped (DDP built, FSDP2 sharded) on it and the backend
    warms up and captures on it (PyTorch's CUDA semantics notes, "Usage with
    DistributedDataParallel": DDP constructed in a side-stream context; NVIDIA/Megatron-LM#6021: the
    AccumulateGrad nodes DDP keeps belong to the stream they were made on, so the capture must use
    that one). Elsewhere it does nothing."""
    if backend.graph_capture != "prepare" or not device.startswith("cuda"):
        yield
        return
    caller, side = torch.cuda.current_stream(), torch.cuda.Stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        yield
    caller.wait_stream(side)


def prepare(w: Workload, c: Capture) -> None:
    """Stage "prepare": the backend makes the callable (``prepare_s``, ``backend``, where it
    runs); a rank's ``c.wrap`` is applied to the module first (DDP, FSDP), on the stream the
    backend captures on where it captures a CUDA graph here (:func:`_capture_stream`). Sets
    ``w.step`` and ``w.device``."""
    run, m, build_on = c.resolved, c.manifest, w.device
    c.stage("prepare")
    if build_on.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(torch.device(build_on))
    with _capture_stream(run.backend, build_on):
        shared = c.wrap(w.module) if c.wrap else w.module
        t0 = time.perf_counter()
        with _capture(c, "prepare", build_on, w.module):
            prepared = run.backend.prepare(shared, w.inputs, run.spec)
    if not isinstance(prepared, Prepared):
        prepared = Prepared(prepared, build_on.split(":")[0])
    w.device = build_on if prepared.device_type == build_on.split(":")[0] else prepared.device_type
    m.prepare_s = time.perf_counter() - t0
    m.device_type, m.backend = prepared.device_type, prepared.info
    if prepared.device_type != run.device_type:
        # The name of the device that did the work (the CPU's, for ONNX Runtime's CPU provider on a
        # GPU machine), so the run is never shown, or held to peaks, as the GPU's.
        m.device_name = describe(w.device)["device_name"]
        m.add_note(f"ran on {prepared.device_type}, not {run.spec.device}: compare it only with "
                   f"{prepared.device_type} runs")
    w.step = prepared.step or make_step(prepared.fn, w.module, run.spec.phase)
    w.profile = prepared.profile
    if m.environment is not None:
        m.environment = msgspec.structs.replace(m.environment, libraries=libraries() or None)


def first_call(w: Workload, c: Capture, reference: list[torch.Tensor] | None) -> Iterator[None]:
    """Stage "compile (first call)": ``first_call_s`` and ``compile_s`` (with ``prepare_s``),
    the loss a backward phase used, and the output's ``max_abs_diff`` from ``reference``
    (none without one) against the dtype's tolerance (:func:`tracekit.capture.outputs.tolerance`)."""
    spec, m = c.spec, c.manifest
    c.stage("compile (first call)")
    t0 = time.perf_counter()
    out = yield from called(w)
    if spec.phase in TRAINING - {"forward"} and out is not None:
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


def warm_up(w: Workload, c: Capture, calls: int) -> Iterator[None]:
    """Stage "warm-up": ``calls`` more calls (``warmup_s``), then Inductor's idle compile
    workers are stopped (:func:`stop_compile_workers`)."""
    c.stage(f"warm-up ({calls} calls)")
    t0 = time.perf_counter()
    with _capture(c, "warmup", w.device, w.module):
        for _ in range(calls):
            yield from called(w)
        sync(w.device)
    c.manifest.warmup_s = time.perf_counter() - t0
    stop_compile_workers()


def timing(w: Workload, c: Capture) -> Iterator[None]:
    """Stage "timing": ``spec.iters`` calls timed one by one, then the peak memory.

    Where this process calls the step: interleaved with the synchronised wall clock
    (:func:`tracekit.capture.timers.interleaved`; the same schedule on every rank of a job), then
    the host's own time per call (:func:`tracekit.capture.timers.host_times`; on a rank each call
    after a barrier of the process group), the run's twin where it has one
    (:func:`tracekit.capture.twins.timing`), and a single op's work. Where the user's loop calls it:
    each step from the previous ``rec.step()`` to its own, no synchronize added
    (:class:`tracekit.capture.timers.StepClock`; the latency is recorded when the loop ends, with
    its later steps)."""
    spec, m = c.spec, c.manifest
    if w.step is None:
        c.stage(f"timing ({spec.iters} steps)")
        c.step_clock.start()
        for _ in range(spec.iters):
            yield
            c.step_clock.lap()
    else:
        c.stage(f"timing ({spec.iters} iterations, interleaved with a synchronised wall clock)")
        call = lambda: w.step(w.inputs)  # noqa: E731
        latency, wall, interleaving = timers.interleaved(call, spec.iters, w.device, fixed=c.world_size > 1)
        m.latency_ms, m.wall_ms, m.interleaving = Timer.of(latency), Timer.of(wall), Interleaving.of(interleaving)
        m.timer_agreement = timers.agreement(m.latency_ms.median, m.wall_ms.median)
        m.host_ms = Timer.of(timers.host_times(call, w.device, barrier=c.barrier))
        twins.timing(w, c)
        if work := c.resolved.cost():  # single ops: the minimum work of a call
            m.flop_per_iter, m.bytes_per_iter = work["flop"], work["bytes"]
            m.op = work.get("op", spec.model)
    m.peak_memory_MB, m.memory_source = peak_memory(w.device)


def profiled_window(w: Workload, c: Capture) -> Iterator[None]:
    """Stage "profiling": one profiler warm-up step, then ``spec.profile_iters`` iterations
    under torch.profiler (:func:`tracekit.capture.profiling.profiler`), one ``ProfilerStep#N``
    marker each (N from 1), written into ``c.trace_dir`` as ``c.worker``, with the backend's own
    profile where it has one and module scopes where the recorder puts them; records ``profile``.
    Kineto's lines are dropped from stderr meanwhile (other lines pass when the window ends)."""
    n = c.spec.profile_iters
    c.stage(f"profiling ({n} iterations)")
    own_profiler = w.profile(c.trace_dir, c.worker) if w.profile else nullcontext()
    scopes = c.recorder.scopes(w.module) if c.recorder is not None else nullcontext()
    window = torch.profiler.schedule(wait=0, warmup=1, active=n, repeat=1)
    with kineto_lines_dropped(), own_profiler, scopes, profiler(w.device, c.trace_dir, c.worker, window) as prof:
        for i in range(1 + n):
            yield from called(w)
            if i in (0, n):
                # After the profiler's warm-up step: its kernels finish before the window opens (else a
                # GPU-bound run's queued work, e.g. a whole CUDA-graph replay, runs inside profiled step 1
                # with no launch call in the trace). After the last step: its kernels finish inside it.
                sync(w.device)
            prof.step()
            c.profiled_steps = i
    c.manifest.profile = Profile(iterations=n, traces=[p.name for p in trace_files(c.trace_dir)])


def as_if_captured(w: Workload, c: Capture) -> None:
    """Stage "capture path": after the profiled window, one step as it runs and one while
    ``torch.cuda.is_current_stream_capturing()`` says True, their aten ops compared, and where they
    differ its steps traced so (:func:`tracekit.capture.capture_path.record`); records
    ``capture_path``. A check that cannot be made is a note, never the run's failure."""
    c.stage("capture path (a step as if a CUDA graph captured it)")
    try:
        c.manifest.capture_path = CapturePath.of(capture_path.record(
            lambda: w.step(w.inputs), w.device, c.trace_dir, c.worker, c.spec.profile_iters))
    except Exception as exc:  # noqa: BLE001 - the run's figures are made; this check only adds to them
        c.manifest.add_note(f"capture path not checked: {type(exc).__name__}: {str(exc).strip()[:200]}")


def nvtx_window(w: Workload, c: Capture, name: str) -> Iterator[None]:
    """Stage "measured iterations" (the counters' workload): ``spec.profile_iters`` calls, each
    inside an NVTX push/pop range ``name`` on CUDA (ncu's ``--nvtx-include`` selects them);
    records ``profile`` (no trace)."""
    n, cuda = c.spec.profile_iters, w.device.startswith("cuda")
    c.stage(f"measured iterations ({n}, in NVTX ranges {name})")
    for _ in range(n):
        if cuda:
            torch.cuda.nvtx.range_push(name)
        yield from called(w)
        if cuda:
            torch.cuda.nvtx.range_pop()
    sync(w.device)
    c.manifest.profile = Profile(iterations=n, traces=[])


def later_steps(c: Capture) -> Iterator[None]:
    """A recorded loop's steps after the profiled window, until it ends: each timed as in the
    timing stage (:class:`tracekit.capture.timers.StepClock`)."""
    c.stage("timing (the steps after the profiled window)")
    c.step_clock.start()
    while True:
        yield
        c.step_clock.lap()


def loop_timings(c: Capture) -> None:
    """What a recorded loop's timed steps measured, whenever it ended: ``latency_ms`` and
    ``steps_ms`` (each timed step, ms), and ``profile`` where the window did not complete."""
    m = c.manifest
    times, timer = c.step_clock.times_ms()
    m.latency_ms = Timer.of({**(timers.latency_stats(times) if times else {}), "timer": timer})
    m.steps_ms = times
    if m.profile is None:
        m.profile = Profile(iterations=c.profiled_steps, traces=[p.name for p in trace_files(c.trace_dir)])

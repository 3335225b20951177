"""Run one workload on one backend mode: warm-up, timing, profiled window, manifest.

Layout written (the one TensorBoard's profiler plugin reads: one run per folder)::

    <out>/<label>/<mode>/<worker>.<timestamp_ns>.pt.trace.json.gz
    <out>/<label>/<mode>/run.json

Failures are data: an out-of-memory, a compile error or an unavailable
backend still writes run.json, with ``status`` and ``reason``.
"""

from __future__ import annotations

import os
import resource
import socket
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from tracekit import __version__, backends, models
from tracekit.backends import Prepared
from tracekit.environment import default_device, describe
from tracekit.manifest import Manifest
from tracekit.phases import make_step
from tracekit.spec import PHASES, RunSpec, resolve
from tracekit.trace.reader import is_trace_file

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def latency_stats(samples_ms: list[float]) -> dict:
    """Summary of per-iteration latencies (ms): n, mean, median, p10, p90, std, min, max."""
    a = np.asarray(samples_ms, dtype=np.float64)
    return {"n": int(a.size), "mean": float(a.mean()), "median": float(np.median(a)),
            "p10": float(np.percentile(a, 10)), "p90": float(np.percentile(a, 90)),
            "std": float(a.std(ddof=1)) if a.size > 1 else 0.0, "min": float(a.min()), "max": float(a.max())}


class _Timer:
    """Per-call latency in ms: CUDA events on a GPU (device time between the
    calls' enqueue points, read after one final sync), perf_counter on the CPU."""

    def __init__(self, device: str):
        self.cuda = device.startswith("cuda")
        self.name = "cuda_events" if self.cuda else "perf_counter"

    def time(self, fn: Callable[[], object], n: int) -> list[float]:
        if self.cuda:
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
            for start, end in pairs:
                start.record()
                fn()
                end.record()
            torch.cuda.synchronize()
            return [start.elapsed_time(end) for start, end in pairs]
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return out


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _max_abs_diff(out, ref) -> float:
    if isinstance(out, (tuple, list)):
        return max(_max_abs_diff(o, r) for o, r in zip(out, ref))
    return float((out.detach().float().cpu() - ref.float().cpu()).abs().max().item())


def _max_abs(ref) -> float:
    if isinstance(ref, (tuple, list)):
        return max(_max_abs(r) for r in ref)
    return float(ref.float().abs().max().item())


# Output difference allowed against eager, relative to the largest output value. Compiled
# kernels reorder reductions and may use TF32 or other fused math; these are about 10x the
# rtol torch.testing.assert_close uses for bit-near results (fp32 1.3e-6 is too strict for a
# whole network), in line with the accuracy of each format: fp32 with TF32 matmuls ~1e-3,
# fp16 (10-bit mantissa) ~1e-2, bf16 (7-bit mantissa) ~5e-2; FP8 backends get 0.25.
# Cross-checks: PyTorch's torch.compile accuracy harness allows 1e-3 for fp32 inference of timm
# and Hugging Face models (benchmarks/dynamo/timm_models.py, huggingface.py:
# get_tolerance_and_cosine_flag) and 1e-2 for fp16/bf16 models that need more (torchbench.py);
# TransformerEngine's FP8 tests allow rtol 0.125 (E4M3) and 0.25 (E5M2) for one GEMM
# (tests/pytorch/test_fusible_ops.py, dtype_tols).
DIFF_RTOL = {"fp32": 1e-3, "fp16": 1e-2, "bf16": 5e-2}
FP8_RTOL = 0.25


def _clone(out):
    if isinstance(out, (tuple, list)):
        return type(out)(_clone(o) for o in out)
    return out.detach().clone()


def _peak_memory(device: str) -> tuple[float, str]:
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated(torch.device(device)) / 2**20, "cuda_max_memory_allocated"
    # Linux reports ru_maxrss in KiB: the process's peak resident set, over its whole life.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process_max_rss"


def _classify(exc: BaseException) -> str:
    if isinstance(exc, models.Unavailable):
        return "skipped"
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower():
        return "oom"
    return "failed"


@contextmanager
def _compile_cache():
    """A fresh, empty Inductor/Triton cache for the run, so ``compile_s`` is a cold
    compile, unless the user set TORCHINDUCTOR_CACHE_DIR (then theirs is used).

    Yields "cold" or the user's cache folder, recorded in the manifest.
    Inductor reads TORCHINDUCTOR_CACHE_DIR at each use and keeps Triton's cache
    under it (torch/_inductor/runtime/cache_dir_utils.py).
    """
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        yield os.environ["TORCHINDUCTOR_CACHE_DIR"]
        return
    with tempfile.TemporaryDirectory(prefix="tracekit-inductor-") as tmp:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tmp
        try:
            yield "cold"
        finally:
            del os.environ["TORCHINDUCTOR_CACHE_DIR"]


def _stop_compile_workers() -> None:
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


def run_dir(spec: RunSpec, out: Path, device: str | None = None) -> Path:
    """The folder a run of ``spec`` writes to: ``out/<label>/<mode>``.

    ``device``: the default device of the machine the run is (or was) made on
    ("cuda" or "cpu"; this machine's when None): the label names a device only
    where the spec's differs from it.
    """
    label = spec.label(models.default_batch(spec.model), device or default_device())
    return Path(out) / label / spec.mode


def run(spec: RunSpec, out: Path | str = "traces", log: Log = _stderr) -> Manifest:
    """Run ``spec``, write its trace and run.json under ``out``; return the :class:`~tracekit.manifest.Manifest`.

    Stages: build the model and the eager reference output; prepare the backend;
    first call (``compile_s``: compilation happens here for compiled modes);
    ``warmup`` more calls; ``iters`` timed calls (``latency_ms``); output
    ``max_abs_diff`` against eager; then ``profile_iters`` iterations under
    torch.profiler, one ``ProfilerStep#N`` marker each, after one profiler
    warm-up step.

    Raises:
        models.UnknownModel, backends.UnknownMode: invalid names (nothing written).
        ValueError: invalid dtype, batch or device (nothing written).
    A mode or workload that cannot run here (not installed, needs CUDA, phase not
    supported, ``models.Unavailable``) is recorded as status "skipped" with the
    reason; any other failure as "oom" or "failed"; either way run.json is
    written and returned.
    """
    backend = backends.get(spec.mode)
    family_batch = models.default_batch(spec.model)
    if spec.dtype not in models.DTYPES:
        raise ValueError(f"unknown dtype {spec.dtype!r}; valid dtypes: {', '.join(models.DTYPES)}")
    if spec.phase not in PHASES:
        raise ValueError(f"unknown phase {spec.phase!r}; valid phases: {', '.join(PHASES)}")
    device_default = default_device()
    directory = run_dir(spec, Path(out))
    spec = resolve(spec, family_batch, device_default)
    device_type = spec.device.split(":")[0]
    if device_type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda requested but torch sees no GPU (is this the CPU build of torch?)")

    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.iterdir():
        if old.is_file() and is_trace_file(old):
            old.unlink()
    manifest = Manifest(
        tracekit=__version__, spec=spec.to_dict(), label=directory.parent.name, model=spec.model, mode=spec.mode,
        device_type=device_type, status="running", reason="", stage="start", note=backend.note(device_type),
        environment=describe(spec.device), started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    manifest.write(directory)

    def stage(name: str) -> None:
        manifest.stage = name
        log(f"[{directory}] {name}")

    reason = backends.why_not(backend, spec)
    if reason:
        manifest.status, manifest.reason = "skipped", reason
        manifest.write(directory)
        log(f"[{directory}] unavailable: {reason}")
        return manifest
    try:
        with _compile_cache() as cache:
            manifest.compile_cache = cache
            _measure(spec, backend, directory, manifest, stage)
        manifest.status, manifest.stage = "ok", "done"
    except Exception as exc:  # noqa: BLE001 - every failure becomes a status row
        manifest.status = _classify(exc)
        manifest.reason = f"{type(exc).__name__}: {str(exc).strip()[:2000]}"
        log(f"[{directory}] {manifest.status} during {manifest.stage}: {manifest.reason[:300]}")
    finally:
        manifest.finished_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        manifest.write(directory)
    return manifest


def _measure(spec: RunSpec, backend, directory: Path, manifest: Manifest, stage) -> None:
    build_on = backend.device(spec)
    stage("build")
    module, inputs = models.build(spec.model, spec.batch, spec.dtype, build_on, spec.seed)
    with torch.no_grad():
        reference = _clone(module(*inputs))
        _sync(build_on)

    stage("prepare")
    if build_on.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(torch.device(build_on))
    t0 = time.perf_counter()
    prepared = backend.prepare(module, inputs, spec)
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
    step = make_step(prepared.fn, module, spec.phase)

    stage("compile (first call)")
    t0 = time.perf_counter()
    first = _clone(step(inputs))
    _sync(device)
    manifest.first_call_s = time.perf_counter() - t0
    manifest.compile_s = manifest.prepare_s + manifest.first_call_s
    diff = _max_abs_diff(first, reference)
    rtol = FP8_RTOL if "fp8" in spec.mode else DIFF_RTOL[spec.dtype]
    tolerance = rtol * max(1.0, _max_abs(reference))
    manifest.max_abs_diff, manifest.diff_tolerance, manifest.diff_ok = diff, tolerance, diff <= tolerance
    if diff > tolerance:
        manifest.add_note(f"output differs from eager by {diff:.3g}, above the {spec.dtype} tolerance {tolerance:.3g}")

    stage(f"warm-up ({spec.warmup} calls)")
    t0 = time.perf_counter()
    for _ in range(spec.warmup):
        step(inputs)
    _sync(device)
    manifest.warmup_s = time.perf_counter() - t0
    _stop_compile_workers()

    stage(f"timing ({spec.iters} iterations)")
    timer = _Timer(device)
    samples = timer.time(lambda: step(inputs), spec.iters)
    manifest.latency_ms = {**latency_stats(samples), "timer": timer.name}
    if work := models.cost(spec.model, spec.batch, spec.dtype):  # single ops: the minimum work of a call
        manifest.flop_per_iter, manifest.bytes_per_iter = work["flop"], work["bytes"]
        manifest.op = work.get("op", spec.model)
    manifest.peak_memory_MB, manifest.memory_source = _peak_memory(device)

    stage(f"profiling ({spec.profile_iters} iterations)")
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    worker = f"{socket.gethostname()}_{os.getpid()}"
    own_profiler = prepared.profile(directory, worker) if prepared.profile else nullcontext()
    with own_profiler, torch.profiler.profile(
        activities=activities, record_shapes=True,
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=spec.profile_iters, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(directory), worker_name=worker,
                                                                use_gzip=True),
    ) as prof:
        for i in range(1 + spec.profile_iters):
            step(inputs)
            if i == spec.profile_iters:
                _sync(device)  # let the last kernels finish inside the window
            prof.step()
    traces = sorted(p.name for p in directory.iterdir() if is_trace_file(p))
    manifest.profile = {"iterations": spec.profile_iters, "traces": traces}

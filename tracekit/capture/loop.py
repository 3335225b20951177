"""Record your own loop: ``tracekit.record`` around a training or serving loop writes a normal run folder.

::

    with tracekit.record("traces/my-run", mode="eager") as rec:
        for batch in loader:
            loss = model(batch).sum(); loss.backward(); opt.step(); opt.zero_grad()
            rec.step()                      # after each iteration

The folder ``traces/my-run/eager/`` gets a Kineto trace with one
``ProfilerStep#N`` marker per profiled iteration and a ``run.json`` (model
``my-run``, the mode, the environment, per-step times), so ``tracekit analyze``
and ``tracekit compare`` treat it like any run: record the same loop again with
``mode="default"`` around a compiled model and ``tracekit analyze traces/``
compares the two.

Steps are numbered from 1 (each ``rec.step()`` ends one), laid out as
torch.profiler's schedule (``skip_first``, ``wait``, ``warmup``, ``active``):

* ``warmup`` steps: neither timed nor profiled (compilation, caches, allocator);
  the first one's wall time is ``first_call_s``;
* ``iters`` steps timed without the profiler (``latency_ms``);
* one profiler warm-up step, then ``profile_iters`` profiled steps (the trace);
* every later step is timed without the profiler too.

A step's time is the time from the previous ``step()`` to this one: CUDA events
recorded at each call on a GPU (device time between the calls' enqueue points,
read after one sync at the end; no sync is added to your loop), ``perf_counter``
on the CPU. ``run.json`` keeps every timed step (``steps_ms``) and their
statistics (``latency_ms``). A loop that ends before the profiled window is
complete, or raises, is recorded with status "failed" and the reason (the
exception goes on).
"""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from tracekit.capture.environment import default_device
from tracekit.capture.lifecycle import Lifecycle, new_manifest
from tracekit.capture.profiling import profiler
from tracekit.capture.quiet import kineto_lines_dropped
from tracekit.capture.stages import peak_memory, stop_compile_workers
from tracekit.capture.timers import latency_stats
from tracekit.manifest import Manifest, Profile, Timer
from tracekit.manifest.spec import DEFAULT_PROFILE_ITERS, DEFAULT_WARMUP, RunSpec
from tracekit.trace.reader import trace_files

DEFAULT_LOOP_ITERS = 20  # steps timed before the profiled window


class Recorder:
    """What ``tracekit.record`` returns: a context manager; call :meth:`step` after each iteration.

    Attributes:
        folder: the run folder (``path/mode``).
        steps: the steps done so far.
        manifest: the run's :class:`~tracekit.manifest.Manifest` (final after the ``with`` block).
    """

    def __init__(self, path: Path | str, mode: str, spec: RunSpec, source: dict):
        self.folder = Path(path) / mode
        self.spec, self.source = spec, source
        self.steps = 0
        self.manifest: Manifest | None = None
        self._life: Lifecycle | None = None
        self._cuda = spec.device.startswith("cuda")
        self._first = spec.warmup + spec.iters + 2  # the first profiled step (after the profiler's warm-up step)
        self._last = self._first + spec.profile_iters - 1
        self._times: list[float] = []   # perf_counter at the start and at each step
        self._events: list = []          # CUDA events, likewise

    def _mark(self) -> None:
        self._times.append(time.perf_counter())
        if self._cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._events.append(event)

    def __enter__(self) -> "Recorder":
        # no model to build: the user's loop makes the calls
        self._life = Lifecycle(new_manifest(self.spec, self.folder.parent.name, self.source), self.folder, log=None)
        self.manifest = self._life.manifest
        self._life.start()
        self._life.stage("loop")
        self._life.write()
        if self._cuda:
            torch.cuda.reset_peak_memory_stats(torch.device(self.spec.device))
        s = self.spec
        window = torch.profiler.schedule(skip_first=s.warmup, wait=s.iters, warmup=1, active=s.profile_iters, repeat=1)
        self._profiler = profiler(s.device, self.folder, schedule=window)
        with kineto_lines_dropped():
            self._profiler.start()
        self._mark()
        return self

    def step(self) -> None:
        """End one iteration of the loop (call it after each)."""
        self.steps += 1
        if self.steps in (self._first - 1, self._last) and self._cuda:
            # as in a run's profiled window (tracekit.capture.stages): the profiler's warm-up step's kernels
            # finish before the window opens, the last profiled step's inside it
            torch.cuda.synchronize()
        self._mark()
        # Kineto prints its start and stop lines in the profiler's calls around the window; none of
        # those steps is timed (the filter's cost lands in the profiler's warm-up step or after the window)
        with kineto_lines_dropped() if self._first - 2 <= self.steps <= self._last else nullcontext():
            self._profiler.step()
        if self.steps == self.spec.warmup:
            stop_compile_workers()  # as the runner does after its warm-up: idle compile workers take CPU time
        if self.steps == self._last:  # the trace was exported in that call: the next step starts after it
            self._times.pop()
            self._events[-1:] = []
            self._mark()

    def _profiled(self, step: int) -> bool:
        return self._first - 1 <= step <= self._last  # the profiler's warm-up step and the profiled ones

    def __exit__(self, exc_type, exc, tb) -> bool:
        with kineto_lines_dropped():
            self._profiler.stop()
        if self._cuda:
            torch.cuda.synchronize()
        m, spec = self.manifest, self.spec
        if self._cuda:
            times = [a.elapsed_time(b) for a, b in zip(self._events, self._events[1:])]
            timer = "cuda_events"
        else:
            times = [(b - a) * 1e3 for a, b in zip(self._times, self._times[1:])]
            timer = "perf_counter"
        if len(self._times) > 1:
            m.first_call_s = m.compile_s = self._times[1] - self._times[0]
        timed = [t for i, t in enumerate(times, 1) if i > spec.warmup and not self._profiled(i)]
        m.latency_ms = Timer.of({**(latency_stats(timed) if timed else {}), "timer": timer})
        m.steps, m.steps_ms = self.steps, timed
        m.peak_memory_MB, m.memory_source = peak_memory(spec.device)
        m.profile = Profile(iterations=max(0, min(self.steps, self._last) - self._first + 1),
                            traces=[p.name for p in trace_files(self.folder)])
        if exc is not None:
            self._life.fail(exc, f" in the loop at step {self.steps + 1}")
        elif self.steps < self._last:
            self._life.end("failed", f"the loop ended after {self.steps} steps, before the profiled window's end "
                           f"(step {self._last}: {spec.warmup} warm-up + {spec.iters} timed + 1 profiler warm-up + "
                           f"{spec.profile_iters} profiled); run more steps or record with smaller counts")
        else:
            self._life.end("ok")
        if m.status != "ok":
            m.stage = f"loop step {self.steps + 1}"
        self._life.finish()
        return False


def record(path: Path | str, mode: str = "eager", *, name: str | None = None, phase: str = "loop",
           batch: int | None = None, dtype: str = "fp32", device: str | None = None, warmup: int = DEFAULT_WARMUP,
           iters: int = DEFAULT_LOOP_ITERS, profile_iters: int = DEFAULT_PROFILE_ITERS) -> Recorder:
    """Record the loop inside ``with tracekit.record(path, mode=...) as rec:`` (see the module docstring).

    Args:
        path: the workload folder; the run goes to ``path/mode/`` (trace and run.json).
        mode: what the loop runs, as a run label: "eager", "default" (a torch.compile'd
            model), ... The baseline of comparisons is "eager".
        name: the model name in run.json (default: the folder's name); runs are
            compared when model, batch, dtype, phase and device match.
        phase: what one step does, for the record ("loop" unless told: "train-step",
            "inference"...).
        batch, dtype: recorded (the loop decides what it runs).
        device: "cuda[:N]" times steps with CUDA events and traces CUDA
            activity; "cpu" does neither (default: cuda when torch sees a GPU).
        warmup, iters, profile_iters: steps before timing, timed steps before the
            profiled window, profiled steps (the loop needs at least
            ``warmup + iters + 1 + profile_iters`` steps).

    Returns:
        A :class:`Recorder` (a context manager).

    Raises:
        ValueError: a negative count, no profiled step, or a CUDA device without a GPU.
    """
    if min(warmup, iters) < 0 or profile_iters < 1:
        raise ValueError("warmup and iters must be >= 0, profile_iters >= 1")
    device = device or default_device()
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device cuda requested but torch sees no GPU (is this the CPU build of torch?)")
    caller = sys._getframe(1)
    source = {"kind": "loop", "file": str(Path(caller.f_code.co_filename).resolve()), "line": caller.f_lineno}
    spec = RunSpec(model=name or Path(path).resolve().name, mode=mode, batch=batch, dtype=dtype, device=device,
                   phase=phase, warmup=warmup, iters=iters, profile_iters=profile_iters)
    return Recorder(path, mode, spec, source)

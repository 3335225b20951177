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

The loop goes through the one capture's stages
(:meth:`tracekit.capture.capture_run.Capture.sequence`), its steps made by the loop: each
``rec.step()`` resumes the sequence where it waits. Steps are numbered from 1 (each
``rec.step()`` ends one):

* ``warmup`` steps: neither timed nor profiled (compilation, caches, allocator);
  the first one is the first call (``first_call_s``), the others the warm-up
  (``warmup_s``), each stage ending with a synchronize, as in a run;
* ``iters`` steps timed without the profiler (``latency_ms``);
* one profiler warm-up step, then ``profile_iters`` profiled steps (the trace,
  with markers ``ProfilerStep#1`` to ``#profile_iters`` as a run's; lines the
  loop writes to stderr meanwhile are passed on when the window ends);
* every later step is timed without the profiler too.

A step's time is the time from the previous ``step()`` to this one: CUDA events
recorded at each call on a GPU (device time between the calls' enqueue points,
read after one sync at the end; no sync is added to your timed steps),
``perf_counter`` on the CPU. ``run.json`` keeps every timed step (``steps_ms``)
and their statistics (``latency_ms``); what a loop cannot record that a run does
is :data:`tracekit.capture.capture_run.DIFFERENCES`' "recorded loop". A loop that
ends before the profiled window is complete, or raises, is recorded with status
"failed" and the reason (the exception goes on).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from tracekit.capture.capture_run import Capture
from tracekit.capture.environment import default_device
from tracekit.capture.stages import Workload
from tracekit.manifest import Manifest
from tracekit.manifest.spec import DEFAULT_PROFILE_ITERS, DEFAULT_WARMUP, RunSpec

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
        self.spec, self.steps = spec, 0
        self._capture = Capture(spec, self.folder.parent.name, source, self.folder, log=None)
        self.manifest: Manifest = self._capture.manifest
        self._last = spec.warmup + spec.iters + 1 + spec.profile_iters   # the profiled window's last step

    def __enter__(self) -> "Recorder":
        self._capture.start()
        if self.spec.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats(torch.device(self.spec.device))
        # no model here: the user's loop makes the calls, and the sequence waits for each at a yield
        self._sequence = self._capture.sequence(Workload(None, (), self.spec.device))
        next(self._sequence)
        return self

    def step(self) -> None:
        """End one iteration of the loop (call it after each)."""
        self.steps += 1
        next(self._sequence)

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._sequence.close()   # its stage ends (a window cut short writes its trace); the timed steps are recorded
        m, spec = self.manifest, self.spec
        m.steps = self.steps
        if exc is not None:
            self._capture.fail(exc, f" in the loop at step {self.steps + 1}")
        elif self.steps < self._last:
            self._capture.end("failed", f"the loop ended after {self.steps} steps, before the profiled window's end "
                              f"(step {self._last}: {spec.warmup} warm-up + {spec.iters} timed + 1 profiler warm-up + "
                              f"{spec.profile_iters} profiled); run more steps or record with smaller counts")
        else:
            self._capture.end("ok")
        if m.status != "ok":
            m.stage = f"loop step {self.steps + 1}"
        self._capture.finish()
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
    caller = sys._getframe(1)
    source = {"kind": "loop", "file": str(Path(caller.f_code.co_filename).resolve()), "line": caller.f_lineno}
    spec = RunSpec(model=name or Path(path).resolve().name, mode=mode, batch=batch, dtype=dtype, device=device,
                   phase=phase, warmup=warmup, iters=iters, profile_iters=profile_iters)
    return Recorder(path, mode, spec, source)

"""Why the two timers of one cell disagree: time one cell's call several ways, several rounds.

    python benchmarks/timer_probe.py OUT.jsonl MODEL PHASE MODE [MODEL PHASE MODE ...]

For each (model, phase, mode) -- e.g. ``lm-large-512 forward default`` -- the workload is built (bf16,
the lm suite's dtype) and prepared as tracekit's runner does (:mod:`tracekit.capture.stages`), called once
(compile) and 5 times (warm-up); then ROUNDS rounds each take, one after the other:

* ``events_ms`` and ``wall_ms``: 20 calls timed by CUDA events, interleaved with blocks of the
  synchronised wall clock, as the runner times them (:func:`tracekit.capture.timers.interleaved`);
* ``enqueue_ms``: the host time of 20 back-to-back calls (perf_counter around each call, no sync);
* ``synced_ms``: 20 calls each followed by a synchronize, perf_counter around call and sync;
* ``loadavg_1m`` and the number of threads of this process (from /proc).

As in the runner, the backend is prepared and called inside :class:`tracekit.capture.provenance.ProvenanceRecorder`
(Inductor's provenance tracking on); RECORDER=0 in the environment leaves it out.

Written for issue 21's lm-large-512 forward, compiled: 14.85 ms by CUDA events, 8.11 ms by the
wall clock. GPU only; each round's medians (ms) are appended to OUT.jsonl as they come, one JSON
object a line, and printed. The H100's rounds are in reports/h100/lm/timer-probe/probe.jsonl: taken
from the printed rounds of this script's first version, which wrote its file only at the end and was
stopped by its time limit before the last cell asked (lm-xl-512). Those rounds took ``events_ms``
(:func:`tracekit.capture.timers.time_calls`) and then ``wall_ms`` (``Timer.blocked_autorange`` over 0.5 s) one
after the other, as the runner did before issue 30; ``enqueue_ms`` and ``synced_ms`` are measured as then.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import nullcontext

import numpy as np
import torch

from tracekit.backends import Prepared
from tracekit.capture import timers
from tracekit.capture.phases import make_step
from tracekit.capture.provenance import ProvenanceRecorder
from tracekit.capture.resolved import resolve
from tracekit.capture.stages import stop_compile_workers
from tracekit.manifest.spec import RunSpec

ROUNDS, CALLS = 4, 20


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def probe(out: str, model: str, phase: str, mode: str) -> None:
    """Rounds of the four timings of one cell (medians in ms), after compile and warm-up, appended to ``out``."""
    run = resolve(RunSpec(model=model, phase=phase, mode=mode, dtype="bf16", device="cuda"), "cuda")
    spec, backend = run.spec, run.backend
    module, inputs = run.build()
    recorder = ProvenanceRecorder(backend) if os.environ.get("RECORDER", "1") == "1" else nullcontext()
    cell = {"model": spec.model, "seq": spec.seq, "phase": spec.phase, "mode": spec.mode,
            "recorder": not isinstance(recorder, nullcontext), "torch": torch.__version__,
            "device": torch.cuda.get_device_name()}
    with recorder:
        _rounds(out, cell, module, inputs, backend, spec)


def _rounds(out: str, cell: dict, module, inputs, backend, spec) -> None:
    prepared = backend.prepare(module, inputs, spec)
    fn = prepared.fn if isinstance(prepared, Prepared) else prepared
    step = make_step(fn, module, spec.phase)
    for _ in range(6):
        step(inputs)
    torch.cuda.synchronize()
    stop_compile_workers()
    for n in range(ROUNDS):
        events, wall, _ = timers.interleaved(lambda: step(inputs), CALLS, "cuda")
        enqueue = []
        for _ in range(CALLS):
            t0 = time.perf_counter()
            step(inputs)
            enqueue.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
        synced = []
        for _ in range(CALLS):
            t0 = time.perf_counter()
            step(inputs)
            torch.cuda.synchronize()
            synced.append((time.perf_counter() - t0) * 1e3)
        row = cell | {"round": n, "events_ms": events["median"], "enqueue_ms": float(np.median(enqueue)),
                      "synced_ms": float(np.median(synced)), "wall_ms": wall["median"],
                      "wall_blocks": wall["n"], "wall_calls_per_block": wall["calls_per_block"],
                      "loadavg_1m": os.getloadavg()[0], "threads": _threads()}
        with open(out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


def main(argv: list[str]) -> None:
    out, cells = argv[0], argv[1:]
    for i in range(0, len(cells), 3):
        probe(out, *cells[i:i + 3])


if __name__ == "__main__":
    main(sys.argv[1:])

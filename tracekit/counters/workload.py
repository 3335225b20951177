"""The workload ncu runs: the capture's stages up to the warm-up outside NVTX, then the measured
iterations inside (a :class:`~tracekit.capture.child.ChildJob` of task "counters").

Build, prepare, first call (compilation in compiled modes) and ``spec.warmup`` more calls run
as in a traced run (:mod:`tracekit.capture.stages`), outside any NVTX range; then each of the
``spec.profile_iters`` measured iterations runs inside an NVTX push/pop range named
:data:`tracekit.counters.ncu.RANGE` (on CUDA), the range ncu's ``--nvtx-include`` selects.
The run's manifest (spec, device, stages, status) is written as ``workload.json`` in the job's
folder, for the report's peak table.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from tracekit import backends
from tracekit.capture import stages
from tracekit.capture.child import ChildJob
from tracekit.capture.lifecycle import Lifecycle, new_manifest, stderr_log, torch_threads
from tracekit.capture.resolved import resolve
from tracekit.counters.ncu import RANGE, WORKLOAD_FILE
from tracekit.manifest import Manifest, Profile
from tracekit.manifest.spec import validate


def measured_iterations(w: stages.Workload, iterations: int) -> None:
    """``iterations`` calls of the prepared step, each inside an NVTX range :data:`RANGE` on CUDA."""
    cuda = w.device.startswith("cuda")
    for _ in range(iterations):
        if cuda:
            torch.cuda.nvtx.range_push(RANGE)
        w.step(w.inputs)
        if cuda:
            torch.cuda.nvtx.range_pop()
    stages.sync(w.device)


def run(job: ChildJob) -> Manifest:
    """Run ``job.spec``'s workload as a traced run does (same backend, same phase step): build,
    prepare, first call, warm-up, then ``spec.profile_iters`` measured iterations
    (:func:`measured_iterations`); write its manifest to ``job.out``/workload.json and return it.
    A failure is its status and reason there (:func:`tracekit.capture.lifecycle.failure`), and
    one line on stderr.

    Raises:
        models.UnknownModel, backends.UnknownMode, ValueError: invalid spec (nothing written).
    """
    validate(job.spec)
    resolved = resolve(job.spec)
    backends.get(job.spec.mode)   # an unknown mode is an invalid spec, not a failed run
    folder = Path(job.out)
    life = Lifecycle(new_manifest(resolved.spec, resolved.label, resolved.family.source), None, stderr_log,
                     where=str(folder))
    with life, torch_threads(resolved.spec.threads):
        if reason := resolved.unavailable():
            raise RuntimeError(f"mode {resolved.spec.mode} unavailable: {reason}")
        life.stage("build")
        w = stages.build(resolved)
        life.manifest.build_s = w.build_s
        stages.prepare(w, resolved, life)
        stages.first_call(w, resolved, life)
        stages.warm_up(w, resolved, life)
        life.stage(f"measured iterations ({resolved.spec.profile_iters}, in NVTX ranges {RANGE})")
        measured_iterations(w, resolved.spec.profile_iters)
        life.manifest.profile = Profile(iterations=resolved.spec.profile_iters, traces=[])
        life.end("ok")
    folder.mkdir(parents=True, exist_ok=True)
    life.manifest.write(folder, WORKLOAD_FILE)
    if life.manifest.status != "ok":
        print(f"tracekit.counters.workload: {life.manifest.reason}", file=sys.stderr, flush=True)
    return life.manifest

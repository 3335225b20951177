"""Run one workload on one backend mode: ``tracekit trace``, :func:`tracekit.profile`, a bench
cell. The spec is resolved once (:mod:`tracekit.capture.resolved`) and goes through the
capture's stages (:mod:`tracekit.capture.stages`) inside one :class:`~tracekit.capture.lifecycle.Lifecycle`.

Layout written (the one TensorBoard's profiler plugin reads: one run per folder)::

    <out>/<label>/<mode>/<worker>.<timestamp_ns>.pt.trace.json.gz
    <out>/<label>/<mode>/run.json

Failures are data: an out-of-memory, a compile error or an unavailable
backend still writes run.json, with ``status`` and ``reason``.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from tracekit.capture import ranks, repeats, stages
from tracekit.capture.lifecycle import Lifecycle, Log, new_manifest, scratch, stderr_log, torch_threads
from tracekit.capture.provenance import ProvenanceRecorder
from tracekit.capture.resolved import resolve
from tracekit.manifest import Manifest
from tracekit.manifest.spec import RunSpec, validate
from tracekit.models.workload_files import WorkloadError


def run(spec: RunSpec, out: Path | str = "traces", log: Log = stderr_log) -> Manifest:
    """Run ``spec``, write its trace and run.json under ``out``; return the :class:`~tracekit.manifest.Manifest`.

    Stages: build the model (before anything is written) and the eager reference
    output; prepare the backend; first call (``compile_s``: compilation happens
    here for compiled modes); ``warmup`` more calls; ``iters`` timed calls
    (``latency_ms``) interleaved with blocks of the synchronised wall clock per call
    (``wall_ms``, ``interleaving``, ``timer_agreement``: :mod:`tracekit.capture.timers`); output ``max_abs_diff``
    against eager; then ``profile_iters`` iterations under torch.profiler, one
    ``ProfilerStep#N`` marker each, after one profiler warm-up step.
    ``host_load`` is read at the start and the end; ``spec.threads`` sets
    torch's thread count first (``environment.cpu_threads`` records the count
    used). A spec with ``repeats`` > 1 is run in that many processes
    (:func:`tracekit.capture.repeats.run`).

    Raises:
        models.UnknownModel, backends.UnknownMode: invalid names (nothing written).
        tracekit.models.workload_files.WorkloadError: a workload file that cannot be
            imported, has no such function, or whose function raises or returns
            something else than (nn.Module, tuple of tensors) (nothing written).
        ValueError: invalid dtype, phase, device, batch, seq, iteration, thread or
            process counts (:func:`tracekit.manifest.spec.validate`; nothing written).
    With ``spec.nproc > 1`` the ranks build the model (:mod:`tracekit.capture.ranks`): a
    workload function that raises there fails the run (run.json says why).
    A mode or workload that cannot run here (not installed, needs CUDA, phase not
    supported, ``models.Unavailable``) is recorded as status "skipped" with the
    reason; any other failure as "oom" or "failed"; either way run.json is
    written and returned. Ctrl-C (KeyboardInterrupt) once the run folder exists
    is recorded as status "interrupted" with the stage it stopped in, and raised
    as :class:`tracekit.errors.Interrupted` (a KeyboardInterrupt); the run's
    temporary files are removed either way.
    """
    validate(spec)
    resolved = resolve(spec)
    backend = resolved.backend
    if spec.repeats > 1:
        return repeats.run(resolved, out, log)
    if resolved.device_type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda requested but torch sees no GPU (is this the CPU build of torch?)")
    directory = resolved.directory(out)
    with torch_threads(spec.threads):
        reason = resolved.unavailable()
        life = Lifecycle(new_manifest(resolved.spec, resolved.label, resolved.family.source,
                                      backend.note(resolved.device_type)), directory, log)
        workload, failure, t0 = None, None, time.perf_counter()
        # Built before the folder exists (and before any output): a bad workload file writes nothing.
        # The ranks of a distributed run build their own (resolve checked a workload file's import).
        if not reason and spec.nproc == 1:
            try:
                workload = stages.build(resolved)
            except WorkloadError:
                raise
            except Exception as exc:  # noqa: BLE001 - recorded below as the run's status
                failure = exc
        build_s = time.perf_counter() - t0
        life.start()
        if reason:
            life.end("skipped", reason)
            life.write()
            life.log(f"unavailable: {reason}")
            return life.manifest
        with life:
            life.stage("build", f"build ({build_s:.1f} s)")
            life.manifest.build_s = build_s
            if failure is not None:
                raise failure
            with scratch() as cache:
                life.manifest.compile_cache = cache
                if spec.nproc > 1:  # the ranks build and measure, each in its process; this one launches and gathers
                    ranks.launch(resolved, directory, life)
                else:
                    with ProvenanceRecorder(backend) as recorder:
                        stages.measure(resolved, life, workload, directory, recorder)
                    life.manifest.attribution = recorder.result()
            life.end("ok")
    return life.manifest

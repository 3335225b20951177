"""The workload ncu runs (a :class:`~tracekit.capture.child.ChildJob` of task "counters"): the one
capture (:class:`~tracekit.capture.capture_run.Capture`) with its measured window in NVTX ranges.

Build, reference output, prepare, first call (compilation in compiled modes) and ``spec.warmup``
more calls run as in a traced run, outside any NVTX range; then each of the ``spec.profile_iters``
measured iterations runs inside an NVTX push/pop range named :data:`tracekit.counters.ncu.RANGE`
(on CUDA), the range ncu's ``--nvtx-include`` selects (no timing, no trace). The run's manifest
(spec, device, stages, status) is written as ``workload.json`` in the job's folder, for the
report's peak table.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tracekit.capture.capture_run import Capture
from tracekit.capture.child import ChildJob
from tracekit.capture.resolved import resolve
from tracekit.counters.ncu import RANGE, WORKLOAD_FILE
from tracekit.manifest import Manifest
from tracekit.manifest.spec import validate


def run(job: ChildJob) -> Manifest:
    """Run ``job.spec``'s workload as a traced run does (same backend, same phase step), its
    measured window ``spec.profile_iters`` iterations in NVTX ranges; write its manifest to
    ``job.out``/workload.json and return it. A failure is its status and reason there
    (:func:`tracekit.capture.capture_run.failure`), and one line on stderr.

    Raises:
        models.UnknownModel, backends.UnknownMode, ValueError: invalid spec (nothing written).
    """
    validate(job.spec)
    folder = Path(job.out)
    manifest = Capture.of(resolve(job.spec), folder, filename=WORKLOAD_FILE, nvtx_range=RANGE).run()
    if manifest.status != "ok":
        print(f"tracekit.counters.workload: {manifest.reason}", file=sys.stderr, flush=True)
    return manifest

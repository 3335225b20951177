"""Capture: one run's lifecycle, whichever front end starts it.

A :class:`~tracekit.manifest.spec.RunSpec` is resolved once (:mod:`~tracekit.capture.resolved`: its
model's family, its defaults, its folder) and goes through one sequence of stages
(:mod:`~tracekit.capture.stages`): build -> reference output -> prepare -> first call ->
warm-up -> timing -> profiled window, inside a :class:`~tracekit.capture.lifecycle.Lifecycle`
that writes the manifest and turns a failure into a status. Its front ends:

* :func:`tracekit.capture.runner.run` (``tracekit trace``, :func:`tracekit.profile`, a bench cell);
* :mod:`tracekit.capture.repeats` (``--repeats``: the run in N processes) and
  :mod:`tracekit.capture.ranks` (``--nproc``: a rank per process);
* :mod:`tracekit.capture.loop` (``tracekit.record``: the user's loop makes the calls);
* :mod:`tracekit.counters.workload` (the process ncu profiles).

A process tracekit starts gets its work as one serialized :class:`~tracekit.capture.child.ChildJob`
(``python -m tracekit.capture '<json>'``). Torch's profiler is set up in one place
(:mod:`~tracekit.capture.profiling`); what attribution needs is recorded beside the trace
(:mod:`~tracekit.capture.provenance`, :mod:`~tracekit.capture.module_scopes`).
"""

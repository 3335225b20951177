"""Capture: one run's stages in one order, whichever front end starts it.

A :class:`~tracekit.manifest.spec.RunSpec` is resolved once (:mod:`~tracekit.capture.resolved`: its
model's family, its defaults, its folder) and goes through the one capture
(:class:`~tracekit.capture.capture_run.Capture`, like pyinstrument's one ``Profiler``): build ->
reference output -> prepare -> first call -> warm-up -> timing -> profiled window -> manifest, the
order written once (:meth:`~tracekit.capture.capture_run.Capture.sequence`; the stages' bodies in
:mod:`~tracekit.capture.stages`), the manifest owned by the capture as it goes (a failure as a
status, Ctrl-C as "interrupted"). Its front ends supply only what differs (who calls the step,
rank and world size, where it writes, the measured window):

* :func:`tracekit.capture.runner.run`, the front door (``tracekit trace``, :func:`tracekit.profile`,
  a bench cell): validates, resolves, and makes the run here, in N processes or on N ranks;
* :mod:`tracekit.capture.repeats` (``--repeats``: the capture in N processes) and
  :mod:`tracekit.capture.ranks` (``--nproc``: the capture on each rank, started and gathered by
  :mod:`tracekit.capture.launcher`);
* :mod:`tracekit.capture.loop` (``tracekit.record``: the user's loop makes the calls);
* :mod:`tracekit.counters.workload` (the process ncu profiles: NVTX-ranged iterations).

Every way in fills the same manifest but for the fields
:data:`~tracekit.capture.capture_run.DIFFERENCES` lists. A process tracekit starts gets its work
as one serialized :class:`~tracekit.capture.child.ChildJob` (``python -m tracekit.capture
'<json>'``). Torch's profiler is set up in one place (:mod:`~tracekit.capture.profiling`); timing
in one (:mod:`~tracekit.capture.timers`); what attribution needs is recorded beside the trace
(:mod:`~tracekit.capture.provenance`, :mod:`~tracekit.capture.module_scopes`).
"""

"""The reasons a critical path and a prediction give, each a dict: ``code`` (one of the names below)
and the figures it is said with (:mod:`tracekit.report.path_text` words them).

Why there is no critical path (:func:`tracekit.analysis.critical_path.can_analyze`,
``cannot_retime_launches``; ``CannotAnalyze.reason``), and a trace's or a job's note that says so:

* ``NO_GPU``, ``NO_LAUNCH_CALLS``; ``BLIND_RANKS`` (``ranks``: a job's ranks with GPU ops and no
  launch call); ``ONE_LAUNCH`` (``launches``: fewer than two);
  ``NO_ANNOTATION`` (``annotation``: no CPU op or annotation of the trace is named so);
  ``FEW_RANKS`` (``ranks``: the ranked traces of a job that could be read);
* ``NO_PATH`` and ``NO_JOB_PATH`` (``why``: one of those, or an exception's message).

What limits a path or a prediction (``CriticalPath.problems``, the notes of
:class:`~tracekit.analysis.critical_path.prediction.Prediction`): ``UNCALIBRATED`` (the profiled
window as traced), ``NO_MARKERS`` (the whole trace one iteration), ``SKIPPED_EDGES`` (``edges``
left out), ``KEPT_MODEL`` (``longer_ms``: a removal re-timed longer, the model before kept),
``REPLAY_COSTS`` (the replay costs ``cuda-graphs`` used:
:meth:`~tracekit.analysis.critical_path.replay_costs.Replay.to_dict`'s device, measured, measured_on
and costs), ``CAPTURE_READS`` (a ``cuda-graphs`` prediction of low confidence: the eager iteration
reads the device on the host, ``reads`` an iteration, ``ops``, ``where``, ``attention``:
:func:`tracekit.analysis.critical_path.capture_risk.capture_risks`), ``CAPTURE_MASK`` (the same, a
Hugging Face transformers model's fused SDPA calls, ``attention`` an iteration, which its capture
moves off them), ``CAPTURE_PATH`` (the same, the run's own check: its step ran other aten ops, or
failed, while told a CUDA graph captured it; ``added`` and ``removed``, op -> calls, their totals
``calls_added`` and ``calls_removed``, and ``error``:
:mod:`tracekit.capture.capture_path`), ``CAPTURE_KERNELS`` (a prediction with the capture path's
kernels: ``trace``, ``delta_ms`` it added, the ``cuda-graphs`` edit's ``eager_ms`` and ``captured_ms`` on
each trace as traced; or ``problem``: :mod:`tracekit.analysis.critical_path.capture_kernels`).

What a trace lacks for a complete graph (``Graph.missing``; ``rank`` added on a job's graph):
``INFERRED_WAITS`` (``waits`` inferred without cuda_sync events, or without the ``unnamed`` wait
events' records, ``after_collective`` of them),
``GUESSED_SYNCS`` (``syncs`` without their cuda_sync event), ``LAUNCHLESS_OPS`` (``ops`` of
``of`` GPU ops without a launch call), ``NO_COLLECTIVES`` (a job's ranks not joined).

What limited a calibration (``Calibration.note``: :mod:`tracekit.analysis.critical_path.calibrate`),
``measured_ms`` and ``modelled_ms`` where it has them: ``NO_LATENCY``; a run's ``HOST_STRETCHED``
(``host_scale`` below ``least_usual``: the profiler slowed its host more than usual), ``LATENCY_ABOVE``
(at ``host_scale``, the most), ``GPU_BEYOND`` (even at ``gpu_scale``, the least) and ``GPU_BOUND``
(``gpu_faster``: the GPU ops' share faster unprofiled), both with the host's ``host_scale``,
``host_source`` (``measured``, ``estimated`` or ``none``: the least allowed) and ``host_ms`` (the
unprofiled time per call it came from, measured or estimated; None for none), an estimate's
``traced_ms``, ``events`` and ``per_event_us`` (:mod:`~tracekit.analysis.critical_path.host_estimate`),
and ``host_lowered_from`` where the host's factor was lowered to meet the latency; a job's
``STEP_ABOVE``, ``HOST_BOUND`` (``factor`` beyond each rank's own; None: one factor fitted),
``HOSTS_UNKNOWN`` (a GPU-bound step), each with ``lacking`` (the ranks without a host time),
``JOB_BEYOND`` (``least_ms`` at ``gpu_scale``) and ``GPU_BOUND_JOB`` (``gpu_faster``, None where
the GPU kept its time; ``short``: the model's share shorter than the step, None within the fit).
"""

NO_GPU, NO_LAUNCH_CALLS, ONE_LAUNCH = "no GPU ops", "no launch calls", "one launch"
BLIND_RANKS = "ranks without launch calls"
NO_ANNOTATION, FEW_RANKS = "no annotation", "few ranks"
NO_PATH, NO_JOB_PATH = "no critical path", "no critical path of the job"
UNCALIBRATED, NO_MARKERS, SKIPPED_EDGES, KEPT_MODEL = "uncalibrated", "no markers", "skipped edges", "kept model"
REPLAY_COSTS, CAPTURE_READS, CAPTURE_MASK = "replay costs", "capture reads", "capture mask"
CAPTURE_PATH, CAPTURE_KERNELS = "capture path", "capture kernels"
INFERRED_WAITS, GUESSED_SYNCS = "inferred waits", "guessed syncs"
LAUNCHLESS_OPS, NO_COLLECTIVES = "launchless ops", "no collectives"
NO_LATENCY, LATENCY_ABOVE, GPU_BEYOND, GPU_BOUND = "no latency", "latency above", "GPU beyond", "GPU-bound"
HOST_STRETCHED = "host stretched"
STEP_ABOVE, HOST_BOUND, HOSTS_UNKNOWN = "step above", "host-bound", "hosts unknown"
JOB_BEYOND, GPU_BOUND_JOB = "job beyond", "GPU-bound job"

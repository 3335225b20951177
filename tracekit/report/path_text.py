"""The words of the critical path's reasons (:mod:`tracekit.analysis.critical_path.reasons`): why
there is no path or no prediction, what limited a calibration, what a trace lacks for a complete
graph; a run's ``critical_path_note`` and a job's ``cp_note`` ("; "-joined), a prediction's notes,
missing and cannot_predict. :func:`tracekit.report.worded.worded` puts them in the tables and the
prediction."""

from __future__ import annotations

from tracekit.analysis.critical_path import AnnotationError
from tracekit.analysis.critical_path import reasons as why


def _lacking(r: dict) -> str:
    """What a job's calibration says first where ranks lack their host time ("" where none does)."""
    if not r.get("lacking"):
        return ""
    return (f"no unprofiled host time per call for rank {', '.join(map(str, r['lacking']))} (run.json "
            "distributed.ranks[i].host_ms): the ranks keep their traced relative host speeds; ")


def _host(r: dict) -> str:
    """Where a GPU-bound run's host factor came from (measured, estimated from the trace, or the least
    allowed), and that it was lowered where the GPU's own time left it less."""
    source = r.get("host_source", "measured" if r["host_ms"] is not None else "none")
    lowered = r.get("host_lowered_from")
    scale = f"host time x{lowered if lowered is not None else r['host_scale']:.2f}"
    if source == "measured":
        text = f"{scale} from the unprofiled host time per call ({r['host_ms']:.3f} ms)"
    elif source == "estimated":
        text = (f"{scale} estimated from the trace, no host_ms in run.json: the traced iteration "
                f"({r['traced_ms']:.3f} ms) less the profiler's {r['per_event_us']:.1f} µs for each of its "
                f"{r['events']:.0f} recorded ops and runtime calls ({r['host_ms']:.3f} ms)")
    else:
        text = f"{scale}, the least allowed: no host_ms in run.json, and a GPU-bound latency says nothing of the host"
    if lowered is not None:
        text += (f"; lowered to x{r['host_scale']:.2f}, where the GPU's own time leaves the host no more (no kernel "
                 "is shrunk to make room for host time)")
    return text


def _gpu_bound_job(r: dict) -> str:
    """A GPU-bound job's calibration: its GPU ops' time fitted, or the model short of the step."""
    faster = f"GPU ops {r['gpu_faster']:.0%} faster unprofiled than traced; " if r["gpu_faster"] is not None else ""
    short = (f"; the model is {r['short']:.0%} shorter than the step: waits the trace does not show"
             if r["short"] is not None else "")
    return f"GPU-bound: {faster}each rank's host time from its own unprofiled host time per call{short}"


def _replay(r: dict) -> str:
    """The replay costs a ``cuda-graphs`` prediction used, and where they were measured."""
    costs = (f"{r['graph_launch_us']:.1f} µs + {r['per_kernel_us']:.2f} µs a kernel of host time per replay, "
             f"{r['replay_gap_us']:.2f} µs between replayed kernels")
    on = ", ".join(r["measured_on"])
    if r["measured"]:
        return f"replay costs of the {r['device']}, measured on it (benchmarks/replay_probe.py): {costs}"
    return (f"replay costs not measured on the {r['device'] or 'unknown GPU'}: the largest known ({on}): {costs}; "
            "benchmarks/replay_probe.py on this GPU measures its own")


def _capture(r: dict) -> str:
    """Why a ``cuda-graphs`` prediction is of low confidence: its eager iteration reads the device."""
    ops = ", ".join(f"{k} {v:g}" for k, v in r["ops"].items())
    where = f", in {', '.join(w for w in r['where'] if w)}" if any(r["where"]) else ""
    attention = (f"; its attention runs SDPA's fused kernels ({r['attention']:g} calls an iteration), which a mask "
                 "built under capture moves to the memory-efficient or unfused math kernels (Hugging Face "
                 "transformers builds one there)" if r["attention"] else "")
    return (f"low confidence: the eager iteration reads GPU values on the host {r['reads']:g} times ({ops}{where}); "
            "a CUDA graph cannot, so the captured program takes another path (a capturable optimizer step, an "
            f"attention mask built without reading it) and may run other kernels than the eager ones predicted"
            f"{attention}")


def _capture_mask(r: dict) -> str:
    """Why a ``cuda-graphs`` prediction of a transformers model is of low confidence."""
    return (f"low confidence: its attention runs SDPA's fused kernels ({r['attention']:g} calls an iteration) in a "
            "Hugging Face transformers model, which builds its attention mask under capture (transformers 5.17: "
            "even where eager neither passes nor reads one) and so may run the memory-efficient or unfused math "
            "kernels replayed (on an H200: bert +74% GPU busy replayed, electra +19%), not the eager ones predicted")


def _capture_path(r: dict) -> str:
    """Why a ``cuda-graphs`` prediction is of low confidence: the run's step took another path when told it
    was being captured (:mod:`tracekit.capture.capture_path`)."""
    if r.get("error"):
        return (f"low confidence: told a CUDA graph captured it (torch.cuda.is_current_stream_capturing() true), the "
                f"step failed ({r['error']}): the captured program is another one than the eager one predicted")
    ops = lambda d: ", ".join(f"{k} {v:g}" for k, v in d.items()) or "none"  # noqa: E731
    return (f"low confidence: told a CUDA graph captured it (torch.cuda.is_current_stream_capturing() true), the "
            f"step ran other ops: {r['calls_added']:g} calls more ({ops(r['added'])}), {r['calls_removed']:g} fewer "
            f"({ops(r['removed'])}); the replay runs their kernels, not only the eager ones predicted")


def _capture_kernels(r: dict) -> str:
    """A prediction with the kernels of the run's capture path (or why not)."""
    if r.get("problem"):
        return f"the capture path's trace ({r['trace']}) not used: {r['problem']}"
    return (f"with the kernels of the step's capture path ({r['trace']}: its steps run eagerly, told a CUDA graph "
            f"captures them, and profiled; replayed {r['captured_ms']:.3f} ms against eager's kernels "
            f"{r['eager_ms']:.3f} ms, as traced): {r['delta_ms']:+.3f} ms")


TEXTS = {
    why.NO_GPU: lambda r: "no GPU ops in the trace: there is no host-GPU critical path to find",
    why.NO_LAUNCH_CALLS: lambda r: "no launch calls (CUDA runtime or driver events) in the trace: the host side of "
                                   "the path is unknown",
    why.BLIND_RANKS: lambda r: (f"no launch calls (CUDA runtime or driver events) in the trace of rank"
                                f"{'' if len(r['ranks']) == 1 else 's'} {', '.join(map(str, r['ranks']))}, which "
                                f"{'has' if len(r['ranks']) == 1 else 'have'} GPU ops: the host side of "
                                f"{'its' if len(r['ranks']) == 1 else 'their'} path is unknown"),
    why.ONE_LAUNCH: lambda r: f"{r['launches']} launch in the trace: no launch overhead to remove or re-time",
    why.NO_ANNOTATION: lambda r: str(AnnotationError(r["annotation"])),
    why.FEW_RANKS: lambda r: f"{r['ranks']} ranked traces readable: a job's critical path needs two or more",
    why.NO_PATH: lambda r: f"no critical path: {path_note(r['why'])}",
    why.NO_JOB_PATH: lambda r: f"no critical path of the job: {path_note(r['why'])}",
    why.UNCALIBRATED: lambda r: "uncalibrated: the profiled window as traced (no unprofiled latency)",
    why.NO_MARKERS: lambda r: "no ProfilerStep markers: the whole trace is taken as one iteration",
    why.SKIPPED_EDGES: lambda r: f"{r['edges']} edges met a source not yet timed (clock skew, a guessed sync): "
                                 "left out",
    why.KEPT_MODEL: lambda r: f"re-timed, the iterations came out {r['longer_ms']:.4f} ms longer than before, which "
                              "an edit that only takes work away cannot make: the model before is kept",
    why.INFERRED_WAITS: lambda r: (f"{r['unnamed']} cross-stream waits whose event record the trace does not name"
                                   if r.get("unnamed") else "no cuda_sync events (the profiler's "
                                   "enable_cuda_sync_events)") + f": {r['waits']} cross-stream waits inferred from "
                                  "ops that started when an op of another stream ended "
                                  f"({r['after_collective']} of them after a collective)",
    why.GUESSED_SYNCS: lambda r: f"{r['syncs']} stream or event syncs without their cuda_sync event: taken to wait "
                                 "for every stream",
    why.LAUNCHLESS_OPS: lambda r: f"{r['ops']} of {r['of']} GPU ops have no launch call in the trace (launched "
                                  "before the profiler started, or not recorded): they keep their observed start",
    why.NO_COLLECTIVES: lambda r: "no collective kernels (gloo runs collectives on the host): the ranks are not "
                                  "joined at their collectives, and a rank's wait in one is its host's time",
    why.REPLAY_COSTS: _replay,
    why.CAPTURE_READS: _capture,
    why.CAPTURE_MASK: _capture_mask,
    why.CAPTURE_PATH: _capture_path,
    why.CAPTURE_KERNELS: _capture_kernels,
    why.NO_LATENCY: lambda r: "no unprofiled latency (run.json): modelled as traced, uncalibrated",
    why.LATENCY_ABOVE: lambda r: f"the unprofiled latency ({r['measured_ms']:.3f} ms) is above the traced iteration "
                                 f"with {r['host_scale']}x its host time ({r['modelled_ms']:.3f} ms): an unreliable "
                                 "unprofiled timing?",
    why.GPU_BEYOND: lambda r: f"even at {r['gpu_scale']}x its GPU time the traced iteration ({r['modelled_ms']:.3f} "
                              f"ms) is longer than the unprofiled latency ({r['measured_ms']:.3f} ms); {_host(r)}",
    why.HOST_STRETCHED: lambda r: f"host-bound: the profiler slowed the host more than {1 / r['least_usual']:.0f}x: "
                                  f"host time x{r['host_scale']:.3f}, the GPU ops as traced",
    why.GPU_BOUND: lambda r: f"GPU-bound: GPU ops {r['gpu_faster']:.0%} faster unprofiled than traced; {_host(r)}",
    why.STEP_ABOVE: lambda r: _lacking(r) + f"the unprofiled step ({r['measured_ms']:.3f} ms) is above the model "
                                            f"with every host at its most ({r['modelled_ms']:.3f} ms): an unreliable "
                                            "unprofiled timing?",
    why.HOST_BOUND: lambda r: _lacking(r) + (
        f"host-bound: each rank's host time x{r['factor']:.2f} beyond its own measured factor"
        if r["factor"] is not None else "host-bound: one host factor fitted to the step"),
    why.HOSTS_UNKNOWN: lambda r: _lacking(r) + "a GPU-bound step says nothing of the hosts: modelled as traced, an "
                                               "uncalibrated bound",
    why.JOB_BEYOND: lambda r: f"not calibrated: with each rank's host from its unprofiled host time, the model "
                              f"({r['modelled_ms']:.3f} ms) is longer than the step ({r['measured_ms']:.3f} ms) even "
                              f"with GPU ops at {r['gpu_scale']}x ({r['least_ms']:.3f} ms): the rest is host time or "
                              "waiting the fit cannot scale, and no kernel is shrunk for it; an uncalibrated bound",
    why.GPU_BOUND_JOB: _gpu_bound_job,
}


def path_note(reason: dict | str) -> str:
    """One reason in words (``rank N: `` first for a rank's, on a job); an exception's message (a
    job whose path raised) as it is."""
    if isinstance(reason, str):
        return reason
    text = TEXTS[reason["code"]](reason)
    return f"rank {reason['rank']}: {text}" if "rank" in reason else text


def path_notes(reasons) -> str:
    """A tuple of reasons (a ``critical_path_note``, a ``cp_note``) in words, "; "-joined; a value
    that is no tuple (NaN: no such figure) as it is."""
    return "; ".join(map(path_note, reasons)) if isinstance(reasons, tuple) else reasons

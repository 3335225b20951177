"""What a run's ``run.json`` (its :class:`~tracekit.manifest.Manifest`) contributes to
each of its rows in :attr:`tracekit.analysis.runs.Analysis.runs`: what the run is, where
it ran, its status, its unprofiled timings and how far they can be trusted, for a
single-op run its achieved throughput against the device's peaks, and for a decode run
its tokens a step and per second, prompt, KV cache and prefill."""

from __future__ import annotations

import math

from tracekit.analysis.peaks import peaks
from tracekit.manifest import Decode, Environment, HostLoad, LoadReading, Manifest, Repeats, Timer
from tracekit.manifest.spec import RunSpec

# Manifest fields copied into each row, with units in the names.
_LATENCY_FIELDS = ("median", "mean", "p10", "p90", "std", "min")


def _spec_fields(spec: RunSpec | None) -> dict:
    """batch, seq and dtype of the spec (None each without one)."""
    return {k: getattr(spec, k) if spec else None for k in ("batch", "seq", "dtype")}


def _nan(value) -> float:
    return math.nan if value is None else value


def manifest_fields(manifest: Manifest | None) -> dict:
    """The row fields of a run from its manifest (``{"status": "trace only", "reason": ""}``
    for a trace without run.json): identity, device, status, latency_*_ms (median, mean,
    p10, p90, std, min), compile_s, peak_memory_MB, max_abs_diff, the timing checks and
    achieved TFLOP/s and GB/s; missing figures are NaN. The report words a busy host as the run's
    ``timing_warning`` in place of ``host_cpus_end`` (:func:`tracekit.report.worded.worded`)."""
    if manifest is None:
        return {"status": "trace only", "reason": ""}
    spec = manifest.spec
    row = {
        "model": manifest.model, "mode": manifest.mode, **_spec_fields(spec), "phase": manifest.phase,
        "op": manifest.op,
        # ranks and how they share the model: "ddp x2"; "" for one process
        "parallel": f"{spec.parallel} x{spec.nproc}" if spec and spec.nproc > 1 else "",
        "device_type": manifest.device_type, "requested_device": spec.device if spec else None,
        "device_name": manifest.ran_on_name,  # where the work ran
        # the spec's device (the machine's GPU)
        "requested_device_name": manifest.environment.device_name if manifest.environment else None,
        "status": manifest.status or "unknown",
        "reason": manifest.reason or "", "note": manifest.note or "",
        "compile_s": _nan(manifest.compile_s),
        "peak_memory_MB": _nan(manifest.peak_memory_MB),
        "max_abs_diff": _nan(manifest.max_abs_diff),
        "latency_timer": manifest.latency_ms.timer if manifest.latency_ms else None,
        **_timing_fields(manifest),
    }
    row.update({f"latency_{k}_ms": manifest.latency(k) for k in _LATENCY_FIELDS})
    row.update(_achieved(manifest, row["latency_median_ms"], row["device_name"]))
    row.update(_decode_fields(manifest.decode or Decode(), row["latency_median_ms"]))
    return row


def _decode_fields(decode: Decode, latency_ms: float) -> dict:
    """A decode run's (phase decode; NaN for others): tokens_per_step (a step makes one token of each
    sequence: the batch), tokens_per_s (tokens_per_step / the median latency per step x 1000, as
    :func:`tracekit.capture.timers.token_rates`), prompt_tokens, kv_cache_MB and prefill_ms. Its
    latency_*_ms are its ms per token (per decode step), and every figure per iteration is per token."""
    tokens = _nan(decode.tokens_per_step)
    return {"tokens_per_step": tokens, "tokens_per_s": tokens / latency_ms * 1e3 if latency_ms > 0 else math.nan,
            "prompt_tokens": _nan(decode.prompt_tokens), "kv_cache_MB": _nan(decode.kv_cache_MB),
            "prefill_ms": _nan(decode.prefill_ms)}


def _timing_fields(manifest: Manifest) -> dict:
    """How far the run's timing can be trusted (tracekit.capture.timers): the synchronised wall
    clock beside the latency (median, p10 and p90 over its blocks, calls a block), the host's
    load at the start and the end (1-minute load average, and the CPUs at each: a busy host,
    :func:`tracekit.analysis.comparison.trust.busy_host`), the threads, the processes it was made
    in. Why the two timers are apart needs the trace too:
    :func:`tracekit.analysis.comparison.trust.timer_gap`."""
    load, repeats = manifest.host_load or HostLoad(), manifest.repeats or Repeats()
    wall_ms, environment = manifest.wall_ms or Timer(), manifest.environment or Environment()
    start, end = load.start or LoadReading(), load.end or LoadReading()
    wall = _nan(wall_ms.median)
    return {
        "wall_median_ms": wall,
        **{f"wall_{k}_ms": _nan(getattr(wall_ms, k)) for k in ("p10", "p90")},
        "wall_calls_per_block": _nan(wall_ms.calls_per_block),
        "timer_agreement": wall / latency - 1 if (latency := manifest.latency("median")) > 0 else math.nan,
        "host_load_start": _nan(start.loadavg_1m),
        "host_load_end": _nan(end.loadavg_1m),
        "host_cpus": _nan((start or end).cpus),
        "threads": _nan(environment.cpu_threads),
        "processes": 1 if repeats.n is None else repeats.n, "process_spread": _nan(repeats.spread),
        "host_cpus_end": _nan(end.cpus),
    }


def _achieved(manifest: Manifest, latency_ms: float, device_name: str | None) -> dict:
    """Achieved TFLOP/s and GB/s of a single-op run (its minimum work over its median
    latency), and their share of the device's datasheet peak (tracekit.analysis.peaks)."""
    flop, nbytes = manifest.flop_per_iter, manifest.bytes_per_iter
    if not flop or not latency_ms or latency_ms != latency_ms:
        return {}
    seconds = latency_ms / 1e3
    out = {"achieved_TFLOPs": flop / seconds / 1e12, "achieved_GBps": nbytes / seconds / 1e9}
    peak = peaks(device_name)
    if peak:
        bw, compute = peak
        dtype = manifest.spec.dtype if manifest.spec else "fp32"
        # fp32 matmuls may use TF32 tensor cores; the fp32 (CUDA-core) peak is the stricter yardstick
        out["pct_peak_compute"] = 100 * out["achieved_TFLOPs"] / compute.get(dtype, compute["fp32"])
        out["pct_peak_bw"] = 100 * out["achieved_GBps"] / bw
    return out

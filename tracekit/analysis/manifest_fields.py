"""What a run's ``run.json`` (its :class:`~tracekit.manifest.Manifest`) contributes to
each of its rows in :attr:`tracekit.analysis.runs.Analysis.runs`: what the run is, where
it ran, its status, its unprofiled timings and how far they can be trusted, and, for a
single-op run, its achieved throughput against the device's peaks."""

from __future__ import annotations

import math

from tracekit.manifest import Manifest
from tracekit.peaks import peaks
from tracekit.timing import host_problems

# Manifest fields copied into each row, with units in the names.
_LATENCY_FIELDS = ("median", "mean", "p10", "p90", "std", "min")


def _nan(value) -> float:
    return math.nan if value is None else value


def manifest_fields(manifest: Manifest | None) -> dict:
    """The row fields of a run from its manifest (``{"status": "trace only", "reason": ""}``
    for a trace without run.json): identity, device, status, latency_*_ms (median, mean,
    p10, p90, std, min), compile_s, peak_memory_MB, max_abs_diff, the timing checks and
    achieved TFLOP/s and GB/s; missing figures are NaN."""
    if manifest is None:
        return {"status": "trace only", "reason": ""}
    spec = manifest.spec
    row = {
        "model": manifest.model, "mode": manifest.mode, "batch": spec.get("batch"),
        "seq": spec.get("seq"), "dtype": spec.get("dtype"), "phase": manifest.phase, "op": manifest.op,
        # ranks and how they share the model: "ddp x2"; "" for one process
        "parallel": f"{spec.get('parallel', 'ddp')} x{spec['nproc']}" if spec.get("nproc", 1) > 1 else "",
        "device_type": manifest.device_type, "requested_device": spec.get("device"),
        "device_name": manifest.ran_on_name,  # where the work ran
        "requested_device_name": (manifest.environment or {}).get("device_name"),  # the spec's device (the machine's GPU)
        "status": manifest.status or "unknown",
        "reason": manifest.reason or "", "note": manifest.note or "",
        "compile_s": _nan(manifest.compile_s),
        "peak_memory_MB": _nan(manifest.peak_memory_MB),
        "max_abs_diff": _nan(manifest.max_abs_diff),
        "latency_timer": (manifest.latency_ms or {}).get("timer"),
        **_timing_fields(manifest),
    }
    row.update({f"latency_{k}_ms": manifest.latency(k) for k in _LATENCY_FIELDS})
    row.update(_achieved(manifest, row["latency_median_ms"], row["device_name"]))
    return row


def _timing_fields(manifest: Manifest) -> dict:
    """How far the run's timing can be trusted (tracekit.timing): the synchronised wall
    clock beside the latency (median, p10 and p90 over its blocks, calls a block), the host's
    load (timing_warning: a busy host), the threads, the processes it was made in. Why the
    two timers are apart needs the trace too: :func:`tracekit.analysis.comparison.trust.timer_gap`."""
    load = manifest.host_load or {}
    repeats = manifest.repeats or {}
    wall_ms = manifest.wall_ms or {}
    wall = wall_ms.get("median", math.nan)
    return {
        "wall_median_ms": wall,
        **{f"wall_{k}_ms": _nan(wall_ms.get(k)) for k in ("p10", "p90")},
        "wall_calls_per_block": _nan(wall_ms.get("calls_per_block")),
        "timer_agreement": wall / latency - 1 if (latency := manifest.latency("median")) > 0 else math.nan,
        "host_load_start": (load.get("start") or {}).get("loadavg_1m", math.nan),
        "host_load_end": (load.get("end") or {}).get("loadavg_1m", math.nan),
        "host_cpus": (load.get("start") or load.get("end") or {}).get("cpus", math.nan),
        "threads": (manifest.environment or {}).get("cpu_threads", math.nan),
        "processes": repeats.get("n", 1), "process_spread": repeats.get("spread", math.nan),
        "timing_warning": "; ".join(host_problems(load)),
    }


def _achieved(manifest: Manifest, latency_ms: float, device_name: str | None) -> dict:
    """Achieved TFLOP/s and GB/s of a single-op run (its minimum work over its median
    latency), and their share of the device's datasheet peak (tracekit.peaks)."""
    flop, nbytes = manifest.flop_per_iter, manifest.bytes_per_iter
    if not flop or not latency_ms or latency_ms != latency_ms:
        return {}
    seconds = latency_ms / 1e3
    out = {"achieved_TFLOPs": flop / seconds / 1e12, "achieved_GBps": nbytes / seconds / 1e9}
    peak = peaks(device_name)
    if peak:
        bw, compute = peak
        dtype = manifest.spec.get("dtype", "fp32")
        # fp32 matmuls may use TF32 tensor cores; the fp32 (CUDA-core) peak is the stricter yardstick
        out["pct_peak_compute"] = 100 * out["achieved_TFLOPs"] / compute.get(dtype, compute["fp32"])
        out["pct_peak_bw"] = 100 * out["achieved_GBps"] / bw
    return out

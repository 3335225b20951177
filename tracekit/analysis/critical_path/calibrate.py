"""Calibration: the profiled trace re-timed so that its iteration takes the unprofiled latency.

The profiler slows the host: every op and launch it records costs host time (the H100 ViT
study: eager iterations 18-78% longer profiled, README "What an H100 shows"), while the
GPU's kernels barely change. So the graph of a profiled window over-states how much the
host holds the GPU back. Before a what-if is trusted, the host's time (the CPU time
between calls and the calls themselves) is scaled by one factor, fitted per run so that
the modelled steady-state iteration (:func:`tracekit.analysis.critical_path.steady_latency_us`)
equals the unprofiled latency measured in the same run (run.json ``latency_ms`` median).

The factor is searched in [``HOST_SCALE_MIN``, ``HOST_SCALE_MAX``]: the profiler makes host
time up to four times longer, and an unprofiled run is not slower than a profiled one by
more than the timers' noise (a run whose unprofiled latency needs more is flagged, as
:mod:`tracekit.analysis.comparison.trust` flags an unreliable unprofiled timing). Where even the
shortest host time leaves the model slower than the measurement, the GPU ops ran longer
under the profiler than without it (CUPTI's per-kernel cost, seen on CUDA-graph replays in
the H100 study): their time is then scaled too, down to ``GPU_SCALE_MIN``.

A GPU-bound run's latency says nothing of its host: any host time short enough gives it.
There the host's factor comes from the host's own time per call measured unprofiled (run.json
``host_ms``: :func:`tracekit.capture.timers.host_times`) over the traced iteration marker's length,
where the run has it; else it is the smallest, ``HOST_SCALE_MIN``, and the note says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tracekit.analysis.critical_path.graph import Graph
from tracekit.analysis.critical_path.path import periods
from tracekit.analysis.critical_path.retime import retime, visit_order, weights

HOST_SCALE_MIN, HOST_SCALE_MAX = 0.25, 1.5
GPU_SCALE_MIN = 0.5
TOLERANCE = 0.002   # relative: the bisection stops within 0.2% of the measured latency
# GPU-bound: with the least host time, the model is within this of the measured latency (or over it)
GPU_BOUND_MARGIN = 0.02


@dataclass
class Calibration:
    """host_scale, gpu_scale: the factors on host and GPU time; traced_ms: the modelled
    iteration as traced (both 1); modelled_ms: with the factors; measured_ms: the unprofiled
    latency it was fitted to (NaN when unknown); calibrated: whether a measurement was there
    to fit; note: what limited the fit ("" when it met the measurement)."""

    host_scale: float
    gpu_scale: float
    traced_ms: float
    modelled_ms: float
    measured_ms: float
    calibrated: bool
    note: str = ""


def modelled_ms(g: Graph, step, markers: dict, host_scale: float, gpu_scale: float, order=None) -> float:
    """The steady-state iteration (ms) of ``g`` with host time times ``host_scale`` and GPU
    op time times ``gpu_scale``."""
    from tracekit.analysis.critical_path import steady_latency_us

    base, lag = weights(g, host_scale, gpu_scale)
    tm = retime(g, base, lag, order)
    return steady_latency_us(periods(g, tm, step, markers, host_scale)) / 1e3


def _bisect(f, lo: float, hi: float, target: float) -> float:
    """x in [lo, hi] with f(x) = target, f non-decreasing, to TOLERANCE."""
    for _ in range(40):
        mid = (lo + hi) / 2
        value = f(mid)
        if abs(value - target) <= TOLERANCE * target:
            return mid
        lo, hi = (mid, hi) if value < target else (lo, mid)
    return (lo + hi) / 2


def host_scale_of(markers: dict, host_ms: float | None) -> float | None:
    """The host's factor from its own unprofiled time per call (``host_ms``, ms) over the traced
    iterations' median marker length (the first and last left out when there are 3 or more: they
    hold the window's synchronizations), within the search bounds; None without either."""
    lengths = [m["end"].to_numpy(float) - m["ts"].to_numpy(float) for m in markers.values() if len(m)]
    lengths = [x[1:-1] if len(x) >= 3 else x for x in lengths]
    if not host_ms or not math.isfinite(host_ms) or not lengths:
        return None
    traced = float(np.median(np.concatenate(lengths))) / 1e3
    return min(max(host_ms / traced, HOST_SCALE_MIN), HOST_SCALE_MAX) if traced > 0 else None


def calibrate(g: Graph, step, markers: dict, measured_ms: float | None, host_ms: float | None = None) -> Calibration:
    """Fit the host (and where needed GPU) time factors so that the modelled iteration is
    ``measured_ms`` (the unprofiled median latency, ms; ``host_ms``: the host's own time per call,
    for a GPU-bound run). Without a measurement the graph is left as traced and
    :attr:`Calibration.calibrated` is False."""
    order = visit_order(g)

    def model(h: float, k: float = 1.0) -> float:
        return modelled_ms(g, step, markers, h, k, order)

    if measured_ms is None or not math.isfinite(measured_ms) or measured_ms <= 0:
        return Calibration(1.0, 1.0, math.nan, math.nan, math.nan, False,
                           "no unprofiled latency (run.json): modelled as traced, uncalibrated")
    traced = model(1.0)
    if not math.isfinite(traced):
        return Calibration(1.0, 1.0, traced, traced, math.nan, False,
                           "no unprofiled latency (run.json): modelled as traced, uncalibrated")
    if (high := model(HOST_SCALE_MAX)) < measured_ms:
        return Calibration(HOST_SCALE_MAX, 1.0, traced, high, measured_ms, True,
                           f"the unprofiled latency ({measured_ms:.3f} ms) is above the traced iteration with "
                           f"{HOST_SCALE_MAX}x its host time ({high:.3f} ms): an unreliable unprofiled timing?")
    if (low := model(HOST_SCALE_MIN)) < measured_ms * (1 - GPU_BOUND_MARGIN):
        h = _bisect(model, HOST_SCALE_MIN, HOST_SCALE_MAX, measured_ms)
        return Calibration(h, 1.0, traced, model(h), measured_ms, True)
    # GPU-bound: the host's factor from its own time; the GPU ops ran longer under the profiler
    own = host_scale_of(markers, host_ms)
    h = own if own is not None else HOST_SCALE_MIN
    how = (f"host time x{h:.2f} from the unprofiled host time per call ({host_ms:.3f} ms)" if own is not None
           else f"host time x{h:.2f}, the least allowed: no host_ms in run.json, and a GPU-bound latency says "
                "nothing of the host")
    if model(h, GPU_SCALE_MIN) > measured_ms:
        value = model(h, GPU_SCALE_MIN)
        return Calibration(h, GPU_SCALE_MIN, traced, value, measured_ms, True,
                           f"even at {GPU_SCALE_MIN}x its GPU time the traced iteration ({value:.3f} ms) is "
                           f"longer than the unprofiled latency ({measured_ms:.3f} ms); {how}")
    k = _bisect(lambda x: model(h, x), GPU_SCALE_MIN, 1.0, measured_ms) if model(h, 1.0) > measured_ms else 1.0
    return Calibration(h, k, traced, model(h, k), measured_ms, True,
                       f"GPU-bound: GPU ops {1 - k:.0%} faster unprofiled than traced; {how}")

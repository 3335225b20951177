"""Calibration: the profiled trace re-timed so that its iteration takes the unprofiled latency.

The profiler slows the host: every op and launch it records costs host time (the H100 ViT
study: eager iterations 18-78% longer profiled, README "What an H100 shows"), while the
GPU's kernels barely change. So the graph of a profiled window over-states how much the
host holds the GPU back. Before a what-if is trusted, the host's time (the CPU time
between calls and the calls themselves) is scaled by one factor, fitted per run so that
the modelled steady-state iteration (:func:`tracekit.analysis.critical_path.steady_latency_us`)
equals the unprofiled latency measured in the same run (run.json ``latency_ms`` median).

The factor is searched in [``HOST_SCALE_MIN``, ``HOST_SCALE_MAX``]: the profiler makes host
time up to four times longer on most runs, and an unprofiled run is not slower than a profiled
one by more than the timers' noise (a run whose unprofiled latency needs more is flagged, as
:mod:`tracekit.analysis.comparison.trust` flags an unreliable unprofiled timing). On a
launch-bound run of tiny kernels it makes it longer still (torchvision's mobilenet_v3_large at
batch 1 on the H200: more than 4x, issue 39): where the least factor leaves the model slower than
the measurement but a smaller one, down to ``HOST_SCALE_FLOOR``, meets it, the host is given the
stretch the data needs and the GPU keeps its time (the note says so): the profiler stretches the
host of such a run, not its kernels. Only where even the floor leaves the model slower than the
measurement did the GPU ops run longer under the profiler than without it (CUPTI's per-kernel
cost, seen on CUDA-graph replays in the H100 study): their time is then scaled too, down to
``GPU_SCALE_MIN``.

A GPU-bound run's latency says nothing of its host: any host time short enough gives it.
There the GPU ops' factor comes first, from the model without host time: what the latency leaves
the GPU alone (the kernels, their gaps and launch latencies). The host's factor then comes from the host's own time per
call measured unprofiled (run.json ``host_ms``: :func:`tracekit.capture.timers.host_times`) over the
traced iteration marker's length, where the run has it; else from the host time per iteration
estimated from the trace (:mod:`tracekit.analysis.critical_path.host_estimate`: the traced iteration
less the profiler's cost per recorded event); else it is ``HOST_SCALE_MIN``. Where that host time
makes the model longer than the measurement, the host's factor is lowered to meet it: no kernel is
shrunk to make room for host time. :attr:`Calibration.host_source` and the note say which it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path import reasons as why
from tracekit.analysis.critical_path.graph import Graph
from tracekit.analysis.critical_path.host_estimate import HostEstimate, steady_windows
from tracekit.analysis.critical_path.host_idle import idle_per_iteration_ms
from tracekit.analysis.critical_path.path import periods
from tracekit.analysis.critical_path.retime import Scale, retime, visit_order, weights

HOST_SCALE_MIN, HOST_SCALE_MAX = 0.25, 1.5
HOST_SCALE_FLOOR = 0.05   # a host the profiler slowed up to 20x (the module docstring)
GPU_SCALE_MIN = 0.5
TOLERANCE = 0.002   # relative: the bisection stops within 0.2% of the measured latency
# GPU-bound: with the least host time, the model is within this of the measured latency (or over it)
GPU_BOUND_MARGIN = 0.02


@dataclass
class Calibration:
    """host_scale, gpu_scale: the factors on host and GPU time (a job's host_scale: rank ->
    factor, :func:`calibrate_job`); traced_ms: the modelled iteration as traced (both 1);
    modelled_ms: with the factors; measured_ms: the unprofiled latency it was fitted to (NaN when
    unknown); calibrated: whether the model was fitted to a measurement (False: the traced graph,
    or the factors that could be fitted, an uncalibrated bound); note: what limited the fit, or how
    it was met where that was a choice (a reason: :mod:`~tracekit.analysis.critical_path.reasons`;
    None when the host's factor alone met the measurement); host_source: where the host's factor
    came from: ``fitted`` (to the unprofiled latency, the host setting it), ``measured`` (run.json
    ``host_ms``), ``estimated`` (from the trace: :mod:`~tracekit.analysis.critical_path.host_estimate`),
    ``none`` (``HOST_SCALE_MIN``, nothing to take it from) or ``traced`` (not calibrated)."""

    host_scale: Scale
    gpu_scale: float
    traced_ms: float
    modelled_ms: float
    measured_ms: float
    calibrated: bool
    note: dict | None = None
    host_source: str = "fitted"


def modelled_ms(g: Graph, step, markers: dict, host_scale: Scale, gpu_scale: float, order=None) -> float:
    """The steady-state iteration (ms) of ``g`` (a job's: its slowest rank's) with host time times
    ``host_scale`` (a factor, or one per rank) and GPU op time times ``gpu_scale``."""
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


def host_scale_of(markers: dict, host_ms: float | None, idle_ms: float = 0.0) -> float | None:
    """The host's factor from its own unprofiled time per call (``host_ms``, ms) over the traced
    iterations' median marker length (the first and last left out when there are 3 or more: they
    hold the window's synchronizations; the outermost only, where instances nest:
    :func:`~tracekit.analysis.critical_path.host_estimate.steady_windows`), both less the idle host
    time per iteration (``idle_ms``: :func:`~tracekit.analysis.critical_path.host_idle.idle_per_iteration_ms`,
    which the profiler does not slow and the factor does not scale) where that leaves both positive,
    within the search bounds; None without either."""
    windows = [steady_windows(m) for m in markers.values() if len(m)]
    lengths = [m["end"].to_numpy(float) - m["ts"].to_numpy(float) for m in windows]
    if not host_ms or not math.isfinite(host_ms) or not lengths:
        return None
    traced = float(np.median(np.concatenate(lengths))) / 1e3
    if 0 < idle_ms < min(host_ms, traced):
        host_ms, traced = host_ms - idle_ms, traced - idle_ms
    return min(max(host_ms / traced, HOST_SCALE_MIN), HOST_SCALE_MAX) if traced > 0 else None


def calibrate(g: Graph, step, markers: dict, measured_ms: float | None, host_ms: float | None = None,
              estimate: HostEstimate | None = None) -> Calibration:
    """Fit the host (and where needed GPU) time factors so that the modelled iteration is
    ``measured_ms`` (the unprofiled median latency, ms), as the module docstring says: the host
    first, within its usual range, then stretched further (``HOST_STRETCHED``); a GPU-bound run's
    GPU ops scaled by what the latency leaves them alone, its host's factor from ``host_ms`` (its
    own unprofiled time per call, ms), else from ``estimate`` (the host time per iteration estimated
    from the trace), lowered where needed to meet the measurement. Without a measurement the graph
    is left as traced and :attr:`Calibration.calibrated` is False."""
    order = visit_order(g)

    def model(h: float, k: float = 1.0) -> float:
        return modelled_ms(g, step, markers, h, k, order)

    if measured_ms is None or not math.isfinite(measured_ms) or measured_ms <= 0:
        return Calibration(1.0, 1.0, math.nan, math.nan, math.nan, False, {"code": why.NO_LATENCY}, "traced")
    traced = model(1.0)
    if not math.isfinite(traced):
        return Calibration(1.0, 1.0, traced, traced, math.nan, False, {"code": why.NO_LATENCY}, "traced")
    if (high := model(HOST_SCALE_MAX)) < measured_ms:
        return Calibration(HOST_SCALE_MAX, 1.0, traced, high, measured_ms, True, {
            "code": why.LATENCY_ABOVE, "measured_ms": measured_ms, "modelled_ms": high, "host_scale": HOST_SCALE_MAX})
    if model(HOST_SCALE_MIN) < measured_ms * (1 - GPU_BOUND_MARGIN):
        h = _bisect(model, HOST_SCALE_MIN, HOST_SCALE_MAX, measured_ms)
        return Calibration(h, 1.0, traced, model(h), measured_ms, True)
    if model(HOST_SCALE_FLOOR) < measured_ms * (1 - GPU_BOUND_MARGIN):   # a host stretched more than usual
        h = _bisect(model, HOST_SCALE_FLOOR, HOST_SCALE_MIN, measured_ms)
        return Calibration(h, 1.0, traced, model(h), measured_ms, True, {
            "code": why.HOST_STRETCHED, "host_scale": h, "least_usual": HOST_SCALE_MIN})
    h, host = own_host(markers, host_ms, estimate, idle_per_iteration_ms(g, step))
    if model(0.0, GPU_SCALE_MIN) > measured_ms:
        value = model(h, GPU_SCALE_MIN)
        return Calibration(h, GPU_SCALE_MIN, traced, value, measured_ms, True, {
            "code": why.GPU_BEYOND, "gpu_scale": GPU_SCALE_MIN, "modelled_ms": value,
            "measured_ms": measured_ms, **host}, host["host_source"])
    # the GPU's factor from the GPU alone (no host time), then the host's where it leaves room
    k = _bisect(lambda x: model(0.0, x), GPU_SCALE_MIN, 1.0, measured_ms) if model(0.0, 1.0) > measured_ms else 1.0
    if model(h, k) > measured_ms * (1 + TOLERANCE):
        host["host_lowered_from"], h = h, _bisect(lambda x: model(x, k), 0.0, h, measured_ms)
        host["host_scale"] = h
    return Calibration(h, k, traced, model(h, k), measured_ms, True, {"code": why.GPU_BOUND, "gpu_faster": 1 - k,
                                                                      **host}, host["host_source"])


def own_host(markers: dict, host_ms: float | None, estimate: HostEstimate | None,
             idle_ms: float = 0.0) -> tuple[float, dict]:
    """A GPU-bound run's host factor and the note's figures of where it came from: ``host_ms``
    measured (:func:`host_scale_of`), else the ``estimate`` from the trace (its host time over its
    traced iteration, between ``HOST_SCALE_FLOOR`` and ``HOST_SCALE_MAX``: the profiler's cost per
    event may slow a host more than usual), else ``HOST_SCALE_MIN``: (factor, {host_scale,
    host_ms, host_source, events, per_event_us}); ``idle_ms``: as :func:`host_scale_of` takes it."""
    own = host_scale_of(markers, host_ms, idle_ms)
    if own is not None:
        return own, {"host_scale": own, "host_ms": host_ms, "host_source": "measured"}
    if estimate is not None and estimate.traced_ms > 0:
        h = min(max(estimate.host_ms / estimate.traced_ms, HOST_SCALE_FLOOR), HOST_SCALE_MAX)
        return h, {"host_scale": h, "host_ms": estimate.host_ms, "host_source": "estimated",
                   "events": estimate.events, "per_event_us": estimate.per_event_us, "traced_ms": estimate.traced_ms}
    return HOST_SCALE_MIN, {"host_scale": HOST_SCALE_MIN, "host_ms": None, "host_source": "none"}


def calibrate_job(g: Graph, step, markers: dict, measured_ms: float | None,
                  host_ms: Mapping[int, float | None]) -> Calibration:
    """Fit a job's factors: one host factor per rank and one GPU factor, so that the modelled step
    (its slowest rank's iteration) is ``measured_ms`` (run.json ``latency_ms``: the slowest rank
    of each timed iteration, median, ms).

    Ranks wait for each other at every collective, so each rank's own unprofiled latency is the
    job's step, and what sets the ranks apart is their host: each rank's factor starts from its
    own unprofiled host time per call (``host_ms``: run.json ``distributed.ranks[i].host_ms``
    median, ms) over its traced iterations (:func:`host_scale_of`). Then, as for a single run:

    * where the host sets the step (with every rank's factor times c, c at its least, the model is
      shorter than the measurement), c is fitted so the model meets it, each factor within
      [``HOST_SCALE_MIN``, ``HOST_SCALE_MAX``]: the ranks keep the relative host speeds measured;
    * else (GPU-bound) the host keeps its factors and the GPU ops' time is scaled down, no lower
      than ``GPU_SCALE_MIN``, where they ran longer under the profiler; where even that leaves the
      model longer than the measurement, the rest is host time or waiting the fit cannot scale,
      and no kernel is shrunk to absorb it: the GPU keeps its traced time and the result is an
      uncalibrated bound (``calibrated`` False), its note says by how much.

    Without a host time for every rank the ranks keep their traced relative speeds (c alone is
    fitted, where the host sets the step); a GPU-bound job without them cannot be calibrated
    (its step says nothing of its hosts) and is modelled as traced, an uncalibrated bound.
    """
    order = visit_order(g)
    ranks = sorted(int(r) for r in np.unique(g.rank))

    def model(h: Mapping[int, float], k: float = 1.0) -> float:
        return modelled_ms(g, step, markers, h, k, order)

    def times(h: Mapping[int, float], c: float) -> dict[int, float]:
        return {r: f * c for r, f in h.items()}

    traced = model(dict.fromkeys(ranks, 1.0))
    if measured_ms is None or not math.isfinite(measured_ms) or measured_ms <= 0 or not math.isfinite(traced):
        return Calibration(dict.fromkeys(ranks, 1.0), 1.0, traced, traced, math.nan, False, {"code": why.NO_LATENCY})
    own = {r: host_scale_of({r: markers.get(r, pd.DataFrame())}, host_ms.get(r), idle_per_iteration_ms(g, step, r))
           for r in ranks}
    lacking = [r for r in ranks if own[r] is None]
    h = dict.fromkeys(ranks, 1.0) if lacking else own
    lo, hi = HOST_SCALE_MIN / min(h.values()), HOST_SCALE_MAX / max(h.values())
    if model(times(h, lo)) < measured_ms * (1 - GPU_BOUND_MARGIN):
        if (high := model(times(h, hi))) < measured_ms:
            return Calibration(times(h, hi), 1.0, traced, high, measured_ms, True, {
                "code": why.STEP_ABOVE, "measured_ms": measured_ms, "modelled_ms": high, "lacking": lacking})
        at_own = model(h)
        c = 1.0 if abs(at_own - measured_ms) <= TOLERANCE * measured_ms else \
            _bisect(lambda x: model(times(h, x)), lo, hi, measured_ms)
        return Calibration(times(h, c), 1.0, traced, model(times(h, c)), measured_ms, True, {
            "code": why.HOST_BOUND, "factor": None if lacking else c, "lacking": lacking})
    if lacking:
        return Calibration(h, 1.0, traced, traced, measured_ms, False, {"code": why.HOSTS_UNKNOWN, "lacking": lacking})
    if (value := model(h)) <= measured_ms * (1 + TOLERANCE):
        return Calibration(h, 1.0, traced, value, measured_ms, True, {
            "code": why.GPU_BOUND_JOB, "gpu_faster": None,
            "short": 1 - value / measured_ms if value < measured_ms * (1 - GPU_BOUND_MARGIN) else None})
    if (least := model(h, GPU_SCALE_MIN)) > measured_ms:
        return Calibration(h, 1.0, traced, value, measured_ms, False, {
            "code": why.JOB_BEYOND, "modelled_ms": value, "measured_ms": measured_ms, "gpu_scale": GPU_SCALE_MIN,
            "least_ms": least})
    k = _bisect(lambda x: model(h, x), GPU_SCALE_MIN, 1.0, measured_ms)
    return Calibration(h, k, traced, model(h, k), measured_ms, True,
                       {"code": why.GPU_BOUND_JOB, "gpu_faster": 1 - k, "short": None})

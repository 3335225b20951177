"""The interval of a prediction, from its sources of uncertainty (issue 39).

Each source is an input of the prediction known only within a range; the prediction is made again
with that input at each end of its range, the others as they were:

* ``timer``: the unprofiled latency the model is calibrated to, at the p10 and p90 of the eager run's
  timed calls (run.json ``latency_ms``) instead of their median: what the timer's spread changes in
  the prediction, propagated through the calibration (a launch-bound run's host factor, a
  GPU-bound run's GPU factor);
* ``host``: a GPU-bound run's host time (:mod:`~tracekit.analysis.critical_path.calibrate`): where
  measured, run.json ``host_ms`` p10 and p90; where estimated from the trace, the profiler's cost
  per event at the ends of its range
  (:data:`~tracekit.analysis.critical_path.host_estimate.PROFILER_US_PER_EVENT_RANGE`); a host
  factor fitted to the latency has the timer's uncertainty, no other;
* ``replay``: ``cuda-graphs``' replay costs at the ends of their ranges
  (:mod:`~tracekit.analysis.critical_path.replay_costs`);
* ``gpu``: where the calibration scaled the GPU ops (a GPU-bound run whose model, even without host
  time, was longer than the measurement), the prediction with them as traced (factor 1): the fit
  cannot tell the profiler's stretch of the kernels (which the factor undoes) from eager's gaps the
  model over-states (which a replay does not have, and the factor then wrongly takes from the kernels);
* ``iterations``: the edited model's steady iterations, p10 to p90 (the profiled iterations' own
  spread: their kernels and host time differ from one iteration to the next; the prediction is
  their median);
* ``fit``: the calibration stops within ``TOLERANCE`` (0.2%) of the measured latency: +-0.2% of the
  prediction.

The sources are independent, so their deviations add in quadrature (root-sum-square, as the GUM
combines independent standard uncertainties; JCGM 100:2008, 5.1.2): the low end is the prediction
less the root of the sum of the squares of each source's largest shortfall below it, the high end
alike above it. What no source here covers is not in the interval: a capture that runs other
kernels than eager (:mod:`~tracekit.analysis.critical_path.capture_risk` flags it), a host
machine other than the traced one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tracekit.analysis.critical_path.calibrate import TOLERANCE, Calibration
from tracekit.analysis.critical_path.host_estimate import PROFILER_US_PER_EVENT_RANGE


@dataclass
class Interval:
    """low_ms, high_ms: the prediction's interval (ms); sources: each source's predictions at the
    ends of its range (name -> (low_ms, high_ms), the smaller first)."""

    low_ms: float
    high_ms: float
    sources: dict[str, tuple[float, float]] = field(default_factory=dict)


def combine(predicted_ms: float, sources: dict[str, tuple[float, float]]) -> Interval:
    """The interval around ``predicted_ms`` of the sources' predictions at the ends of their ranges
    (the module docstring: root-sum-square of each source's deviations below and above), with the
    calibration's fit tolerance (``fit``) added; a source whose prediction is not finite is left out."""
    sources = {k: tuple(sorted(v)) for k, v in sources.items() if all(math.isfinite(x) for x in v)}
    sources["fit"] = (predicted_ms * (1 - TOLERANCE), predicted_ms * (1 + TOLERANCE))
    below = math.sqrt(sum(max(predicted_ms - lo, 0.0) ** 2 for lo, _ in sources.values()))
    above = math.sqrt(sum(max(hi - predicted_ms, 0.0) ** 2 for _, hi in sources.values()))
    return Interval(predicted_ms - below, predicted_ms + above, sources)


def interval(predicted_ms: float, again: Callable[..., float], measured_range: tuple[float, float] | None,
             host_variants: tuple[dict, dict] | None, replay=None, gpu_scale: float = 1.0,
             iterations_ms=None) -> Interval:
    """The interval of a prediction (the module docstring).

    Args:
        predicted_ms: the prediction (ms).
        again: the prediction made again with some inputs changed (keywords ``measured``,
            ``host``, ``costs``: the replay's, and ``gpu``: the factor on GPU op time), ms.
        measured_range: (p10, p90) of the unprofiled latency (ms); None: no timer source.
        host_variants: the host inputs at the two ends of their range (``host`` keywords for
            ``again``); None: no host source.
        replay: the replay costs (:class:`~tracekit.analysis.critical_path.replay_costs.Replay`)
            where the edits replay a graph, with their ranges; None: no replay source.
        gpu_scale: the calibration's factor on GPU op time (1: no gpu source).
        iterations_ms: the edited model's steady iterations (ms; fewer than two: no iterations source).
    """
    sources = {}
    if measured_range is not None and all(math.isfinite(x) and x > 0 for x in measured_range):
        sources["timer"] = tuple(again(measured=m) for m in measured_range)
    if host_variants is not None:
        sources["host"] = tuple(again(host=h) for h in host_variants)
    if replay is not None and replay.ranges:
        sources["replay"] = tuple(again(costs=replay.at(side)) for side in (0, 1))
    if gpu_scale != 1.0:
        sources["gpu"] = (predicted_ms, again(gpu=1.0))
    if iterations_ms is not None and len(iterations_ms) >= 2:
        sources["iterations"] = tuple(float(np.percentile(iterations_ms, q)) for q in (10, 90))
    return combine(predicted_ms, sources)


@dataclass
class Spread:
    """The ranges of a run's measurements, for a prediction's interval
    (:mod:`~tracekit.analysis.critical_path.uncertainty`): measured_range, the unprofiled latency's
    (p10, p90) ms; host_range, the unprofiled host time per call's (p10, p90) ms (a single run's;
    None where unknown)."""

    measured_range: tuple[float, float] | None = None
    host_range: tuple[float, float] | None = None


def host_variants(cal: Calibration, nominal: dict, spread: Spread) -> tuple[dict, dict] | None:
    """The host inputs at the ends of their range, where the host's factor came from them (a single
    GPU-bound run's: ``host_ms`` measured, its p10 and p90; estimated, the profiler's cost per event at
    the ends of its range); None where the host's factor came from the latency, or for a job."""
    if "estimate" not in nominal:
        return None
    if cal.host_source == "measured" and spread.host_range is not None:
        return tuple({"host_ms": h, "estimate": None} for h in spread.host_range)
    if cal.host_source == "estimated":
        return tuple({"host_ms": None, "estimate": nominal["estimate"].at(c)} for c in PROFILER_US_PER_EVENT_RANGE)
    return None

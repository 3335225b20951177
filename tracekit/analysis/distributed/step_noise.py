"""Whether a job's straggler changes its step beyond the run's noise (issue 38): the rules that
:mod:`tracekit.analysis.distributed.job` applies after the wait rules of
:mod:`tracekit.analysis.distributed.stragglers`.

* ``noise_ms``, the run-to-run noise measured in the same run: the spread of the job's step times,
  p90 - p10 of run.json's ``latency_ms`` (the slowest rank of each timed iteration). A change
  smaller than it leaves the step's p10-p90 range overlapping its own, which tracekit calls
  inconclusive for a speedup (:mod:`tracekit.analysis.comparison.trust`).
* ``straggler_excess_ms``, what the rank that caused most waiting does each step beyond the other
  ranks' median. With NCCL (collectives on the GPU) its host (unprofiled host time per call,
  run.json ``distributed.ranks[i].host_ms``: the rank's own cost, NCCL only enqueues) and its GPU
  (computation per profiled iteration: kernels barely slow under the profiler); balancing it away
  cannot save more. With gloo a collective blocks the host until every rank has arrived, so a
  rank's host time holds its waits: the excess is then the wait it caused less the most any
  other rank caused, per profiled iteration (ranks that take turns being late cause alike and
  cancel; a profiled figure, the profiler slowing every host); likewise where a rank's host time
  is not recorded (jobs traced before issue 37).
* ``balance_could_save_ms``, where the job's critical path was computed (``tracekit analyze
  --critical-path``: the calibrated ``balance-ranks`` what-if,
  :mod:`tracekit.analysis.critical_path.job_figures`), is what it changes; else its excess.

A straggler whose change is within the noise is not named, and ``no_straggler_because`` says so;
where the run has no unprofiled timing the noise is unknown and the wait rules alone name it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracekit.manifest import Manifest

WITHIN_NOISE = "within noise"   # no_straggler_because: the straggler's effect on the step is within the noise


def noise_ms(manifest: Manifest | None) -> float:
    """The run-to-run noise measured in a job's run (ms): p90 - p10 of its step times; NaN without
    them (module docstring)."""
    if manifest is None:
        return math.nan
    return manifest.latency("p90") - manifest.latency("p10")


def excess_ms(ranks: pd.DataFrame, straggle: pd.DataFrame, manifest: Manifest | None, backend: str | None) -> float:
    """The work per step of the rank that caused most waiting beyond the other ranks' (ms; module
    docstring). ``ranks``: the job's ranks table (rank, iterations, computation_us);
    ``straggle``: :func:`tracekit.analysis.distributed.stragglers.stragglers` (largest wait caused
    first); ``backend``: the job's process group backend. NaN without a rank that caused waiting."""
    if straggle.empty:
        return math.nan
    top = int(straggle["rank"].iloc[0])
    own = {r.rank: r.host_ms.median for r in (manifest.distributed.ranks or [])
           if r.host_ms is not None and r.host_ms.median is not None} \
        if manifest is not None and manifest.distributed else {}
    r = ranks.set_index("rank")
    iterations = float(r["iterations"].median())
    if backend == "gloo" or not set(r.index) <= set(own):
        caused = straggle["wait_caused_us"].to_numpy(float)
        net = caused[0] - (caused[1] if len(caused) > 1 else 0.0)
        return net / iterations / 1e3 if iterations > 0 else math.nan
    compute = (r["computation_us"] / r["iterations"]).astype(float)
    gpu = float(compute[top] - compute.drop(index=top).median()) / 1e3
    host = own[top] - float(np.median([own[o] for o in r.index if o != top]))
    return max(host, 0.0) + (max(gpu, 0.0) if math.isfinite(gpu) else 0.0)


def beyond_noise(row: dict, effect: str) -> None:
    """Unname the straggler of a ``jobs`` row when what it changes in the step (the row's figure
    ``effect``, ms: ``balance_could_save_ms`` or ``straggler_excess_ms``) is within the row's
    ``noise_ms``, saying why in no_straggler_because (``WITHIN_NOISE``, the rank, the figure
    and both values)."""
    noise, value = row["noise_ms"], row[effect]
    if row["straggler"] is None or not (math.isfinite(value) and math.isfinite(noise)) or value > noise:
        return
    row["no_straggler_because"] = {"code": WITHIN_NOISE, "rank": row["straggler"], "effect": effect,
                                   "effect_ms": value, "noise_ms": noise}
    row.update(straggler=None, straggler_times_last=0, straggler_wait_caused_us=0.0)

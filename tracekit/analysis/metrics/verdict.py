"""The verdict on a run: is it bound by kernel-launch overhead?

Rule (thresholds are ours, set so that each verdict promises something
measurable; calibrated on the real H100 ViT traces in shared/fixtures/h100):

* ``launch-bound``: the GPU waits for the host (idle host wait, see
  :mod:`tracekit.analysis.metrics.idle`) for at least ``LAUNCH_BOUND_HOST_WAIT`` of its
  active span. Removing launch overhead (CUDA graphs) can then shorten the
  profiled iteration by at least that share.
* ``gpu-bound``: utilization is at least ``GPU_BOUND_UTILIZATION`` and host
  wait under ``GPU_BOUND_HOST_WAIT`` of the span: no host-side change can gain
  more than the idle remainder; only faster or fewer kernels help.
* ``mixed``: anything between.
* ``undetermined``: fewer than ``MIN_LAUNCHES`` host launches. Host wait is an
  op launched after the GPU went idle; with one launch (one kernel, or one
  ``cudaGraphLaunch``) no gap can show it, so no verdict can be drawn.

The evidence the report shows with it (:func:`tracekit.report.run_lines.evidence_text`):
host-wait share of the span, utilization, the feed ratio (GPU work per launch over the
interval between launches: below 1 the host cannot keep the GPU fed), and the share of
kernels shorter than 10 µs.
The host-wait time per iteration bounds what a CUDA graph could recover, uncalibrated:
the profiler stretches it (up to 38x the measured saving on the H200 predict suite,
reports/h200/predict). The reports show the critical path's calibrated prediction instead
(:mod:`tracekit.analysis.critical_path.trace_figures`).

The profiler slows the host (each op and launch is recorded), so a profiled
window can look launch-bound when the run is not. When the unprofiled latency
is known, the GPU busy time per profiled iteration over that latency estimates
the unprofiled utilization (kernel times barely change under the profiler);
if it reaches ``GPU_BOUND_UTILIZATION`` the verdict is ``gpu-bound`` and the
evidence says the host wait was the profiler's. The busy time per iteration is
the median over marked iterations where the trace has markers (the first
profiled step also runs ops left queued from before the window), else the
run's busy time over its iterations. Above 1 it says the kernels ran longer
under the profiler than the whole unprofiled iteration took (CUPTI's
per-kernel cost, seen on CUDA-graph replays): the run is GPU-bound either way.
"""

from __future__ import annotations

import math

import pandas as pd

from tracekit.analysis.registry import Inputs, Output, register

LAUNCH_BOUND_HOST_WAIT = 0.25
GPU_BOUND_UTILIZATION = 0.90
GPU_BOUND_HOST_WAIT = 0.05
MIN_LAUNCHES = 2
# Why a run has no verdict (verdict_reason; besides these, the reason the analysis could not run).
NO_GPU, INTEGRITY_FAILED, FEW_LAUNCHES = "no GPU ops", "integrity failed", "too few launches"


def verdict(row: dict, latency_ms: float | None = None) -> dict:
    """Verdict of a run row that has the summary, idle and launch metrics.

    Args:
        row: keys active_span_us, idle_host_wait_us, utilization, feed_ratio,
            short_kernel_share, iterations (NaN when unknown), busy_per_iter_us,
            host_launches, has_gpu; iteration_busy_us (median busy of marked
            iterations) when the trace has markers; integrity
            (:mod:`tracekit.analysis.metrics.integrity`): a failed integrity makes the verdict
            ``undetermined``.
        latency_ms: the unprofiled iteration latency (median, ms), if measured.

    Returns:
        {"verdict": "launch-bound" | "gpu-bound" | "mixed" | "undetermined" | "no GPU activity",
         "verdict_profiled": the verdict from the profiled window alone,
         "host_wait_share": float, "unprofiled_utilization": float (NaN if unknown),
         "cuda_graph_recoverable_us_per_iter": float,
         "verdict_reason": why there is no verdict, "" where there is one: :data:`NO_GPU`,
         :data:`INTEGRITY_FAILED` or :data:`FEW_LAUNCHES`}.
    """
    if row.get("integrity") == "failed":  # tracekit.analysis.metrics.integrity: a figure the rule needs is unknown
        return undetermined(INTEGRITY_FAILED)
    if not row.get("has_gpu"):
        return {"verdict": "no GPU activity", "verdict_profiled": "no GPU activity", "host_wait_share": math.nan,
                "unprofiled_utilization": math.nan, "cuda_graph_recoverable_us_per_iter": math.nan,
                "verdict_reason": NO_GPU}
    if row.get("host_launches", MIN_LAUNCHES) < MIN_LAUNCHES:
        return undetermined(FEW_LAUNCHES)
    span = row["active_span_us"]
    share = row["idle_host_wait_us"] / span if span > 0 else 0.0
    util = row["utilization"] if span > 0 else 1.0
    if share >= LAUNCH_BOUND_HOST_WAIT:
        label = "launch-bound"
    elif util >= GPU_BOUND_UTILIZATION and share < GPU_BOUND_HOST_WAIT:
        label = "gpu-bound"
    else:
        label = "mixed"
    iters = row.get("iterations")
    per_iter = row["idle_host_wait_us"] / iters if iters and not math.isnan(iters) else math.nan
    unprofiled = math.nan
    final = label
    busy = busy_per_iteration(row)
    if latency_ms and latency_ms > 0 and not math.isnan(busy):
        unprofiled = busy / (latency_ms * 1e3)
        if label != "gpu-bound" and unprofiled >= GPU_BOUND_UTILIZATION:
            final = "gpu-bound"
    return {"verdict": final, "verdict_profiled": label, "host_wait_share": share,
            "unprofiled_utilization": unprofiled, "cuda_graph_recoverable_us_per_iter": per_iter,
            "verdict_reason": ""}


def busy_per_iteration(row: dict) -> float:
    """The GPU busy time (µs) of a typical profiled iteration: the median over marked iterations
    (``iteration_busy_us``) where the trace has markers, else the run's over its iterations."""
    busy = row.get("iteration_busy_us", math.nan)
    return row.get("busy_per_iter_us", math.nan) if busy is None or busy != busy else busy


def undetermined(reason: str) -> dict:
    """:func:`verdict`'s fields for a run that cannot be judged, ``reason`` saying why."""
    return {"verdict": "undetermined", "verdict_profiled": "undetermined", "host_wait_share": math.nan,
            "unprofiled_utilization": math.nan, "cuda_graph_recoverable_us_per_iter": math.nan,
            "verdict_reason": reason}


def evidence_rows(row: dict) -> list[dict]:
    """The figures behind a verdict, one row each, for the ``verdict_evidence`` table.

    Args:
        row: a run row after :func:`verdict` (and the launch metrics).

    Returns:
        Rows of evidence (the run-row column it comes from), value, supports ("launch-bound",
        "gpu-bound", or "" where the figure only informs, by the thresholds above); the report
        adds what each means and the threshold it is held to
        (:data:`tracekit.report.run_lines.EVIDENCE_RULES`). Empty for a run without a verdict (no
        GPU activity, undetermined).
    """
    if row.get("verdict") in ("no GPU activity", "undetermined", None):
        return []
    share, util = row["host_wait_share"], row["utilization"]
    feed, unprofiled = row.get("feed_ratio", math.nan), row.get("unprofiled_utilization", math.nan)

    def side(launch: bool, gpu: bool) -> str:
        return "launch-bound" if launch else "gpu-bound" if gpu else ""

    rows = [
        ("host_wait_share", share, side(share >= LAUNCH_BOUND_HOST_WAIT, share < GPU_BOUND_HOST_WAIT)),
        ("utilization", util, side(False, util >= GPU_BOUND_UTILIZATION)),
        ("feed_ratio", feed, side(feed < 1, feed > 1)),
        ("mean_kernel_us", row.get("mean_kernel_us", math.nan), ""),
        ("launch_interval_us", row.get("launch_interval_us", math.nan), ""),
        ("short_kernel_share", row.get("short_kernel_share", math.nan), ""),
        ("unprofiled_utilization", unprofiled, side(False, unprofiled >= GPU_BOUND_UTILIZATION)),
        ("cuda_graph_recoverable_us_per_iter", row.get("cuda_graph_recoverable_us_per_iter", math.nan), ""),
    ]
    return [{"evidence": e, "value": v, "supports": s} for e, v, s in rows
            if not (isinstance(v, float) and math.isnan(v))]


@register("verdict", needs=("idle", "launches"), uses=("integrity", "iterations"), order=50,
          tables=("verdict_evidence",),
          columns={"verdict": "", "verdict_profiled": "", "host_wait_share": "share", "unprofiled_utilization": "ratio",
                   "cuda_graph_recoverable_us_per_iter": "µs", "verdict_reason": ""},
          default=lambda x, why: Output(row=undetermined(why)))
def _verdict_analysis(x: Inputs) -> Output:
    """The verdict on the row's figures (:func:`verdict`, checked against run.json's unprofiled
    latency) and its evidence (:func:`evidence_rows`)."""
    judged = verdict(x.row, x.run.latency_ms)
    evidence = pd.DataFrame(evidence_rows({**x.row, **judged}), columns=["evidence", "value", "supports"])
    return Output(row=judged, tables={"verdict_evidence": evidence})

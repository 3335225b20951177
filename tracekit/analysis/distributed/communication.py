"""Communication and computation time of one rank, their overlap, and exposed communication.

Definitions follow HolisticTraceAnalysis (hta/analyzers/breakdown_analysis.py,
``get_temporal_breakdown``; hta/analyzers/communication_analysis.py,
``get_comm_comp_overlap``):

* computation: the union of the intervals of computation kernels (every kernel that
  is not communication; memcpy and memset are neither, as HTA's MEMORY type);
* communication: the union of the intervals of communication GPU ops (NCCL/RCCL
  kernels, :mod:`tracekit.analysis.distributed.collectives`), and, beyond HTA, of the device
  copies and host-side runs (``gloo:*`` annotations) of gloo collectives, which HTA
  does not see; on an NCCL trace the two agree;
* overlap: the time both run at once; ``comm_comp_overlap`` = overlap / communication
  (HTA's "comp_comm_overlap_ratio");
* exposed communication = communication - overlap: communication not hidden under
  computation;
* non-compute time = GPU busy - computation (HTA's ``non_compute_time``).

A rank without GPU ops (gloo on CPUs) has its timeline on the host: computation is the
union of its ``cpu_op`` intervals on threads that run no collective, communication the
union of its ``gloo:*`` annotations.

HTA differs where it takes events as GPU ops that we do not (``cuda_sync``, Triton
``cpu_op`` records with a stream), types kernels by regular expression (``^nccl.*Kernel``
is communication; a name with ``Memcpy``, ``Memset`` or ``Sync`` in it is neither) and
leaves out the last ProfilerStep iteration; tests/crosscheck/test_hta_job.py shows that
on the real 2-rank NCCL fixture these account for every difference.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracekit.analysis.distributed import collectives
from tracekit.analysis.metrics.intervals import union
from tracekit.trace.reader import EventTables


def _length(starts, ends) -> float:
    s, e = union(np.asarray(starts, dtype=float), np.asarray(ends, dtype=float))
    return float((e - s).sum())


def _timelines(tables: EventTables) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(computation, communication) intervals of the rank: frames with ts and end (µs)."""
    host = collectives.host_collectives(tables)[["ts", "end", "tid"]]
    if tables.has_gpu:
        ops = tables.gpu_ops
        comm = collectives.communication_ops(tables)
        compute = ops[(ops["kind"] == "kernel").to_numpy() & ~comm]
        return compute[["ts", "end"]], pd.concat([ops.loc[comm, ["ts", "end"]], host[["ts", "end"]]])
    cpu = tables.cpu_ops
    compute = cpu[(cpu["cat"] == "cpu_op") & ~cpu["tid"].astype(str).isin(set(host["tid"].astype(str)))]
    return compute[["ts", "end"]], host[["ts", "end"]]


def window_us(tables: EventTables) -> float:
    """The profiled window (µs): first ProfilerStep start to last end; without markers the
    GPU's active span, or on a CPU-only trace the span of its CPU ops."""
    if len(tables.markers):
        return float(tables.markers["end"].max() - tables.markers["ts"].min())
    events = tables.gpu_ops if tables.has_gpu else tables.cpu_ops
    return float(events["end"].max() - events["ts"].min()) if len(events) else math.nan


def breakdown(tables: EventTables) -> dict:
    """Communication and computation of one rank (see the module docstring).

    Returns:
        {"computation_us", "communication_us", "comm_overlap_us" (both at once),
        "comm_comp_overlap" (overlap / communication, 0..1; NaN without communication),
        "exposed_communication_us", "non_compute_us" (GPU busy - computation; NaN
        without GPU ops), "window_us" (:func:`window_us`), "comm_timeline" ("gpu" or
        "cpu": where both were measured)}. Times in µs.
    """
    compute, comm = _timelines(tables)
    comp_us, comm_us = _length(compute["ts"], compute["end"]), _length(comm["ts"], comm["end"])
    both = pd.concat([compute, comm])
    overlap = comp_us + comm_us - _length(both["ts"], both["end"])
    busy = _length(tables.gpu_ops["ts"], tables.gpu_ops["end"]) if tables.has_gpu else math.nan
    return {"computation_us": comp_us, "communication_us": comm_us, "comm_overlap_us": overlap,
            "comm_comp_overlap": overlap / comm_us if comm_us > 0 else math.nan,
            "exposed_communication_us": comm_us - overlap, "non_compute_us": busy - comp_us,
            "window_us": window_us(tables), "comm_timeline": "gpu" if tables.has_gpu else "cpu"}


def idle_in_calls(gaps: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """The pieces of GPU idle gaps that fall inside collective calls.

    Args:
        gaps: device gaps of :func:`tracekit.analysis.metrics.idle.gaps` (start, end, cause).
        calls: :func:`tracekit.analysis.distributed.collectives.calls` of the same trace.

    Returns:
        One row per (call, gap) that overlap: call (row of ``calls``), start, end (µs,
        the gap clipped to the call), cause (the gap's). The job analysis keeps the part
        during which the call waited for another rank (:mod:`tracekit.analysis.distributed.stragglers`).
    """
    cols = ["call", "start", "end", "cause"]
    if gaps.empty or calls.empty:
        return pd.DataFrame(columns=cols)
    ts, end = calls["ts"].to_numpy(), calls["end"].to_numpy()
    parts = []
    for _, g in gaps.groupby("device"):   # a device's gaps are disjoint: sorted starts and ends
        g = g.sort_values("start")
        gs, ge = g["start"].to_numpy(), g["end"].to_numpy()
        first, last = np.searchsorted(ge, ts, side="right"), np.searchsorted(gs, end, side="left")
        call = np.repeat(np.arange(len(ts)), np.maximum(last - first, 0))
        if len(call):
            gap = np.concatenate([np.arange(a, b) for a, b in zip(first, last) if b > a])
            parts.append(pd.DataFrame({"call": call, "start": np.maximum(gs[gap], ts[call]),
                                       "end": np.minimum(ge[gap], end[call]), "cause": g["cause"].to_numpy()[gap]}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)

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
from tracekit.analysis.registry import Inputs, Output, register
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


@register("communication", reads=("gpu_ops", "host_calls", "cpu_ops", "comms"), order=60, columns={
    "computation_us": "µs", "communication_us": "µs", "comm_overlap_us": "µs", "comm_comp_overlap": "share",
    "exposed_communication_us": "µs", "non_compute_us": "µs", "window_us": "µs", "comm_timeline": ""})
def _communication_analysis(x: Inputs) -> Output:
    """The rank's communication, computation and their overlap (:func:`breakdown`)."""
    return Output(row=breakdown(x.tables))

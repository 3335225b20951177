"""One iteration's timeline: the GPU ops it launched, per stream, over the host's CUDA API calls.

The data of the timeline-strip plot: a launch-bound iteration shows GPU lanes
with gaps under a CPU lane packed with launch calls; a CUDA-graph replay shows
one ``cudaGraphLaunch`` and a dense GPU lane.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.metrics.idle import SYNC_CALLS, op_iterations
from tracekit.analysis.registry import Inputs, Output, register
from tracekit.trace.reader import EventTables

COLUMNS = ["step", "lane", "kind", "name", "start_us", "dur_us"]
CPU_LANE = "CPU: CUDA API"


def pick_step(markers: pd.DataFrame) -> int | None:
    """The step shown: the middle marker (index n // 2), away from the first step
    (caches still warming) and the last (it ends with the window's device sync).
    None without markers."""
    if markers.empty:
        return None
    return int(markers["step"].iloc[len(markers) // 2])


def iteration_timeline(tables: EventTables, step: int | None = None) -> pd.DataFrame:
    """The events of one marked iteration, times relative to its marker's start.

    A GPU op belongs to the iteration in which its launch call ran (by
    correlation id; an op without one, to the iteration its start falls in):
    the rule of :func:`tracekit.analysis.metrics.summary.per_iteration`.

    Args:
        tables: a trace's event tables.
        step: the ``ProfilerStep`` number; None picks :func:`pick_step`.

    Returns:
        Rows of ``COLUMNS``: step; lane ("GPU <device> stream <stream>" or
        ``CPU_LANE``); kind: ``iteration`` (the marker, on the CPU lane),
        ``kernel``/``memcpy``/``memset`` (GPU ops), ``launch`` (a host call
        whose correlation id a GPU op of this iteration carries), ``sync`` (a
        blocking call of ``idle.SYNC_CALLS``) or ``other API`` (any other
        CUDA runtime/driver call inside the marker); name; start_us, dur_us
        (µs). Empty when the trace has no markers or no such step.
    """
    markers = tables.markers
    step = pick_step(markers) if step is None else step
    m = markers[markers["step"] == step]
    if m.empty:
        return pd.DataFrame(columns=COLUMNS)
    t0, t1 = float(m["ts"].iloc[0]), float(m["end"].iloc[0])
    ops = tables.gpu_ops
    calls = tables.host_calls
    ops = ops[op_iterations(tables, ops) == step]
    gpu = pd.DataFrame({
        "lane": [f"GPU {d} stream {s}" for d, s in zip(ops["device"], ops["stream"])],
        "kind": ops["kind"], "name": ops["name"], "start_us": ops["ts"] - t0, "dur_us": ops["dur"]})
    host = calls[(calls["ts"] >= t0) & (calls["ts"] < t1)]
    kind = np.where(host["correlation"].isin(set(ops["correlation"])) & (host["correlation"] >= 0), "launch",
                    np.where(host["name"].isin(SYNC_CALLS), "sync", "other API"))
    cpu = pd.DataFrame({"lane": CPU_LANE, "kind": kind, "name": host["name"],
                        "start_us": host["ts"] - t0, "dur_us": host["dur"]})
    marker = pd.DataFrame({"lane": [CPU_LANE], "kind": ["iteration"], "name": [f"ProfilerStep#{step}"],
                           "start_us": [0.0], "dur_us": [t1 - t0]})
    out = pd.concat([marker, cpu, gpu], ignore_index=True).assign(step=step)
    return out[COLUMNS]


@register("timeline", reads=("gpu_ops", "host_calls", "markers"), order=56, tables=("timeline",))
def _timeline_analysis(x: Inputs) -> Output:
    """One marked iteration's GPU ops and CUDA API calls (:func:`iteration_timeline`)."""
    return Output(tables={"timeline": iteration_timeline(x.tables)})

"""Per-run headline metrics: kernels, launches, GPU busy/idle time, utilization.

Definitions (DESIGN.md, "Terms"):
  * kernel: one GPU kernel execution (Kineto ``cat == "kernel"``).
  * GPU op: kernel, memcpy or memset.
  * host launch: one host API call that enqueued GPU work, counted as the
    distinct correlation ids of GPU ops. A ``cudaGraphLaunch`` replaying 60
    kernels is one launch (its kernels share its correlation id; Kineto, CUPTI
    activity records).
  * busy time: the union of GPU-op intervals on a device (overlap across
    streams counted once), not their sum.
  * active span: first GPU-op start to last GPU-op end on a device.
  * utilization = busy / span; idle = span - busy.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracekit.analysis.metrics import idle, launches
from tracekit.analysis.metrics.intervals import busy_and_gaps, union
from tracekit.analysis.registry import Inputs, Output, register
from tracekit.trace.reader import EventTables


def launch_count(correlation: np.ndarray) -> int:
    """Host launches among GPU ops with these correlation ids: the distinct ids, -1 (none) left out."""
    return int(pd.Series(correlation[correlation >= 0]).nunique())


def per_device(tables: EventTables) -> pd.DataFrame:
    """Busy time, span and idle gaps of each GPU device in the trace.

    Returns:
        One row per device: device, kernels, gpu_ops, host_launches,
        gpu_busy_us, active_span_us, idle_us, idle_gaps, utilization
        (0..1), kernel_time_us (sum of kernel durations, overlap counted twice).
        Empty (with these columns) for a trace without GPU ops.
    """
    ops = tables.gpu_ops
    ts, end, dur, correlation = (ops[c].to_numpy() for c in ("ts", "end", "dur", "correlation"))
    is_kernel = (ops["kind"] == "kernel").to_numpy()
    rows = []
    for device, at in sorted(ops.groupby("device").indices.items()):  # positions: no copy of a device's rows
        rows_of = slice(None) if len(at) == len(ops) else at   # one device: views, no copies
        starts, ends, kernel, launched = ts[rows_of], end[rows_of], is_kernel[rows_of], correlation[rows_of]
        busy, gap_s, gap_e = busy_and_gaps(starts, ends)
        span = float(ends.max() - starts.min())
        rows.append({
            "device": int(device),
            "kernels": int(kernel.sum()),
            "gpu_ops": len(at),
            "host_launches": launch_count(launched),
            "gpu_busy_us": busy,
            "active_span_us": span,
            "idle_us": span - busy,
            "idle_gaps": len(gap_s),
            "utilization": busy / span if span > 0 else math.nan,
            "kernel_time_us": float(pd.Series(dur[rows_of][kernel]).sum()),
        })
    return pd.DataFrame(rows, columns=["device", "kernels", "gpu_ops", "host_launches", "gpu_busy_us",
                                       "active_span_us", "idle_us", "idle_gaps", "utilization",
                                       "kernel_time_us"])


def per_iteration(tables: EventTables) -> pd.DataFrame:
    """Metrics of each iteration marked in the trace (``ProfilerStep#N``).

    A GPU op belongs to the iteration during which its launch call ran (found
    by correlation id); an op without a launch call belongs to the iteration
    its start falls in.

    Returns:
        One row per marker: step, iteration_us (the marker's CPU-side length),
        kernels, host_launches, gpu_busy_us, active_span_us. Empty when the
        trace has no markers.
    """
    markers = tables.markers
    cols = ["step", "iteration_us", "kernels", "host_launches", "gpu_busy_us", "active_span_us"]
    if markers.empty:
        return pd.DataFrame(columns=cols)
    ops = tables.gpu_ops
    launch_ts = tables.host_calls.drop_duplicates("correlation").set_index("correlation")["ts"]
    anchor = ops["correlation"].map(launch_ts).fillna(ops["ts"]).to_numpy()
    # Markers are sorted and do not overlap; searchsorted finds the one each anchor lies in.
    idx = np.searchsorted(markers["ts"].to_numpy(), anchor, side="right") - 1
    inside = (idx >= 0) & (anchor < markers["end"].to_numpy()[np.clip(idx, 0, None)])
    # The ops of each marker, by one stable sort of the markers' numbers (not a pass over all ops per marker).
    held = np.flatnonzero(inside)
    held = held[np.argsort(idx[held], kind="stable")]
    bounds = np.searchsorted(idx[held], np.arange(len(markers) + 1))
    ts, end, correlation = (ops[c].to_numpy() for c in ("ts", "end", "correlation"))
    is_kernel = (ops["kind"] == "kernel").to_numpy()
    rows = []
    for i, m in enumerate(markers.itertuples()):
        sel = held[bounds[i]:bounds[i + 1]]   # positions, in table (ts) order
        busy, _, _ = busy_and_gaps(ts[sel], end[sel])
        launched = correlation[sel]
        rows.append({
            "step": int(m.step), "iteration_us": float(m.dur),
            "kernels": int(is_kernel[sel].sum()),
            "host_launches": launch_count(launched),
            "gpu_busy_us": busy,
            "active_span_us": float(end[sel].max() - ts[sel].min()) if len(sel) else 0.0,
        })
    return pd.DataFrame(rows, columns=cols)


def step_utilization(tables: EventTables) -> float:
    """Kernel busy time within the step window over the window: the figure
    TensorBoard's profiler plugin shows as "GPU Utilization".

    The window starts at the first ProfilerStep marker (or the first CPU op)
    and ends at the last marker's end (or last CPU op's end) or the end of the
    last kernel, whichever is later (torch_tb_profiler/profiler/event_parser.py,
    ``_update_steps_duration``; gpu_metrics_parser.py,
    ``calculate_gpu_utilization``). Unlike our ``utilization`` it counts only
    kernels (no memcpy/memset) and includes the host's lead before the first
    kernel. TensorBoard's own window differs at its end (it closes with the last
    step's last kernel, and leaves out kernels it cannot tie to a step, such as
    CUDA-graph replays): tests/crosscheck/test_tensorboard.py shows how, and
    that given its window our busy time gives its figure exactly. NaN without
    kernels.
    """
    gpu, cpu = tables.gpu_ops, tables.cpu_ops
    is_kernel = (gpu["kind"] == "kernel").to_numpy()
    in_window = cpu["cat"].isin(["cpu_op", "python_function"]).to_numpy()   # (masks: no copies of the frames)
    if not is_kernel.any() or (not in_window.any() and tables.markers.empty):
        return math.nan
    k_ts, k_end = gpu["ts"].to_numpy()[is_kernel], gpu["end"].to_numpy()[is_kernel]
    if len(tables.markers):
        start, last = tables.markers["ts"].min(), tables.markers["end"].max()
    else:
        start = np.min(cpu["ts"].to_numpy(), where=in_window, initial=np.inf)
        last = np.max(cpu["end"].to_numpy(), where=in_window, initial=-np.inf)
    start, end = float(start), max(float(last), float(k_end.max()))
    s, e = union(np.clip(k_ts, start, end), np.clip(k_end, start, end))
    return float((e - s).sum() / (end - start)) if end > start else math.nan


def _cpu_busy(tables: EventTables) -> float:
    """Time (µs) in which at least one CPU op ran, on any thread (union of cpu_op intervals)."""
    cpu = tables.cpu_ops
    ts, end = cpu["ts"].to_numpy(), cpu["end"].to_numpy()
    is_op = (cpu["cat"] == "cpu_op").to_numpy()
    if not is_op.all():
        ts, end = ts[is_op], end[is_op]
    s, e = union(ts, end)
    return float((e - s).sum())


def summarize(tables: EventTables, iterations: int | None = None) -> dict:
    """The headline row of one trace.

    Args:
        tables: the trace's event tables.
        iterations: iterations the profiled window holds, used when the trace
            has no iteration markers (the runner records it in run.json).

    Returns:
        A flat dict: kernels, gpu_ops, memcpys, memsets, host_launches,
        gpu_busy_us, active_span_us, idle_us, idle_gaps, utilization,
        mean_kernel_us, iterations, kernels_per_iter, launches_per_iter,
        busy_per_iter_us, idle_per_iter_us, iteration_ms (mean marker length),
        step_utilization (TensorBoard's "GPU Utilization"), cpu_ops,
        cpu_op_busy_us (time any CPU op ran, all threads), cpu_op_busy_per_iter_us,
        source ("pytorch" or "onnxruntime"), has_gpu. Sums run over all devices; utilization is
        total busy over total span. Without GPU activity (``has_gpu`` False) every GPU count and
        time, per iteration too, is NaN (n/a), not 0.
    """
    dev = per_device(tables)
    ops = tables.gpu_ops
    kernel_dur = ops["dur"][ops["kind"] == "kernel"]
    n_iter = len(tables.markers) or iterations
    row = {
        "kernels": len(kernel_dur),
        "gpu_ops": len(ops),
        "memcpys": int((ops["kind"] == "memcpy").sum()),
        "memsets": int((ops["kind"] == "memset").sum()),
        # unknown (not 0 or 1) when no GPU op carries a correlation id
        "host_launches": int(ops.loc[ops["correlation"] >= 0, "correlation"].nunique())
        if not len(ops) or (ops["correlation"] >= 0).any() else math.nan,
        "gpu_busy_us": float(dev["gpu_busy_us"].sum()),
        "active_span_us": float(dev["active_span_us"].sum()),
        "idle_us": float(dev["idle_us"].sum()),
        "idle_gaps": int(dev["idle_gaps"].sum()),
        "mean_kernel_us": float(kernel_dur.mean()) if len(kernel_dur) else math.nan,
        "iterations": n_iter or math.nan,
        "iteration_ms": float(tables.markers["dur"].mean()) / 1e3 if len(tables.markers) else math.nan,
        "cpu_ops": int((tables.cpu_ops["cat"] == "cpu_op").sum()),
        "cpu_op_busy_us": _cpu_busy(tables),
        "source": tables.meta.get("source", "pytorch"),
        "step_utilization": step_utilization(tables),
        "has_gpu": tables.has_gpu,
    }
    if not tables.has_gpu:  # no GPU timeline: its counts and times are undefined (n/a: NaN, empty in CSV), not zero
        row.update(dict.fromkeys(("kernels", "gpu_ops", "memcpys", "memsets", "host_launches", "gpu_busy_us",
                                  "active_span_us", "idle_us", "idle_gaps"), math.nan))
    span = row["active_span_us"]
    row["utilization"] = row["gpu_busy_us"] / span if span > 0 else math.nan
    per = (lambda v: v / n_iter) if n_iter else (lambda v: math.nan)
    row["kernels_per_iter"] = per(row["kernels"])
    row["launches_per_iter"] = per(row["host_launches"])
    row["busy_per_iter_us"] = per(row["gpu_busy_us"])
    row["cpu_op_busy_per_iter_us"] = per(row["cpu_op_busy_us"])
    row["idle_per_iter_us"] = per(row["idle_us"])
    return row


@register("summary", reads=("gpu_ops", "cpu_ops", "markers", "meta"), order=0, required=True, columns={
    "kernels": "count", "gpu_ops": "count", "memcpys": "count", "memsets": "count", "host_launches": "count",
    "gpu_busy_us": "µs", "active_span_us": "µs", "idle_us": "µs", "idle_gaps": "count", "mean_kernel_us": "µs",
    "iterations": "count", "iteration_ms": "ms", "cpu_ops": "count", "cpu_op_busy_us": "µs", "source": "",
    "step_utilization": "share", "has_gpu": "", "utilization": "share", "kernels_per_iter": "count",
    "launches_per_iter": "count", "busy_per_iter_us": "µs", "cpu_op_busy_per_iter_us": "µs", "idle_per_iter_us": "µs"})
def _summary_analysis(x: Inputs) -> Output:
    """The headline row every analysis reads; its failure is the trace's."""
    return Output(row=summarize(x.tables, x.iterations))


@register("iterations", reads=("gpu_ops", "host_calls", "cpu_ops", "markers"), uses=("idle", "launches"), order=40,
          columns={"iteration_busy_us": "µs"}, tables=("iterations",))
def _iterations_analysis(x: Inputs) -> Output:
    """Per marked iteration (:func:`per_iteration`), with its idle by cause and its dispatch
    (:func:`tracekit.analysis.metrics.launches.dispatch_per_iteration`) where those stand; and a
    typical iteration's GPU work (median busy µs), for the verdict's unprofiled check."""
    per_iter, row = per_iteration(x.tables), {}
    if len(per_iter) and x.tables.has_gpu:
        row["iteration_busy_us"] = float(per_iter["gpu_busy_us"].median())
    if len(per_iter) and x["idle"] is not None and x["launches"] is not None:
        by_iter = idle.breakdown(x["idle"], ["iteration"]).rename(columns={"iteration": "step"})
        per_iter = (per_iter.merge(by_iter.drop(columns=["idle_us", "idle_gaps"]), on="step", how="left")
                    .merge(launches.dispatch_per_iteration(x.tables, x["launches"]), on="step", how="left")
                    .fillna({c: 0 for c in by_iter.columns if c != "step"}))
    return Output(row=row, tables={"iterations": per_iter})


@register("devices", reads=("gpu_ops",), needs=("idle",), order=45, tables=("devices",))
def _devices_analysis(x: Inputs) -> Output:
    """Per device: :func:`per_device` with its idle by cause."""
    devices = per_device(x.tables)
    if len(devices):
        devices = devices.merge(idle.breakdown(x["idle"], ["device"]).drop(columns=["idle_us", "idle_gaps"]),
                                on="device", how="left").fillna(0)
    return Output(tables={"devices": devices})

"""Host launches and dispatch: who enqueues GPU work, how fast, and at what CPU cost.

A launch is a host API call whose correlation id a GPU op carries (CUPTI gives
the call and its GPU activity the same correlation id; Kineto writes it in
``args.correlation`` of both). A ``cudaGraphLaunch`` is one launch of many ops.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracekit.analysis.metrics.idle import SYNC_CALLS, launch_index
from tracekit.analysis.metrics.intervals import union
from tracekit.analysis.registry import Inputs, Output, register
from tracekit.trace.reader import EventTables

# A "short kernel" runs for less time than it takes the host to launch one: the
# threshold is the analyzers issue's (10 µs); on the real H100 eager traces a
# launch call costs the host 5-10 µs (launch_cpu_us_mean), so such kernels
# finish before the next launch can arrive.
SHORT_KERNEL_US = 10.0


def launch_table(tables: EventTables) -> pd.DataFrame:
    """One row per launch: correlation, api (name of the call), ts, cpu_us (the call's
    duration, µs), gpu_ops (ops it enqueued), kernels, gpu_us (sum of their
    durations), first_start (µs), latency_us (first op start - call start)."""
    gpu = tables.gpu_ops
    ops = pd.DataFrame({"correlation": gpu["correlation"].to_numpy(), "dur": gpu["dur"].to_numpy(),
                        "ts": gpu["ts"].to_numpy(), "is_kernel": (gpu["kind"] == "kernel").to_numpy(np.int64)},
                       copy=False)   # the four columns it needs, not a copy of the frame
    if not (launched := ops["correlation"].to_numpy() >= 0).all():
        ops = ops[launched]
    per = ops.groupby("correlation").agg(gpu_ops=("dur", "size"), gpu_us=("dur", "sum"),
                                         first_start=("ts", "min"), kernels=("is_kernel", "sum"))
    calls = launch_index(tables)   # the first call of each correlation id, as drop_duplicates keeps
    out = per.join(calls[["name", "ts", "dur"]], how="inner").rename(columns={"name": "api", "dur": "cpu_us"})
    out["latency_us"] = out["first_start"] - out["ts"]
    return out.reset_index().sort_values("ts").reset_index(drop=True)


def by_api(launches: pd.DataFrame, iterations: float) -> pd.DataFrame:
    """Launches per API: api, launches, launches_per_iter, gpu_ops_per_launch,
    kernels_per_launch, cpu_us_mean (µs per call), cpu_us_total,
    latency_p50_us, latency_p90_us, latency_p99_us (call start to first op start)."""
    if launches.empty:
        return pd.DataFrame(columns=["api", "launches", "launches_per_iter", "gpu_ops_per_launch",
                                     "kernels_per_launch", "cpu_us_mean", "cpu_us_total", "latency_p50_us",
                                     "latency_p90_us", "latency_p99_us"])
    g = launches.groupby("api")
    out = pd.DataFrame({
        "launches": g.size(), "gpu_ops_per_launch": g["gpu_ops"].mean(), "kernels_per_launch": g["kernels"].mean(),
        "cpu_us_mean": g["cpu_us"].mean(), "cpu_us_total": g["cpu_us"].sum(),
        **{f"latency_p{p}_us": g["latency_us"].quantile(p / 100) for p in (50, 90, 99)}})
    out.insert(1, "launches_per_iter", out["launches"] / iterations if iterations else math.nan)
    return out.reset_index().sort_values("launches", ascending=False).reset_index(drop=True)


def dispatch_per_iteration(tables: EventTables, launches: pd.DataFrame) -> pd.DataFrame:
    """Per marked iteration: step, first_launch_after_us (iteration start to its first
    launch call), framework_cpu_before_first_launch_us (time inside top-level CPU
    ops, i.e. framework code such as aten dispatch or TorchDynamo's guard
    checks, before that first launch). Empty without markers."""
    m = tables.markers
    cols = ["step", "first_launch_after_us", "framework_cpu_before_first_launch_us"]
    if m.empty:
        return pd.DataFrame(columns=cols)
    ops = tables.cpu_ops.loc[tables.cpu_ops["cat"] == "cpu_op", ["ts", "end"]]
    lts = launches["ts"].to_numpy()
    rows = []
    for step, start, end in m[["step", "ts", "end"]].itertuples(index=False):
        inside = lts[(lts >= start) & (lts < end)]
        first = inside.min() if len(inside) else math.nan
        limit = first if len(inside) else end
        win = ops[(ops["end"] > start) & (ops["ts"] < limit)]
        # nested ops (aten::linear > aten::addmm) count once: the union of their intervals
        s, e = union(np.maximum(win["ts"].to_numpy(), start), np.minimum(win["end"].to_numpy(), limit))
        rows.append((int(step), first - start, float((e - s).sum())))
    return pd.DataFrame(rows, columns=cols)


def _feed_interval(tables: EventTables, launch_ts: np.ndarray) -> float:
    """Mean µs between consecutive launch calls, not counting the time the host was
    blocked in a synchronizing call (``idle.SYNC_CALLS``) between the first and the
    last launch.

    A loop that synchronizes every iteration (``loss.item()``) waits there for the
    GPU, and that wait would otherwise stretch the interval to the GPU's pace: a
    GPU-bound run would seem to feed only as fast as the GPU drains.
    """
    first, last = launch_ts.min(), launch_ts.max()
    calls = tables.host_calls[tables.host_calls["name"].isin(SYNC_CALLS)]
    s, e = union(np.clip(calls["ts"].to_numpy(), first, last), np.clip(calls["end"].to_numpy(), first, last))
    return float((last - first - (e - s).sum()) / (len(launch_ts) - 1))


def summary(tables: EventTables, launches: pd.DataFrame) -> dict:
    """Launch and dispatch metrics of a run (a flat dict, units in the names).

    launch_latency_p50/p90/p99_us: launch call start to its first GPU op's start.
    launch_cpu_us_mean: CPU time of one launch call. kernels_per_launch.
    launch_interval_us: mean time between consecutive launch calls, less the
    time the host sat blocked in synchronizing calls (the host's feed rate, see
    :func:`_feed_interval`). gpu_us_per_launch: GPU work one launch brings.
    feed_ratio = gpu_us_per_launch / launch_interval_us: below 1 the GPU
    finishes each launch's work before the next arrives (the host cannot keep up).
    short_kernels, short_kernel_share (of kernels), short_kernel_time_share (of
    kernel time): kernels under ``SHORT_KERNEL_US`` (NaN without GPU activity).
    """
    kernels = tables.gpu_ops[tables.gpu_ops["kind"] == "kernel"]
    lat = launches["latency_us"].to_numpy()
    n = len(launches)
    interval = _feed_interval(tables, launches["ts"].to_numpy()) if n > 1 else math.nan
    per_launch = float(launches["gpu_us"].mean()) if n else math.nan
    short = kernels["dur"] < SHORT_KERNEL_US
    q = (lambda p: float(np.percentile(lat, p))) if n else (lambda p: math.nan)
    return {
        "launch_latency_p50_us": q(50), "launch_latency_p90_us": q(90), "launch_latency_p99_us": q(99),
        "launch_cpu_us_mean": float(launches["cpu_us"].mean()) if n else math.nan,
        "kernels_per_launch": float(launches["kernels"].sum() / n) if n else math.nan,
        "launch_interval_us": interval,
        "gpu_us_per_launch": per_launch,
        "feed_ratio": per_launch / interval if n > 1 and interval > 0 else math.nan,
        "short_kernels": int(short.sum()) if tables.has_gpu else math.nan,
        "short_kernel_share": float(short.mean()) if len(kernels) else math.nan,
        "short_kernel_time_share": float(kernels.loc[short, "dur"].sum() / kernels["dur"].sum())
        if len(kernels) and kernels["dur"].sum() > 0 else math.nan,
    }


@register("launches", reads=("gpu_ops", "host_calls"), order=30, tables=("launch_apis",), columns={
    "launch_latency_p50_us": "µs", "launch_latency_p90_us": "µs", "launch_latency_p99_us": "µs",
    "launch_cpu_us_mean": "µs", "kernels_per_launch": "count", "launch_interval_us": "µs", "gpu_us_per_launch": "µs",
    "feed_ratio": "ratio", "short_kernels": "count", "short_kernel_share": "share", "short_kernel_time_share": "share"})
def _launches_analysis(x: Inputs) -> Output:
    """The launch metrics of the row (:func:`summary`), launches per API; the launch table
    (:func:`launch_table`) for the analyses that need it."""
    launches = launch_table(x.tables)
    return Output(row=summary(x.tables, launches), tables={"launch_apis": by_api(launches, x.row["iterations"])},
                  value=launches)

"""GPU idle time by cause: is the GPU waiting for the host (launch-bound) or not?

An idle gap is a stretch of a device's active span with no GPU op (kernel,
memcpy, memset) on any of its streams; per stream, a gap between consecutive
ops of that stream. Each gap ends when a next op N starts; N was enqueued by a
launch call L on the host (found by correlation id; for an op replayed by a
CUDA graph, L is the ``cudaGraphLaunch``). The gap's cause, checked in order:

1. ``other``: N has no launch call in the trace (nothing to blame).

L started after the GPU went idle (the host had not even begun to issue N):

2. ``sync``: the thread that launches N was blocked in a synchronizing call
   when the GPU went idle (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
   ``cudaEventSynchronize``, blocking ``cudaMemcpy``...), **until that call
   returned** (back-to-back or nested syncs of the thread count as one). From
   then on the host was free, and the rest of the gap is classified by these
   same rules as a gap of its own that starts at the return: usually
   ``host_wait`` (the host then took that long to issue N), ``launch_latency``
   or ``other`` where N was already queued. Such a gap is two rows of
   :func:`gaps`. A sync on another thread holds nothing back.
3. ``host_wait``: otherwise. The GPU waits for the CPU; this is the time launch
   overhead costs and a CUDA graph could recover.

L was issued before the gap (the op was queued):

4. ``launch_latency``: the gap is shorter than ``LAUNCH_LATENCY_MAX_US``: the
   fixed cost between back-to-back kernels.
5. ``sync``: the gap is longer and N's stream was in a synchronization when
   the GPU went idle: a Kineto ``cuda_sync`` event (CUPTI's synchronization
   record: Stream Wait Event, Stream Sync, Event Sync on N's stream, or a
   Context Sync of the device) covers the gap's start.
6. ``other``: the op waited on something else (a dependency, an event the
   trace does not show).

Rules 3-5 are HolisticTraceAnalysis' idle-time breakdown (``host_wait``,
``kernel_wait``, ``other`` in hta/analyzers/breakdown_analysis.py,
``_analyze_idle_time_for_stream``, with its default
``consecutive_kernel_delay`` of 30 µs). Where we differ and why:

* HTA works per stream only; we also classify the device's gaps (streams
  merged), since a gap on one stream while another computes is no idle GPU.
  Per-stream results are given too, for comparison with HTA.
* HTA has no sync cause: a gap behind a ``cudaDeviceSynchronize`` is
  ``host_wait`` there (the launch came after the gap began). Counting the
  time the host sat blocked as host wait would promise that CUDA graphs
  recover it; they do not. The time after the call returned is host wait for
  both. (Before issue 17 tracekit called the whole gap sync: on the HTA alexnet
  fixture 24.5 ms of sync, of which the host was blocked 0.09 ms.)
* HTA takes every event with a ``stream`` arg as GPU work: kernels, memcpys and
  memsets, but also Kineto's ``cuda_sync`` waits and Inductor's ``cpu_op``
  records of Triton launches (they carry their stream). We take kernels,
  memcpys and memsets only: a sync is a wait, a cpu_op host time.
* A short gap before an op without a launch call is ``kernel_wait`` for HTA
  (the missing launch time compares as false); for us it is ``other``: no
  launch, nothing to blame.
* HTA rounds timestamps inward to whole µs by default; we keep Kineto's float µs.

tests/crosscheck/test_hta.py shows that with these differences accounted for,
the figures are HTA's to the last µs on every real fixture.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.metrics.intervals import union
from tracekit.analysis.registry import Inputs, Output, register
from tracekit.trace.reader import EventTables

# HTA's default consecutive_kernel_delay (hta/trace_analysis.py, get_idle_time_breakdown).
LAUNCH_LATENCY_MAX_US = 30.0
CAUSES = ("host_wait", "launch_latency", "sync", "other")
# Host calls that block the calling thread until GPU work completes (CUDA runtime
# and driver API documentation: "synchronous with respect to the host").
SYNC_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpyDtoH_v2", "cuMemcpyHtoD_v2",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
})
# Gap-length histogram edges (µs).
HIST_EDGES_US = (0, 1, 2, 5, 10, 20, 50, 100, 1000, np.inf)
# The columns of breakdown(): idle time (µs) and gaps of each cause, and their totals; of the run row, the shares.
BREAKDOWN = [m for c in CAUSES for m in (f"idle_{c}_us", f"gaps_{c}")] + ["idle_us", "idle_gaps"]
SHARES = {f"idle_{c}_share": "share" for c in CAUSES}   # of the active span (0..1)


def launch_index(tables: EventTables) -> pd.DataFrame:
    """The launch calls (rows of ``tables.host_calls``: name, ts and dur in µs, pid, tid...)
    indexed by correlation id, the first call of each id; the ``correlation`` column is kept.
    Computed once per trace: not to be changed in place."""
    def make() -> pd.DataFrame:  # rows dropped only where there are some to drop: no copy otherwise
        calls = tables.host_calls
        if not (known := calls["correlation"] >= 0).all():
            calls = calls[known]
        if (twin := calls["correlation"].duplicated()).any():
            calls = calls[~twin]
        return calls.set_index("correlation", drop=False)
    return tables.memo("launch_index", tables.host_calls, make)


def _covering_end(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each point, the end of the merged intervals (``starts``, ``ends``: syncs of one
    thread, when the host returned from them) the point lies in; NaN where none covers it.
    Back-to-back or nested intervals count as one."""
    out = np.full(len(points), np.nan)
    s, e = union(starts, ends)
    if len(s) == 0:
        return out
    j = np.searchsorted(s, points, side="right") - 1
    covered = (j >= 0) & (e[np.clip(j, 0, None)] >= points)
    out[covered] = e[j[covered]]
    return out


def gaps(tables: EventTables, per_stream: bool = False,
         launch_latency_max_us: float = LAUNCH_LATENCY_MAX_US) -> pd.DataFrame:
    """Every idle gap, classified; a gap split at a sync's return is two rows.

    Args:
        tables: a trace's event tables.
        per_stream: gaps between ops of each stream (HTA's view) instead of
            gaps of the whole device (streams merged).
        launch_latency_max_us: the longest gap still counted as launch latency.

    Returns:
        One row per piece of a gap: gap (the gap's number, so pieces of one gap
        share it), device, stream (-1 for device gaps), start, end, gap_us (µs,
        the piece's length), next_correlation, launch_ts (NaN when not found),
        cause (one of ``CAUSES``), iteration (the step of the marker the next
        op's launch lies in, -1 when outside markers or no markers). A gap is
        one piece, except a gap that began while the launching thread was
        blocked in a synchronizing call and outlasted it: its ``sync`` piece
        ends when the call returned, and the rest is a second piece classified
        by the same rules as if the gap began there (see the module docstring).
    """
    ops = tables.gpu_ops
    cols = ["gap", "device", "stream", "start", "end", "gap_us", "next_correlation", "launch_ts", "cause",
            "iteration"]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    keys = ["device", "stream"] if per_stream else ["device"]
    parts = []
    column = {c: ops[c].to_numpy() for c in ("ts", "end", "correlation", "stream")}  # no copy of the frame per group
    groups = ops.groupby(keys).indices
    for key in sorted(groups):
        rows = groups[key]
        s, e = column["ts"][rows], column["end"][rows]   # ops are sorted by ts
        run_end = np.maximum.accumulate(e)
        idx = np.flatnonzero(s[1:] > run_end[:-1]) + 1       # ops that end a gap
        key = key if isinstance(key, tuple) else (key,)
        parts.append(pd.DataFrame({
            "device": key[0], "stream": key[1] if per_stream else -1,
            "start": run_end[idx - 1], "end": s[idx],
            "next_correlation": column["correlation"][rows[idx]], "next_stream": column["stream"][rows[idx]],
        }))
    g = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)
    del parts, column, groups   # (scratch freed as soon as used: this runs on every GPU op of a trace)
    g["gap"] = np.arange(len(g))
    launch = launch_index(tables)
    call = launch.index.get_indexer(g["next_correlation"].to_numpy())   # each gap's launch call (row), -1: none
    known = np.flatnonzero(call >= 0)
    call = call[known]
    launch_ts = np.full(len(g), np.nan)
    launch_ts[known] = launch["ts"].to_numpy()[call]
    g["launch_ts"] = launch_ts
    start = g["start"].to_numpy()
    # A sync blocks the thread that calls it: it holds back the launches of that thread only,
    # and only until it returns. Threads as codes of the host calls' (pid, tid) categories.
    pids, tids = pd.Categorical(launch["pid"]), pd.Categorical(launch["tid"])
    width = max(len(tids.categories), 1)
    thread = np.full(len(g), -1, dtype=np.int64)
    thread[known] = pids.codes[call].astype(np.int64) * width + tids.codes[call]
    del call, known, launch_ts
    sync_return = np.full(len(g), np.nan)
    calls = tables.host_calls[tables.host_calls["name"].isin(SYNC_CALLS)]
    for (pid, tid), syncs in calls.groupby(["pid", "tid"], observed=True):
        on = thread == pids.categories.get_loc(pid) * width + tids.categories.get_loc(tid)
        sync_return[on] = _covering_end(start[on], syncs["ts"].to_numpy(), syncs["end"].to_numpy())
    launched_late = g["launch_ts"].to_numpy() > start
    blocked = launched_late & (sync_return > start)   # NaN (no sync) compares false
    returned = blocked & (sync_return < g["end"].to_numpy())
    del thread, launched_late
    # The gap's sync piece ends when the call returned; the rest starts there.
    g["_blocked"] = blocked
    if returned.any():
        rest = g[returned].assign(start=sync_return[returned], _blocked=False)
        g.loc[returned, "end"] = sync_return[returned]
        g = pd.concat([g, rest], ignore_index=True)
    del sync_return, blocked
    g["gap_us"] = g["end"] - g["start"]
    start = g["start"].to_numpy()
    # A GPU-side wait holds back its own stream (a Context Sync, every stream of the device).
    gpu_sync = np.zeros(len(g), dtype=bool)
    for (device, stream), on in g.groupby(["device", "next_stream"]).indices.items():
        syncs = tables.syncs[(tables.syncs["device"] == device)
                             & ((tables.syncs["stream"] == stream) | (tables.syncs["name"] == "Context Sync"))]
        gpu_sync[on] = ~np.isnan(_covering_end(start[on], syncs["ts"].to_numpy(), syncs["end"].to_numpy()))
    no_launch = g["launch_ts"].isna().to_numpy()
    launched_late = g["launch_ts"].to_numpy() > start
    short = g["gap_us"].to_numpy() < launch_latency_max_us
    # the first rule that holds; each row refers to one of a few str objects, not a str of its own
    rule = np.select([no_launch, g["_blocked"].to_numpy(), launched_late, short, gpu_sync], np.arange(5), default=5)
    del no_launch, launched_late, short, gpu_sync
    g["cause"] = np.array(["other", "sync", "host_wait", "launch_latency", "sync", "other"], dtype=object)[rule]
    del rule
    g["iteration"] = iteration_of(tables, g["launch_ts"].fillna(g["end"]).to_numpy())
    if returned.any():  # the pieces of a gap together
        g = g.sort_values(["gap", "start"], kind="stable")
    return g[cols].reset_index(drop=True)


def op_iterations(tables: EventTables, ops: pd.DataFrame) -> np.ndarray:
    """The step of each GPU op of ``ops`` (rows of ``tables.gpu_ops``): the marker its
    launch call (by correlation id) lies in, or without a launch call, the marker its
    start falls in; -1 outside all markers."""
    launch_ts = launch_index(tables)["ts"]
    return iteration_of(tables, ops["correlation"].map(launch_ts).fillna(ops["ts"]).to_numpy())


def iteration_of(tables: EventTables, ts: np.ndarray) -> np.ndarray:
    """The step number of the ``ProfilerStep`` marker each timestamp (µs) falls in;
    -1 outside all markers (int64 array, one per timestamp)."""
    m = tables.markers
    if m.empty:
        return np.full(len(ts), -1, dtype=np.int64)
    i = np.searchsorted(m["ts"].to_numpy(), ts, side="right") - 1
    inside = (i >= 0) & (ts < m["end"].to_numpy()[np.clip(i, 0, None)])
    return np.where(inside, m["step"].to_numpy()[np.clip(i, 0, None)], -1)


def breakdown(g: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Idle time and gap count per cause.

    Args:
        g: gaps from :func:`gaps`.
        by: grouping columns (e.g. ["device"], ["device", "stream"], ["iteration"]);
            None for one row over everything.

    Returns:
        One row per group with ``idle_<cause>_us`` and ``gaps_<cause>`` (gaps
        with idle time of that cause) for each cause in ``CAUSES``, plus
        ``idle_us`` and ``idle_gaps`` (totals; a gap split at a sync's return
        counts once in ``idle_gaps``, and in the ``gaps_<cause>`` of each part).
    """
    by = by or []
    if g.empty:  # no gaps: zeros overall, no rows per group
        return pd.DataFrame([dict.fromkeys(BREAKDOWN, 0)]) if not by else pd.DataFrame(columns=by + BREAKDOWN)
    cause = g["cause"].to_numpy(dtype=object)  # codes (a faster pivot), found by comparison, not hashing
    codes = np.select([cause == c for c in CAUSES], np.arange(len(CAUSES)), -1).astype(np.int8)
    keyed = g.assign(_all=0, cause=pd.Categorical.from_codes(codes, categories=CAUSES))
    groups = by or ["_all"]
    # sum and count of each (group, cause) in one grouping (as two pivot tables would, twice as fast)
    agg = keyed.groupby([*groups, "cause"], observed=True)["gap_us"].agg(["sum", "count"])
    time, count = agg["sum"].unstack("cause", fill_value=0.0), agg["count"].unstack("cause", fill_value=0)
    out = pd.DataFrame(index=time.index)
    for c in CAUSES:
        out[f"idle_{c}_us"] = time[c] if c in time else 0.0
        out[f"gaps_{c}"] = count[c].astype(np.int64) if c in count else 0
    out["idle_us"] = out[[f"idle_{c}_us" for c in CAUSES]].sum(axis=1)
    by_group = keyed.groupby(groups, observed=True)["gap"]
    out["idle_gaps"] = (by_group.size() if _whole(g) else by_group.nunique()).astype(np.int64)
    out = out.reset_index()
    return out.drop(columns="_all") if not by else out


def _whole(g: pd.DataFrame) -> bool:
    """True when no gap of :func:`gaps` is in pieces (gap numbers rising strictly): each row is a gap."""
    gap = g["gap"].to_numpy()
    return len(gap) < 2 or bool((gap[1:] > gap[:-1]).all())


def histogram(g: pd.DataFrame) -> pd.DataFrame:
    """Gap-length histogram: one row per (bin, cause) with gaps and idle_us.

    Bins are ``HIST_EDGES_US`` (µs), left-closed: [0, 1), [1, 2), ... [1000, inf),
    of the whole gap's length (both parts of a gap split at a sync's return fall
    in its bin, each under its cause).
    """
    labels = [f"{a:g}-{b:g}" if np.isfinite(b) else f">={a:g}" for a, b in zip(HIST_EDGES_US, HIST_EDGES_US[1:])]
    length = g["gap_us"] if _whole(g) else g.groupby("gap")["gap_us"].transform("sum")
    binned = pd.cut(length, HIST_EDGES_US, right=False, labels=labels)
    h = g.assign(bin_us=binned).groupby(["bin_us", "cause"], observed=False)["gap_us"].agg(["count", "sum"])
    h = h.reset_index().rename(columns={"count": "gaps", "sum": "idle_us"})
    return h[h["cause"].isin(CAUSES)].reset_index(drop=True)


@register("idle", reads=("gpu_ops", "host_calls", "syncs", "markers"), order=20, tables=("streams", "idle_histogram"),
          columns={**{m: "count" if "gaps" in m else "µs" for m in BREAKDOWN}, **SHARES},
          default=Output(row=dict.fromkeys([*BREAKDOWN, *SHARES], np.nan)))
def _idle_analysis(x: Inputs) -> Output:
    """The device's idle breakdown and each cause's share of the active span in the row (NaN without
    GPU ops: no timeline, idle undefined, not zero), the streams' and the gap histogram; the gaps."""
    g, span = gaps(x.tables), x.row["active_span_us"]
    row = breakdown(g).iloc[0].to_dict() if x.tables.has_gpu else dict.fromkeys(BREAKDOWN, np.nan)
    row.update({share: row[f"idle_{c}_us"] / span if span > 0 else np.nan for c, share in zip(CAUSES, SHARES)})
    return Output(row=row, value=g, tables={"streams": breakdown(gaps(x.tables, per_stream=True), ["device", "stream"]),
                                            "idle_histogram": histogram(g) if len(g) else pd.DataFrame()})

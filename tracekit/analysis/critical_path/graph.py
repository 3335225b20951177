"""The dependency graph of a trace: which host call and GPU op waits for which, and by how much.

Nodes are the trace's host API calls (``host_calls``: launches, syncs, the rest of the
CUDA runtime and driver) and GPU ops (kernels, memcpys, memsets). An edge says when a
node can start (or end) at the earliest: ``dst.start >= src.end + lag``. From the trace
alone:

* ``cpu``: the calls of one host thread in order; the lag is the CPU time between them
  (Python, the framework, the ops that dispatch the next launch). A call nested in
  another of its thread is part of it (its GPU ops belong to the outer call).
* ``handoff``: a thread whose gap between two calls holds another thread's calls (of the
  same process, each begun and ended inside the gap) waited for that thread: autograd runs
  backward on its own device thread while the calling thread waits in ``backward()``. The
  gap is then two edges through the other thread's first and last calls, and not CPU time
  of the waiting thread.
* ``launch``: a launch call before its GPU ops: an op starts no earlier than its call's
  end plus the launch latency (on the H100 ViT fixture an idle GPU started a kernel
  1.9 µs, median, after its launch call returned; 8.8 µs after the call began).
* ``stream``: the GPU ops of one (device, stream) in order; the lag is the GPU's gap
  between back-to-back ops.
* ``wait``: a cross-stream wait (``cudaStreamWaitEvent``): the first op launched on the
  waiting stream after the wait starts no earlier than the end of the last op launched on
  the recorded stream before the ``cudaEventRecord`` it waits on (Kineto's ``cuda_sync``
  "Stream Wait Event" names both; HTA's critical path reads them alike). Where the trace has
  no such event, inferred from the ops' times (:mod:`tracekit.analysis.critical_path.inferred_waits`).
* ``sync`` (an *end* edge): a synchronizing call (``cudaDeviceSynchronize``,
  ``cudaStreamSynchronize``, ``cudaEventSynchronize``, a synchronous memcpy) returns no
  earlier than the end of the GPU work it waits for plus the return lag. Without
  ``cuda_sync`` events the stream of a stream or event sync is unknown, and it is taken
  to wait for every stream (said in :attr:`Graph.missing`).
* ``collective`` (an end edge between ranks of a job): a collective kernel ends no
  earlier than the start of the same collective on its last-arriving rank plus the
  transfer (the shortest of the ranks' durations: the last to arrive waits for no one).

Lags come from the observed timestamps. For each node the edge that bound its start in
the trace (the largest of source end plus the trace's typical lag of that kind) keeps its
observed lag; the other edges keep the smaller of the typical and the observed lag. So
re-timing the graph without an edit gives the observed times back (a property the tests
check), and an edit moves each node as far as its other edges allow.

HolisticTraceAnalysis (hta/analyzers/critical_path_analysis.py) builds a graph of the same
kinds of edges; :mod:`tracekit.analysis.critical_path` lists where the two differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path import reasons as why
from tracekit.analysis.critical_path.collective_edges import collective_edges, rank_collectives
from tracekit.analysis.critical_path.gpu_edges import GpuEdges, median_finite
from tracekit.analysis.critical_path.host_idle import idle_us
from tracekit.analysis.critical_path.kinds import COMM, CPU, GPU, HANDOFF, HOST, SYNC
from tracekit.analysis.critical_path.syncs import SyncEdges
from tracekit.analysis.metrics.idle import SYNC_CALLS
from tracekit.analysis.metrics.kernels import kernel_class
from tracekit.trace.reader import EventTables


@dataclass
class Graph:
    """A trace's dependency graph (several ranks' traces give one graph of a job).

    Node arrays (length n: host calls first, then GPU ops, rank by rank): ``kind`` (HOST or
    GPU), ``rank``, ``ts``, ``dur``, ``end`` (observed µs), ``name``, ``klass`` (a GPU op's
    class: :func:`tracekit.analysis.metrics.kernels.kernel_class`, "communication" for collectives; "launch",
    "sync" or "api" for host calls), ``thread`` (host: a number per (rank, pid, tid); GPU:
    -1), ``stream`` (GPU: a number per (rank, device, stream); host: -1), ``launch`` (GPU:
    the node of its launch call, -1 when the trace lacks it), ``row`` (the row in its
    table), ``base`` (the node's own duration when nothing holds its end: ``dur``, less
    for a sync call that waited). Edges (``src``, ``dst``, ``lag`` µs, ``edge_kind``,
    ``at_start``: an end edge from the source's start; ``idle``: µs of a ``cpu`` lag in which the
    thread ran no op, :mod:`~tracekit.analysis.critical_path.host_idle`) as arrays. ``launch_lag_us``,
    ``stream_gap_us`` (NaN where no op queued behind another), ``sync_lag_us``: the typical lags.
    ``missing``: what the trace lacks for a complete graph, a reason each
    (:mod:`~tracekit.analysis.critical_path.reasons`; ``rank``: its rank's, on a job). ``collective``:
    per node, the collective a collective kernel runs (``all_reduce``...:
    :func:`tracekit.analysis.distributed.collectives.collective_name`), "" for the others.
    """

    kind: np.ndarray
    rank: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    end: np.ndarray
    name: np.ndarray
    klass: np.ndarray
    thread: np.ndarray
    stream: np.ndarray
    launch: np.ndarray
    row: np.ndarray
    base: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    lag: np.ndarray
    edge_kind: np.ndarray
    at_start: np.ndarray
    launch_lag_us: float = 0.0
    stream_gap_us: float = 0.0
    sync_lag_us: float = 0.0
    missing: list[dict] = field(default_factory=list)
    collective: np.ndarray | None = None
    idle: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.kind)


class _Builder(SyncEdges, GpuEdges):
    """Collects one rank's nodes and edges; :func:`build` joins the ranks."""

    def __init__(self, tables: EventTables, rank: int, offset: int, threads: int, streams: int):
        self.t, self.rank, self.offset = tables, rank, offset
        self.edges: list[tuple[np.ndarray, ...]] = []
        self.missing: list[dict] = []
        host = tables.host_calls
        host = host[np.isfinite(host["ts"].to_numpy())]
        pid, tid = host["pid"].astype(str).to_numpy(), host["tid"].astype(str).to_numpy()
        thread_key = pd.factorize(pd.Series(pid) + "\0" + pd.Series(tid))[0]
        ts, end = host["ts"].to_numpy(float), host["end"].to_numpy(float)
        # a call starting before the previous call of its thread ends is nested in it: folded into it
        order = np.lexsort((ts, thread_key))
        outer = np.arange(len(host))
        last_end, last, last_thread = -np.inf, -1, -1
        for i in order.tolist():
            if thread_key[i] == last_thread and ts[i] < last_end:
                outer[i] = last
                continue
            last_end, last, last_thread = end[i], i, thread_key[i]
        keep = outer == np.arange(len(host))
        self.host_rows = np.flatnonzero(keep)
        self.host = host.iloc[self.host_rows]
        self.process = pd.factorize(pd.Series(pid[keep]))[0]
        self.thread = pd.factorize(thread_key[keep])[0] + threads
        # correlation -> host node (the outer call of a nested one)
        corr = host["correlation"].to_numpy()
        new_index = np.full(len(host), -1)
        new_index[self.host_rows] = np.arange(len(self.host_rows))
        known = corr >= 0
        self.call_of = dict(zip(corr[known][::-1].tolist(), new_index[outer[known]][::-1].tolist()))
        gpu = tables.gpu_ops
        self.gpu = gpu
        self.stream = pd.factorize(gpu["device"].astype(str) + ":" + gpu["stream"].astype(str))[0] + streams
        self.n_host = len(self.host)

    # --- nodes -------------------------------------------------------------------------------
    def nodes(self) -> dict[str, np.ndarray]:
        host, gpu, n_host = self.host, self.gpu, self.n_host
        launch = np.array([self.call_of.get(c, -1) for c in gpu["correlation"].tolist()], dtype=np.int64)
        self.launch_local = launch
        launches = np.zeros(n_host, dtype=bool)
        launches[launch[launch >= 0]] = True
        names = host["name"].astype(str).to_numpy()
        self.sync_call = np.isin(names, list(SYNC_CALLS))
        klass = np.where(launches, "launch", np.where(self.sync_call, "sync", "api")).astype(object)
        gnames = gpu["name"].astype(str).to_numpy()
        gkind = gpu["kind"].astype(str).to_numpy()
        labels = {(nm, k): kernel_class(nm, k) for nm, k in set(zip(gnames.tolist(), gkind.tolist()))}
        gclass = self.gclass = np.array([labels[key] for key in zip(gnames.tolist(), gkind.tolist())], dtype=object)
        n_gpu = len(gpu)
        return {
            "kind": np.r_[np.full(n_host, HOST, np.int8), np.full(n_gpu, GPU, np.int8)],
            "rank": np.full(n_host + n_gpu, self.rank, np.int32),
            "ts": np.r_[host["ts"].to_numpy(float), gpu["ts"].to_numpy(float)],
            "dur": np.r_[host["dur"].to_numpy(float), gpu["dur"].to_numpy(float)],
            "end": np.r_[host["end"].to_numpy(float), gpu["end"].to_numpy(float)],
            "name": np.r_[names.astype(object), gnames.astype(object)],
            "klass": np.r_[klass, gclass],
            "thread": np.r_[self.thread, np.full(n_gpu, -1)],
            "stream": np.r_[np.full(n_host, -1), self.stream],
            "launch": np.r_[np.full(n_host, -1), np.where(launch >= 0, launch + self.offset, -1)],
            "row": np.r_[self.host_rows, np.arange(n_gpu)],
        }

    def add(self, src, dst, lag, kind, at_start=False, idle=0.0) -> None:
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        if len(src):
            self.edges.append((src + self.offset, dst + self.offset, np.asarray(lag, dtype=float),
                               np.full(len(src), kind, np.int8), np.broadcast_to(at_start, len(src)).copy(),
                               np.broadcast_to(np.asarray(idle, dtype=float), len(src)).copy()))

    # --- host edges ----------------------------------------------------------------------------
    def host_edges(self) -> None:
        ts, end = self.host["ts"].to_numpy(float), self.host["end"].to_numpy(float)
        order = np.lexsort((ts, self.thread))
        same = self.thread[order][1:] == self.thread[order][:-1]
        a, b = order[:-1][same], order[1:][same]
        gap = ts[b] - end[a]
        # handoffs: calls of another thread of the same process inside the gap a -> b
        by_ts = np.argsort(ts, kind="stable")
        sorted_ts = ts[by_ts]
        lo = np.searchsorted(sorted_ts, end[a], side="right")
        hi = np.searchsorted(sorted_ts, ts[b], side="left")
        inside = hi > lo
        handed = np.zeros(len(a), dtype=bool)
        first_other, last_other = [], []
        for j in np.flatnonzero(inside).tolist():
            others = by_ts[lo[j]:hi[j]]
            others = others[(self.process[others] == self.process[a[j]]) & (self.thread[others] != self.thread[a[j]])
                            & (end[others] <= ts[b[j]])]
            if len(others):
                handed[j] = True
                first_other.append(others[0])
                last_other.append(others[np.argmax(end[others])])
        pid, tid = self.host["pid"].to_numpy(), self.host["tid"].to_numpy()
        idle = idle_us(self.t.cpu_ops, pid[a], tid[a], end[a], ts[b])
        self.add(a, b, np.where(handed, 0.0, gap), CPU, idle=np.where(handed, 0.0, idle))
        fo = np.array(first_other, dtype=np.int64)
        if handed.any():
            lo_ = np.array(last_other)
            self.add(a[handed], fo, np.maximum(ts[fo] - end[a[handed]], 0), HANDOFF)
            self.add(lo_, b[handed], np.maximum(ts[b[handed]] - end[lo_], 0), HANDOFF)
        self.thread_starts(order[np.r_[True, ~same]] if len(order) else order, fo, by_ts, ts, end)

    def thread_starts(self, firsts: np.ndarray, handed_to: np.ndarray, by_ts: np.ndarray, ts: np.ndarray,
                      end: np.ndarray) -> None:
        """A ``handoff`` edge into each thread's first call that no handoff reaches (a thread that
        starts in the window: autograd's, a communication hook's), from the call of another thread
        of its process begun last before it: its lag the observed CPU time between them (from that
        call's start where it had not returned yet), so that the thread starts where the trace
        has it relative to the others and moves with them when host time is re-timed, instead of
        staying at its traced timestamp. ``by_ts``: the calls in the order of their start ``ts``."""
        firsts = firsts[~np.isin(firsts, handed_to)]
        position = np.empty(len(by_ts), dtype=np.int64)
        position[by_ts] = np.arange(len(by_ts))
        src, dst = [], []
        for f in firsts.tolist():
            for k in range(position[f] - 1, -1, -1):
                p = int(by_ts[k])
                if self.thread[p] != self.thread[f] and self.process[p] == self.process[f]:
                    src.append(p)
                    dst.append(f)
                    break
        if not src:
            return
        src, dst = np.array(src), np.array(dst)
        returned = end[src] <= ts[dst]
        self.add(src[returned], dst[returned], ts[dst[returned]] - end[src[returned]], HANDOFF)
        self.add(src[~returned], dst[~returned], ts[dst[~returned]] - ts[src[~returned]], HANDOFF, at_start=True)



def build(ranks: list[tuple[int, EventTables]]) -> Graph:
    """The dependency graph of one trace, or of a job's per-rank traces.

    Args:
        ranks: (rank, tables) per trace (rank 0 for a single trace).

    Returns:
        A :class:`Graph`; its ``missing`` lists what the traces lack for a complete graph.
    """
    parts, edges, missing = [], [], []
    syncs = []
    offset = threads = streams = 0
    lags = {"launch": [], "stream": [], "sync": []}
    calls = []
    for rank, tables in ranks:
        b = _Builder(tables, rank, offset, threads, streams)
        nodes = b.nodes()
        b.host_edges()
        b.index_streams()
        b.gpu_edges(b.wait_pairs())
        b.host_syncs()
        parts.append(nodes)
        edges.extend(b.edges)
        missing.extend({**m, "rank": rank} if len(ranks) > 1 else m for m in b.missing)
        syncs.append((b.sync_src + offset, b.sync_dst + offset))
        lags["launch"].append(b.launch_lag_us)
        lags["stream"].append(b.stream_gap_us)
        if (b.gclass == COMM).any():
            calls.append(rank_collectives(tables, offset + b.n_host).assign(rank=rank))
        offset += len(nodes["kind"])
        threads = int(nodes["thread"].max()) + 1 if b.n_host else threads
        streams = int(nodes["stream"].max()) + 1 if len(b.gpu) else streams
    node = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {}
    n = len(node.get("kind", []))
    base = node["dur"].copy() if n else np.zeros(0)
    # host syncs: the binding one (the waited op that ended last, if after the call began) keeps
    # its observed return lag; the call's own duration (base) is what is left when it did not wait
    s_src = np.concatenate([s for s, _ in syncs]) if syncs else np.zeros(0, np.int64)
    s_dst = np.concatenate([d for _, d in syncs]) if syncs else np.zeros(0, np.int64)
    observed = node["end"][s_dst] - node["end"][s_src] if len(s_dst) else np.zeros(0)
    waited = node["end"][s_src] > node["ts"][s_dst] if len(s_dst) else np.zeros(0, bool)
    sync_lag = median_finite(observed[waited], 0.0)
    last = pd.Series(node["end"][s_src]).groupby(s_dst).transform("max").to_numpy() if len(s_dst) else observed
    binding = waited & (node["end"][s_src] == last)
    s_lag = np.where(binding, observed, np.minimum(sync_lag, observed))
    idle_dur = node["dur"][s_dst][~waited] if len(s_dst) else np.zeros(0)
    own = min(median_finite(idle_dur, sync_lag), sync_lag) if len(idle_dur) else sync_lag
    for d in np.unique(s_dst[binding]).tolist():
        base[d] = min(base[d], own)
    edges.append((s_src, s_dst, s_lag, np.full(len(s_src), SYNC, np.int8), np.zeros(len(s_src), bool),
                  np.zeros(len(s_src))))
    if len(ranks) > 1:
        edges.append(collective_edges(calls, node, base))
        if not calls:
            missing.append({"code": why.NO_COLLECTIVES})
    collective = np.full(n, "", dtype=object)
    for c in calls:
        collective[c["node"].to_numpy(np.int64)] = c["collective"].to_numpy(dtype=object)
    edges = [e for e in edges if len(e[0])]
    cat = [np.concatenate([e[i] for e in edges]) if edges else np.zeros(0) for i in range(6)]
    return Graph(**node, base=base, src=cat[0].astype(np.int64), dst=cat[1].astype(np.int64), lag=cat[2].astype(float),
                 edge_kind=cat[3].astype(np.int8), at_start=cat[4].astype(bool),
                 launch_lag_us=median_finite(np.array(lags["launch"]), 0.0),
                 stream_gap_us=median_finite(np.array(lags["stream"]), np.nan), sync_lag_us=sync_lag, missing=missing,
                 collective=collective, idle=cat[5].astype(float))

"""Re-timing a dependency graph: the earliest time each node can start and end.

Each node starts at the latest of its start edges' ``source end + lag`` (source start for an
edge ``at_start``: a launch call that outlasts its op's start) (or at its
observed start where it has none: the first call of a thread, an op whose launch the trace
lacks) and ends ``base`` later, or at the latest of its end edges' source time plus lag
if that is later (a sync that waits for the GPU, a collective waiting for its last rank).
The edge that set each time is kept: following those edges back from an iteration's last
node gives its critical path (:mod:`tracekit.analysis.critical_path.path`). This is the
longest-path computation of a DAG (what HTA does with ``networkx.dag_longest_path``),
done forward in time order so that an edit (new durations or lags) is one more pass:
the simulation of the Daydream paper (Zhu et al., "Daydream: Accurately Estimating the
Efficacy of Optimizations for DNN Training", USENIX ATC 2020), on a Kineto trace.

Nodes are visited in the order their times were set in the trace (start, or end for a
node with end edges), so that sources are set before the nodes that depend on them. Where
one is not (equal timestamps, clock skew between host and GPU timestamps), the pass is run
again with the times of the last, until nothing changes (``MAX_PASSES`` at most); an edge
whose source was never set is left out and counted in :attr:`Timing.skipped`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Union

import numpy as np

from tracekit.analysis.critical_path.graph import Graph
from tracekit.analysis.critical_path.kinds import CPU, GPU, HANDOFF, HOST

MAX_PASSES = 4


@dataclass
class Timing:
    """Re-timed start and end (µs) of every node, and the edge (index into the graph's edge
    arrays) that set each: ``bind_start`` (-1: the node's observed start), ``bind_end`` (-1:
    start + base). ``skipped``: edges whose source was not yet timed when needed."""

    start: np.ndarray
    end: np.ndarray
    bind_start: np.ndarray
    bind_end: np.ndarray
    skipped: int = 0


# A factor on host time: one for every rank, or one per rank (rank -> factor; 1 for a rank not in it).
Scale = Union[float, Mapping[int, float]]


def rank_factor(scale: Scale, rank: int) -> float:
    """The factor ``scale`` gives ``rank``'s host time."""
    return float(scale.get(rank, 1.0)) if isinstance(scale, Mapping) else float(scale)


def times(scale: Scale, by: float) -> Scale:
    """``scale`` times ``by`` (each rank's factor, where one per rank)."""
    return {r: f * by for r, f in scale.items()} if isinstance(scale, Mapping) else float(scale) * by


def node_factors(g: Graph, scale: Scale) -> np.ndarray:
    """The factor ``scale`` gives each node's rank (an array as long as the graph)."""
    if not isinstance(scale, Mapping):
        return np.full(len(g), float(scale))
    ranks, index = np.unique(g.rank, return_inverse=True)
    return np.array([rank_factor(scale, int(r)) for r in ranks])[index] if len(g) else np.zeros(0)


def host_lags(g: Graph) -> np.ndarray:
    """The edges whose lag is host time (a bool per edge): the CPU time between a thread's calls
    (``cpu``) and across a handoff to another thread (``handoff``)."""
    return (g.edge_kind == CPU) | (g.edge_kind == HANDOFF)


def weights(g: Graph, host_scale: Scale = 1.0, gpu_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(base, lag): node durations and edge lags (µs) with host time (host calls' durations, the
    CPU time between calls) scaled by ``host_scale`` (a factor, or one per rank) and GPU ops'
    durations by ``gpu_scale``; a lag's idle part (``g.idle``: op-free stretches, a sleep,
    :mod:`tracekit.analysis.critical_path.host_idle`) is not scaled."""
    h = node_factors(g, host_scale)
    base = np.where(g.kind == HOST, g.base * h, g.base * gpu_scale)
    idle = np.zeros(len(g.lag)) if g.idle is None else np.minimum(g.idle, g.lag)
    lag = np.where(host_lags(g), idle + (g.lag - idle) * h[g.dst], g.lag)
    return base, lag


def visit_order(g: Graph) -> np.ndarray:
    """Node visits (v for a node's start, v + n for the end of a node with end edges) in the
    order the trace set them."""
    n = len(g)
    has_end = np.zeros(n, dtype=bool)
    is_end = g.edge_kind >= 5
    has_end[g.dst[is_end]] = True
    key = g.ts.copy()
    gpu = g.kind == GPU
    with_launch = gpu & (g.launch >= 0)
    key[with_launch] = np.maximum(key[with_launch], g.end[g.launch[with_launch]])
    for s in np.unique(g.stream[gpu]):   # a stream's ops in order, whatever the launch ends say
        rows = np.flatnonzero(g.stream == s)
        rows = rows[np.argsort(g.ts[rows], kind="stable")]
        key[rows] = np.maximum.accumulate(key[rows])
    ends = np.flatnonzero(has_end)
    keys = np.r_[key, g.end[ends]]
    visits = np.r_[np.arange(n), ends + n]
    return visits[np.lexsort((visits >= n, keys))]


def retime(g: Graph, base: np.ndarray, lag: np.ndarray, order: np.ndarray | None = None,
           removed: np.ndarray | None = None) -> Timing:
    """Earliest start and end of every node of ``g`` with node durations ``base`` and edge
    lags ``lag`` (µs, from :func:`weights` or an edit of them); edges where ``removed`` is
    True are left out. ``order``: :func:`visit_order` (computed when not given)."""
    n = len(g)
    order = visit_order(g) if order is None else order
    keep = np.ones(len(g.src), dtype=bool) if removed is None else ~removed
    is_end = g.edge_kind >= 5
    starts = np.flatnonzero(keep & ~is_end)
    ends = np.flatnonzero(keep & is_end)
    s_edges = starts[np.argsort(g.dst[starts], kind="stable")]
    e_edges = ends[np.argsort(g.dst[ends], kind="stable")]
    s_ptr = np.searchsorted(g.dst[s_edges], np.arange(n + 1)).tolist()
    e_ptr = np.searchsorted(g.dst[e_edges], np.arange(n + 1)).tolist()
    s_src, s_lag, s_id = g.src[s_edges].tolist(), lag[s_edges].tolist(), s_edges.tolist()
    s_start = g.at_start[s_edges].tolist()
    e_src, e_lag, e_id = g.src[e_edges].tolist(), lag[e_edges].tolist(), e_edges.tolist()
    e_start = g.at_start[e_edges].tolist()
    anchor = np.where((g.kind == GPU) & (g.launch < 0), g.ts, -np.inf)
    no_edges = np.diff(np.asarray(s_ptr)) == 0
    anchor[no_edges] = g.ts[no_edges]
    anchor, base_l = anchor.tolist(), base.tolist()
    pending = np.zeros(n, dtype=bool)
    pending[g.dst[ends]] = True   # an end set by end edges is not known before its own visit
    pending = pending.tolist()
    nan = float("nan")
    start, end = [nan] * n, [nan] * n
    bind_s, bind_e = [-1] * n, [-1] * n
    visits = order.tolist()
    for _ in range(MAX_PASSES):
        before = (start[:], end[:])
        skipped = 0
        for v in visits:
            if v < n:
                s, b = anchor[v], -1
                for j in range(s_ptr[v], s_ptr[v + 1]):
                    t = (start[s_src[j]] if s_start[j] else end[s_src[j]]) + s_lag[j]
                    if t > s:
                        s, b = t, s_id[j]
                    elif t != t:
                        skipped += 1
                start[v], bind_s[v] = s, b
                if not pending[v]:
                    end[v] = s + base_l[v]
            else:
                v -= n
                f, b = start[v] + base_l[v], -1
                for j in range(e_ptr[v], e_ptr[v + 1]):
                    u = e_src[j]
                    t = (start[u] if e_start[j] else end[u]) + e_lag[j]
                    if t > f:
                        f, b = t, e_id[j]
                    elif t != t:
                        skipped += 1
                end[v], bind_e[v] = f, b
        if not skipped or (start, end) == before:
            break
    return Timing(np.array(start), np.array(end), np.array(bind_s, dtype=np.int64), np.array(bind_e, dtype=np.int64),
                  skipped)

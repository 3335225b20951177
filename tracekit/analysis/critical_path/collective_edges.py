"""A job's ranks joined at their collectives (:func:`tracekit.analysis.critical_path.graph.build`),
and which collective each collective kernel runs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.kinds import COLLECTIVE
from tracekit.trace.reader import EventTables

# Collectives whose output the compute after them does not read in the same iteration: the
# gradients DDP and FSDP reduce are read by the optimizer step (``overlap-comm`` in
# tracekit.analysis.critical_path.edits). An all_gather's, all_to_all's or broadcast's output is
# the next layer's input.
REDUCTIONS = frozenset({"all_reduce", "reduce_scatter"})


def rank_collectives(tables: EventTables, first_gpu_node: int) -> pd.DataFrame:
    """The collective kernels of one rank (:func:`tracekit.analysis.distributed.collectives.calls`,
    GPU calls only) with ``node``: the graph node of each (``first_gpu_node`` + its row in gpu_ops),
    ``rank`` and ``call`` left for the caller."""
    from tracekit.analysis.distributed import collectives

    c = collectives.calls(tables)
    c = c[c["where"] == "gpu"]
    if c.empty:
        return c.assign(node=pd.Series(dtype=np.int64))
    ops = tables.gpu_ops
    row = {key: i for i, key in enumerate(zip(ops["correlation"].tolist(), ops["ts"].to_numpy(float).tolist()))}
    node = [first_gpu_node + row.get(key, -10**12) for key in zip(c["correlation"].tolist(), c["ts"].tolist())]
    c = c.assign(node=np.array(node, dtype=np.int64))
    return c[c["node"] >= 0]


def collective_edges(frames: list[pd.DataFrame], node: dict, base: np.ndarray) -> tuple:
    """End edges between the ranks' kernels of each collective call matched across them
    (``frames``: :func:`rank_collectives` of each rank, with ``rank``;
    :func:`tracekit.analysis.distributed.stragglers.match`, consistent matches only): a rank's
    kernel ends no earlier than the start of the same call on the last rank to arrive plus the
    transfer (the last rank's duration: it waits for no one). The edge from the last arrival keeps
    its observed lag, the others the smaller of it and the transfer; an earlier rank's own
    duration (``base``, changed in place) becomes what it took after the last arrival, at most
    the transfer. Returns the edges as the graph's builder holds them: (src, dst, lag, edge_kind,
    at_start, idle: 0)."""
    from tracekit.analysis.distributed import stragglers

    frames = [f.assign(call=np.arange(len(f))) for f in frames if len(f)]
    if len(frames) < 2:
        return (np.zeros(0, np.int64),) * 2 + (np.zeros(0), np.zeros(0, np.int8), np.zeros(0, bool), np.zeros(0))
    per_call, _ = stragglers.match(pd.concat(frames, ignore_index=True))
    per_call = per_call[per_call["counted"]]
    src, dst, lag = [], [], []
    for _, grp in per_call.groupby("key"):
        nodes = grp["node"].to_numpy(np.int64)
        last = nodes[np.argmax(node["ts"][nodes])]
        transfer = float(node["dur"][last])
        for v in nodes.tolist():
            if node["end"][v] < node["ts"][last]:   # ended before the last rank arrived: it waited for no one
                continue
            if v != last:
                base[v] = min(base[v], transfer, node["end"][v] - node["ts"][last])
            for u in nodes.tolist():
                if u != v:
                    observed = node["end"][v] - node["ts"][u]
                    src.append(u)
                    dst.append(v)
                    lag.append(observed if u == last else min(transfer, observed))
    n = len(src)
    return (np.array(src, np.int64), np.array(dst, np.int64), np.array(lag, float), np.full(n, COLLECTIVE, np.int8),
            np.ones(n, bool), np.zeros(n))

"""A job's ranks joined at their collectives (:func:`tracekit.analysis.critical_path.graph.build`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.kinds import COLLECTIVE
from tracekit.trace.reader import EventTables


def collective_edges(ranks: list[tuple[int, EventTables]], node: dict, base: np.ndarray, builders: list) -> tuple:
    """End edges between the ranks' kernels of each collective call matched across them
    (:func:`tracekit.analysis.distributed.stragglers.match`, consistent matches only): a rank's kernel ends
    no earlier than the start of the same call on the last rank to arrive plus the transfer (the
    last rank's duration: it waits for no one). The edge from the last arrival keeps its observed
    lag, the others the smaller of it and the transfer; an earlier rank's own duration (base)
    becomes what it took after the last arrival, at most the transfer."""
    from tracekit.analysis.distributed import collectives, stragglers

    frames = []
    for (rank, tables), b in zip(ranks, builders):
        c = collectives.calls(tables)
        c = c[c["where"] == "gpu"]
        if c.empty:
            continue
        gts = tables.gpu_ops["ts"].to_numpy(float)
        row = {(corr, ts): i for i, (corr, ts) in enumerate(zip(tables.gpu_ops["correlation"].tolist(), gts.tolist()))}
        c = c.assign(rank=rank, call=np.arange(len(c)),
                     node=[b.offset + b.n_host + row.get((corr, ts), -10**12) for corr, ts in zip(c["correlation"], c["ts"])])
        frames.append(c[c["node"] >= 0])
    if len(frames) < 2:
        return (np.zeros(0, np.int64),) * 2 + (np.zeros(0), np.zeros(0, np.int8), np.zeros(0, bool))
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
            np.ones(n, bool))

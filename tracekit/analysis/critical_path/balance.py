"""The ``balance-ranks`` edit: each rank's work beyond the other ranks' removed, iteration by iteration
(:mod:`tracekit.analysis.critical_path.edits`).

A rank that does more than the others each iteration (a host that sleeps, a slower input
pipeline, a GPU with more to compute) holds every rank back at the next collective. Balancing
takes that excess away and re-times the job's graph, collectives and all: what the job would take
if no rank did more than the others.

Per iteration and rank, its *host work* is the time of its host calls and the CPU time between
them (the graph's host node durations and ``cpu``/``handoff`` lags between calls of the iteration,
calibrated), its *GPU work*
the time of its GPU ops but collectives (a collective's time is waiting and transfer, which the
re-timing gives). Host work is compared thread by thread (a rank's threads numbered by their
first call: the main thread, autograd's...), GPU work as a whole: a rank's excess in a thread is
its work there less the median of the other ranks' same thread (of two ranks: the other's), where
positive. So one rank's sleep on its main thread is not cancelled by another's slower backward
thread, and a thread that runs on one rank only in an iteration (a watchdog's, whose CPU time
between calls is idle time) is not compared. Ranks of one data-parallel job run the same code, so
a thread's iterations hold the same calls and ops in the same order; then the k-th piece of work
(the k-th call of the thread and the CPU time before it, the k-th GPU op in launch order) is
compared across ranks, and the excess is taken from the pieces that exceed the other ranks'
median piece, in proportion to how much they do (a sleep is taken where it is). Where the ranks'
pieces differ in number (a straggler's extra launches), the rank's pieces of that thread are all
shortened in proportion.

A rank's host that runs the same calls uniformly slower (a slower CPU, a busier core) is not
excess: on a thread whose pieces match the others' (at least :data:`MIN_SPEED_PIECES`), what is
taken is the outliers' excess beyond the rank's own speed (:func:`host_excess`: a sleep, a wait, a
slow call), so a balanced job keeps each host's speed, as the same job without its straggler's delay
does; a slower host is ``--host-faster``'s question. GPU work and threads whose pieces differ in
number are compared in all, as above.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.graph import Graph
from tracekit.analysis.critical_path.kinds import COMM, GPU, HOST
from tracekit.analysis.critical_path.retime import host_lags


def _within(g: Graph, step: np.ndarray) -> np.ndarray:
    """The ``cpu`` and ``handoff`` edges into a host call of an iteration (a bool per edge), the CPU
    time before an iteration's first call included: a straggler's sleep at the top of its forward
    comes before the iteration's first CUDA call, on the edge from the previous iteration's last."""
    return host_lags(g) & (step[g.dst] >= 0)


def _pieces(g: Graph, step: np.ndarray, lag: np.ndarray) -> pd.DataFrame:
    """One row per host node and non-collective GPU op in an iteration: node, rank, step, host
    (bool), thread, order (its thread's place among its rank's threads; -1 for a GPU op), ts (its
    launch call's start for a GPU op) and its incoming CPU time within the iteration (cpu_us)."""
    cpu_in = np.zeros(len(g))
    into = _within(g, step)
    np.add.at(cpu_in, g.dst[into], lag[into])
    host = g.kind == HOST
    work = host | ((g.kind == GPU) & (g.klass != COMM))
    nodes = np.flatnonzero(work)
    launch_ts = np.where((g.kind == GPU) & (g.launch >= 0), g.ts[np.maximum(g.launch, 0)], g.ts)
    frame = pd.DataFrame({"node": nodes, "rank": g.rank[nodes], "step": step[nodes], "host": host[nodes],
                          "thread": g.thread[nodes], "ts": launch_ts[nodes], "cpu_us": cpu_in[nodes]})
    # a thread's order within its rank: by its first call (main thread, then autograd's...)
    first = frame[frame["host"]].groupby(["rank", "thread"])["ts"].min().rename("first").reset_index()
    first["order"] = first.groupby("rank")["first"].rank(method="first").astype(np.int64)
    frame = frame.merge(first[["rank", "thread", "order"]], on=["rank", "thread"], how="left")
    frame["order"] = frame["order"].fillna(0).astype(np.int64).where(frame["host"], -1)
    return frame


MIN_SPEED_PIECES = 10   # a thread's pieces in an iteration from which its host's speed is read
OUTLIER_MADS = 5.0      # a piece this many median absolute deviations beyond the rest is an outlier, not the
                        # host's speed (5 MADs: about 3.4 standard deviations of a normal spread)


def host_excess(work: np.ndarray, typical: np.ndarray) -> np.ndarray | None:
    """What a rank's host does on one thread beyond the other ranks', piece by piece, keeping a host
    that only runs slower.

    Args:
        work: the rank's pieces of work on the thread in an iteration (µs); typical: the other ranks'
            median piece at each place (µs, aligned with ``work``).

    Returns:
        The excess of each piece (µs, ≥ 0): nonzero only on the outliers, the pieces beyond the
        others' by more than :data:`OUTLIER_MADS` median absolute deviations above the median
        difference (a sleep, a wait for data, a slow call), each less the others' piece times the
        host's speed on the rest (its work over theirs there, at least 1: a slower host runs the
        same calls slower, which is not excess; the median and the deviation are untouched by a few
        long pieces). None where the thread has fewer than :data:`MIN_SPEED_PIECES` pieces: too few
        to tell a speed from an outlier.
    """
    if len(work) < MIN_SPEED_PIECES:
        return None
    d = work - typical
    centre = float(np.median(d))
    outlier = d > centre + OUTLIER_MADS * max(float(np.median(np.abs(d - centre))), 1e-9)
    ours, theirs = float(work[~outlier].sum()), float(typical[~outlier].sum())
    speed = max(1.0, ours / theirs) if theirs > 0 else 1.0
    return np.where(outlier, (work - speed * typical).clip(min=0), 0.0)


def balance(g: Graph, step: np.ndarray, base: np.ndarray, lag: np.ndarray) -> pd.DataFrame:
    """Remove each rank's excess host and GPU work per iteration (module docstring), changing
    ``base`` (node durations, µs) and ``lag`` (edge lags, µs) in place.

    Args:
        g: a job's graph; step: each node's iteration (-1 outside every one).
        base, lag: the calibrated weights (:func:`tracekit.analysis.critical_path.retime.weights`,
            after any earlier edit).

    Returns:
        Per (rank, step): host_excess_us and gpu_excess_us (the work taken away, µs) and matched
        (True: piece by piece; False: in proportion, the ranks' iterations differing).
    """
    into = _within(g, step)
    frame = _pieces(g, step, lag)
    frame = frame[frame["step"] >= 0]
    frame["work"] = base[frame["node"].to_numpy()] + frame["cpu_us"]
    scale = np.ones(len(g))
    rows = []
    # a rank's host work is compared thread by thread (the k-th thread by its first call, on every
    # rank): a rank's slower backward thread and another's sleep on its main thread do not cancel, and
    # a thread that runs on one rank only (a watchdog, a profiler's) is not compared: its CPU time
    # between calls is its idle time, not work the others lack
    for (s, host, _), part in frame.groupby(["step", "host", "order"], sort=True):   # order -1: the GPU
        if part["rank"].nunique() < 2:
            continue
        part = part.sort_values(["rank", "ts"], kind="stable")
        part = part.assign(k=part.groupby("rank").cumcount())
        matched = part.groupby("rank").size().nunique() == 1
        table = part.pivot_table(index="rank", columns="k", values="work", aggfunc="sum") if matched else None
        for r, mine in part.groupby("rank"):
            rest = part[part["rank"] != r]
            work = mine["work"].to_numpy()
            typical = table.drop(index=r).median().to_numpy() if matched else None
            pieces = host_excess(work, typical) if matched and host else None
            if pieces is not None:   # a host's outliers, beyond its speed
                excess, over = float(pieces.sum()), pieces
            else:   # the work beyond the others' in all, from the pieces beyond theirs
                excess = float(work.sum() - rest.groupby("rank")["work"].sum().median())
                over = (work - typical).clip(min=0) if matched else None
            if excess <= 0:
                continue
            if matched and over.sum() > 0:   # from the pieces beyond the others', in proportion to how far
                keep = 1 - np.divide(over * min(1.0, excess / over.sum()), work, out=np.zeros(len(work)),
                                     where=work > 0)
            else:
                keep = np.full(len(mine), 1 - excess / float(work.sum()))
            scale[mine["node"].to_numpy()] = keep
            rows.append({"rank": int(r), "step": int(s), "host": bool(host),
                         "excess_us": float((work * (1 - keep)).sum()), "matched": bool(matched)})
    base *= scale
    lag[into] *= scale[g.dst[into]]
    return _summary(rows)


def _summary(rows: list[dict]) -> pd.DataFrame:
    """Per (rank, step): host_excess_us, gpu_excess_us, matched."""
    cols = ["rank", "step", "host_excess_us", "gpu_excess_us", "matched"]
    if not rows:
        return pd.DataFrame(columns=cols)
    t = pd.DataFrame(rows)
    out = t.pivot_table(index=["rank", "step"], columns="host", values="excess_us", aggfunc="sum", fill_value=0.0)
    out = out.reindex(columns=[True, False], fill_value=0.0).set_axis(["host_excess_us", "gpu_excess_us"], axis=1)
    out["matched"] = t.groupby(["rank", "step"])["matched"].all()
    return out.reset_index()[cols]

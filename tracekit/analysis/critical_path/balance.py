"""The ``balance-ranks`` edit: each rank's work beyond the other ranks' removed, iteration by iteration
(:mod:`tracekit.analysis.critical_path.edits`).

A rank that does more than the others each iteration (a host that sleeps, a slower input
pipeline, a GPU with more to compute) holds every rank back at the next collective. Balancing
takes that excess away and re-times the job's graph, collectives and all: what the job would take
if no rank did more than the others.

Per iteration and rank, its *host work* is the time of its host calls and the CPU time before each
(the graph's host node durations and the ``cpu``/``handoff`` lags into the iteration's calls, the
first call's from the previous iteration's last, where a straggler's sleep at the top of its
forward is; calibrated), its *GPU work* the time of its GPU ops but collectives (a collective's
time is waiting and transfer, which the re-timing gives). Host work is compared thread by thread (a
thread with the other ranks' threads that make the same calls: :func:`_thread_orders`), GPU work as a whole,
so one rank's sleep on its main thread is not cancelled by another's slower backward thread, and a
thread that runs on one rank only in an iteration (a watchdog's, whose CPU time between calls is
idle time) is not compared. Ranks of one data-parallel job run the same code, so a thread's
iterations hold the same calls and ops in the same order: the k-th piece of work (the k-th call of
the thread and the CPU time before it, the k-th GPU op in launch order) is compared across ranks.
Where the ranks' pieces differ in number, they are aligned by what they do (the call and the kernel
it launches: :func:`_positions`), and the pieces of a rank that the others lack (a straggler's extra
calls and kernels) are taken whole. Of the pieces every rank has, the excess is the rank's work less
the other ranks' median piece: on the GPU the net excess, taken from the pieces beyond the others'
in proportion to how far; on a host thread of at least :data:`MIN_SPEED_PIECES` pieces the
outliers' excess beyond the rank's own speed (:func:`host_excess`: a sleep, a wait, a slow call),
so that a host that runs the same calls uniformly slower (a slower CPU, a busier core) keeps its
speed, as the same job without its straggler's delay does (a slower host is ``--host-faster``'s
question), and of that only what is beyond the other ranks' median outlier time (every host stalls
now and then: a balanced job keeps its stalls); with fewer pieces, the net excess as on the GPU.
"""

from __future__ import annotations

from difflib import SequenceMatcher

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


def _pieces(g: Graph, step: np.ndarray, lag: np.ndarray, names: np.ndarray) -> pd.DataFrame:
    """One row per host node and non-collective GPU op in an iteration: node, rank, step, host
    (bool), thread, order (its thread's number, the same for the threads of every rank that do the
    same work: :func:`_thread_orders`; -1 for a GPU op), ts (its launch call's start for a GPU op) and
    its incoming CPU time (cpu_us: the lags of :func:`_within`). ``names``: :func:`_piece_names`."""
    cpu_in = np.zeros(len(g))
    into = _within(g, step)
    np.add.at(cpu_in, g.dst[into], lag[into])
    host = g.kind == HOST
    work = host | ((g.kind == GPU) & (g.klass != COMM))
    nodes = np.flatnonzero(work)
    launch_ts = np.where((g.kind == GPU) & (g.launch >= 0), g.ts[np.maximum(g.launch, 0)], g.ts)
    frame = pd.DataFrame({"node": nodes, "rank": g.rank[nodes], "step": step[nodes], "host": host[nodes],
                          "thread": g.thread[nodes], "ts": launch_ts[nodes], "cpu_us": cpu_in[nodes]})
    orders = _thread_orders(frame[frame["host"]], names)
    frame = frame.merge(orders, on=["rank", "thread"], how="left")
    frame["order"] = frame["order"].fillna(0).astype(np.int64).where(frame["host"], -1)
    return frame


def _thread_orders(host: pd.DataFrame, names: np.ndarray) -> pd.DataFrame:
    """Number each rank's host threads so that threads doing the same work share a number (columns
    rank, thread, order). The lowest rank's threads are numbered by their first call (main thread, then
    autograd's...); another rank's thread takes the number of the lowest rank's thread whose calls it
    shares most (the count of calls by name both have), greedily, best pairs first; a thread sharing
    none gets a number of its own, so it is compared with no other. The order of first calls alone
    differs between ranks where a side thread (NCCL's watchdog, a data loader) starts earlier on one."""
    first = host.groupby(["rank", "thread"])["ts"].min().rename("first").reset_index()
    first["order"] = first.groupby("rank")["first"].rank(method="first").astype(np.int64)
    ranks = sorted(first["rank"].unique().tolist())
    if len(ranks) < 2:
        return first[["rank", "thread", "order"]]
    calls = {key: pd.Series(names[grp["node"].to_numpy()]).value_counts()
             for key, grp in host.groupby(["rank", "thread"])}

    def shared(a: tuple, b: tuple) -> float:
        """The calls two threads both make, counted by name."""
        mine, theirs = calls[a].align(calls[b], fill_value=0)
        return float(np.minimum(mine, theirs).sum())

    ref = first[first["rank"] == ranks[0]]
    fresh = int(first["order"].max()) + 1
    for r in ranks[1:]:
        mine = first.index[first["rank"] == r]
        pairs = sorted((-shared((r, first.at[i, "thread"]), (ranks[0], t)), i, o)
                       for i in mine for t, o in zip(ref["thread"], ref["order"]))
        taken_rows, taken_orders = set(), set()
        for less, i, o in pairs:   # the most shared first
            if less < 0 and i not in taken_rows and o not in taken_orders:
                first.at[i, "order"] = o
                taken_rows.add(i)
                taken_orders.add(o)
        for i in mine:
            if i not in taken_rows:
                first.at[i, "order"], fresh = fresh, fresh + 1
    return first[["rank", "thread", "order"]]


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


def _piece_names(g: Graph) -> np.ndarray:
    """What each node does, to align ranks' pieces, as an integer: a launch call by the call and the
    kernel it launched (``cudaLaunchKernel`` of ``sm90_gemm...``), another node by its name."""
    codes, _ = pd.factorize(pd.Series(g.name, dtype=object).astype(str))
    codes = codes.astype(np.int64)
    width = int(codes.max()) + 2 if len(codes) else 1
    out = codes * width + width - 1
    gpu = np.flatnonzero((g.kind == GPU) & (g.launch >= 0))
    out[g.launch[gpu]] = codes[g.launch[gpu]] * width + codes[gpu]
    return out


def _positions(part: pd.DataFrame, names: np.ndarray) -> np.ndarray:
    """Each piece's place in the sequence of the rank with the fewest pieces (``part``: one
    iteration's pieces of one thread, or GPU ops, sorted by rank and time): the k-th where every
    rank has as many; else aligned by what the pieces do (:func:`difflib.SequenceMatcher` on
    :func:`_piece_names`, the longest common runs), -1 for a piece in no common run (an extra call or
    kernel of a straggler). ``names``: :func:`_piece_names` of the graph."""
    ranks = part["rank"].to_numpy()
    starts = np.flatnonzero(np.r_[True, ranks[1:] != ranks[:-1]])
    counts = np.diff(np.r_[starts, len(ranks)])
    if len(set(counts.tolist())) == 1:
        return np.arange(len(ranks)) - np.repeat(starts, counts)
    rows = pd.Series({int(ranks[a]): np.arange(a, a + n) for a, n in zip(starts, counts)})
    ref = min(rows.index, key=lambda r: (len(rows[r]), r))
    node = part["node"].to_numpy()
    ref_names = names[node[rows[ref]]].tolist()
    pos = np.full(len(part), -1, dtype=np.int64)
    for r, idx in rows.items():
        if r == ref:
            pos[idx] = np.arange(len(idx))
            continue
        matcher = SequenceMatcher(None, ref_names, names[node[idx]].tolist(), autojunk=False)
        for i, j, n in matcher.get_matching_blocks():
            pos[idx[j:j + n]] = np.arange(i, i + n)
    return pos


def balance(g: Graph, step: np.ndarray, base: np.ndarray, lag: np.ndarray) -> pd.DataFrame:
    """Remove each rank's excess host and GPU work per iteration (module docstring), changing
    ``base`` (node durations, µs) and ``lag`` (edge lags, µs) in place.

    Args:
        g: a job's graph; step: each node's iteration (-1 outside every one).
        base, lag: the calibrated weights (:func:`tracekit.analysis.critical_path.retime.weights`,
            after any earlier edit).

    Returns:
        Per (rank, step): host_excess_us and gpu_excess_us (the work taken away, µs) and matched
        (True: every piece matched the others'; False: the ranks' pieces differed in number and were
        aligned, the rank's extra pieces taken whole).
    """
    into = _within(g, step)
    names = _piece_names(g)
    frame = _pieces(g, step, lag, names)
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
        pos = _positions(part, names)
        rank, node = part["rank"].to_numpy(), part["node"].to_numpy()
        work_all, cpu_all = part["work"].to_numpy(), part["cpu_us"].to_numpy()
        ranks = np.unique(rank)
        row = np.searchsorted(ranks, rank)
        ok = pos >= 0
        table = np.full((len(ranks), int(pos.max()) + 1), np.nan)
        nodes = np.full(table.shape, -1, dtype=np.int64)
        table[row[ok], pos[ok]], nodes[row[ok], pos[ok]] = work_all[ok], node[ok]
        every = ~np.isnan(table).any(axis=0)   # the places every rank has
        table, nodes = table[:, every], nodes[:, every]
        typical = [np.median(np.delete(table, i, axis=0), axis=0) for i in range(len(ranks))]
        outliers = [host_excess(table[i], typical[i]) if host else None for i in range(len(ranks))]
        # a host's outliers are the rank's excess only beyond the other ranks' own: every host stalls now
        # and then (a page fault, the GIL, a preempted thread), and a balanced job keeps its stalls
        stalls = np.array([0.0 if o is None else float(o.sum()) for o in outliers])
        for i, r in enumerate(ranks.tolist()):
            mine = row == i
            lacking = ~ok[mine]   # pieces the others lack: a straggler's extra calls and kernels
            extra, extra_work, extra_cpu = node[mine][lacking], work_all[mine][lacking], cpu_all[mine][lacking]
            # taken whole but for the CPU time before the first of a run of them: what came before it
            first = (lacking & ~np.r_[False, lacking[:-1]])[lacking]
            extra_keep = np.where(first, np.divide(extra_cpu, extra_work, out=np.zeros(len(extra)),
                                                   where=extra_work > 0), 0.0)
            work, pieces = table[i], outliers[i]
            if pieces is not None:   # a host's outliers, beyond its speed and beyond the others' outliers
                others = float(np.median(np.delete(stalls, i)))
                over = pieces * (max(0.0, stalls[i] - others) / stalls[i] if stalls[i] > 0 else 0.0)
            else:   # the work beyond the others' in all, from the pieces beyond theirs
                over = (work - typical[i]).clip(min=0)
                over *= min(1.0, max(0.0, float(work.sum() - typical[i].sum())) / over.sum()) if over.sum() > 0 else 0.0
            keep = 1 - np.divide(over, work, out=np.zeros(len(work)), where=work > 0)
            taken = float((work * (1 - keep)).sum()) + float((extra_work * (1 - extra_keep)).sum())
            if taken <= 0:
                continue
            scale[nodes[i]] = keep
            scale[extra] = extra_keep
            rows.append({"rank": int(r), "step": int(s), "host": bool(host), "excess_us": taken,
                         "matched": bool(ok.all())})
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

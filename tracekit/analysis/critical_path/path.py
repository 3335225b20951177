"""The critical path of each profiled iteration, and what it is made of.

An iteration (a ``ProfilerStep#N`` marker; the whole trace where there are none) holds
the host calls that start inside its marker (on any thread) and the GPU ops they launch.
It *finishes* when the last of them ends (or its marker does); its length runs from the
later of its own start and the previous iteration's finish to its finish: what the
unprofiled latency measures, a CUDA event before and after each of back-to-back calls (a
GPU-bound call is timed from the GPU's finish of the one before, a host-bound call from
its own start, so it holds the GPU work that follows its last launch). Its critical path
is the chain of binding edges (:mod:`tracekit.analysis.critical_path.retime`) back from the
node that finishes it, cut at that start; its segments add up to the iteration's length.

Each segment is one *part*:

* ``cpu``: host time between calls (the CPU ops that dispatch the next launch) and in
  host API calls that launch nothing (``cudaStreamIsCapturing``...);
* ``launch``: launch calls (``cudaLaunchKernel``, ``cudaGraphLaunch``...);
* ``launch_latency``: from a launch call's end to its op's start on an idle stream;
* ``gpu_gap``: the GPU's gap between back-to-back ops of a stream;
* ``kernel`` (with the kernel's class), ``transfer`` (memcpy, memset), ``comm``
  (collective kernels);
* ``sync``: a synchronizing call: its return after the GPU work it waited for, or its own
  time; ``stream_wait``: a cross-stream wait's lag;
* ``rank_wait``: the part of the path on another rank of the job (its work held this
  rank's collective);
* ``untracked``: before the first node the trace shows (the path starts at an op launched
  before the profiler). Before a thread's first call the path is in ``cpu``: the thread's own
  time since the iteration began (the CPU ops that led to its first call, as HTA counts them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.graph import Graph
from tracekit.analysis.critical_path.kinds import COLLECTIVE, COMM, CPU, GPU, HANDOFF, HOST, LAUNCH, STREAM, SYNC, WAIT
from tracekit.analysis.critical_path.retime import Scale, Timing, rank_factor

PARTS = ("cpu", "launch", "launch_latency", "gpu_gap", "kernel", "transfer", "comm", "sync", "stream_wait",
         "rank_wait", "untracked")
_EDGE_PART = {CPU: "cpu", HANDOFF: "cpu", LAUNCH: "launch_latency", STREAM: "gpu_gap", WAIT: "stream_wait",
              SYNC: "sync", COLLECTIVE: "comm"}
_HOST_PART = {"launch": "launch", "sync": "sync", "api": "cpu"}


def steps(g: Graph, markers: dict[int, pd.DataFrame]) -> np.ndarray:
    """The iteration (marker step) of each node; -1 outside every marker. ``markers``: rank ->
    markers table (step, ts, end; ``within``: :func:`nesting`'s). A GPU op belongs to the iteration
    of its launch call (its own start where the call is not in the trace); a node in nested
    instances to the innermost that holds it (after an inner instance's end, the one around it);
    without markers, every node is step 0."""
    out = np.full(len(g), -1, dtype=np.int64)
    for rank in np.unique(g.rank).tolist():
        m = markers.get(rank)
        rows = np.flatnonzero(g.rank == rank)
        if m is None or m.empty:
            out[rows] = 0
            continue
        m = nesting(m) if "within" not in m else m
        mts, mend, mstep = m["ts"].to_numpy(float), m["end"].to_numpy(float), m["step"].to_numpy()
        position = pd.Series(np.arange(len(m)), index=mstep)
        up = position.reindex(m["within"].to_numpy()).fillna(-1).to_numpy(np.int64)   # the holder's row
        ts = g.ts[rows].copy()
        gpu = (g.kind[rows] == GPU) & (g.launch[rows] >= 0)
        ts[gpu] = g.ts[g.launch[rows][gpu]]
        k = np.searchsorted(mts, ts, side="right") - 1
        inside = (k >= 0) & (ts < mend[np.maximum(k, 0)])
        while ((k >= 0) & ~inside).any():   # past a nested instance's end: the one holding it
            after = (k >= 0) & ~inside
            k[after] = up[k[after]]
            inside = (k >= 0) & (ts < mend[np.maximum(k, 0)])
        out[rows[inside]] = mstep[k[inside]]
    return out


def nesting(m: pd.DataFrame) -> pd.DataFrame:
    """A markers table (step, ts, end) sorted by start (the longer first at equal starts), with
    ``within``: the step of the innermost other marker that holds it (starts no later and ends no
    earlier: a nested instance of an annotation, ``[param|...|forward]`` inside another in HTA's
    simple_add trace), -1 for none. ProfilerStep markers follow each other: all -1."""
    m = m.assign(_neg=-m["end"].to_numpy(float)).sort_values(["ts", "_neg"], kind="stable").drop(columns="_neg")
    within, stack = [], []   # stack: (step, end) of the markers holding the current one
    for s, ts, end in zip(m["step"].tolist(), m["ts"].tolist(), m["end"].tolist()):
        while stack and (stack[-1][1] <= ts or stack[-1][1] < end):   # over before it starts or ends: not around it
            stack.pop()
        within.append(stack[-1][0] if stack else -1)
        stack.append((s, end))
    return m.assign(within=np.asarray(within, dtype=np.int64)).reset_index(drop=True)


def outermost(step: np.ndarray, g: Graph, markers: dict[int, pd.DataFrame]) -> np.ndarray:
    """Each node's outermost iteration: its step (:func:`steps`) where it is in no nested instance,
    else the step of the instance that holds it and is held by none (-1 stays -1)."""
    out = step.copy()
    for rank, m in markers.items():
        if m is None or "within" not in m or not (m["within"].to_numpy() >= 0).any():
            continue
        up = pd.Series(m["within"].to_numpy(np.int64), index=m["step"].to_numpy())
        rows = np.flatnonzero((g.rank == rank) & (step >= 0))
        cur = step[rows]
        while True:
            parent = up.reindex(cur).fillna(-1).to_numpy(np.int64)
            if not (parent >= 0).any():
                break
            cur = np.where(parent >= 0, parent, cur)
        out[rows] = cur
    return out


def periods(g: Graph, tm: Timing, step: np.ndarray, markers: dict[int, pd.DataFrame],
            host_scale: Scale = 1.0) -> pd.DataFrame:
    """One row per (rank, step): within (the step of the instance it is nested in, -1 for none:
    :func:`nesting`), start_us and end_us (its marker's start and end, re-timed: the CPU time
    between the marker's edge and its first or last host call scaled like its rank's host time,
    ``host_scale``: a factor, or one per rank), finish_us (the later of end_us and the last end of
    its nodes, those of the instances nested in it included), node (the node that ends last),
    tail_us (finish less that node's end: CPU time after its last call, on the critical path),
    from_us (where its length starts: the finish of the previous iteration of the same nesting,
    where that is later than its own start and before its finish, else its start) and latency_us
    (finish_us less from_us). Steps with no node, of their own or nested, are left out."""
    rows = []
    for rank in np.unique(g.rank).tolist():
        mine = (g.rank == rank) & (step >= 0)
        if not mine.any():
            continue
        frame = pd.DataFrame({"node": np.flatnonzero(mine), "step": step[mine], "end": tm.end[mine],
                              "start": tm.start[mine], "ts": g.ts[mine], "oend": g.end[mine],
                              "host": g.kind[mine] == HOST})
        m = markers.get(rank)
        bounds = dict(zip(m["step"], zip(m["ts"], m["end"]))) if m is not None and len(m) else {}
        within = dict(zip(m["step"], m["within"])) if m is not None and "within" in m else {}
        frame = _with_holders(frame, within)
        last, factor = {}, rank_factor(host_scale, rank)
        for s, grp in frame.groupby("step", sort=True):
            finish = grp.loc[grp["end"].idxmax()]
            host = grp[grp["host"]] if grp["host"].any() else grp
            first, final = host.loc[host["ts"].idxmin()], host.loc[host["oend"].idxmax()]
            m_ts, m_end = bounds.get(s, (first["ts"], final["oend"]))
            begin = first["start"] - (first["ts"] - m_ts) * factor
            stop = final["end"] + max(m_end - final["oend"], 0.0) * factor
            end = max(finish["end"], stop)
            by_marker = stop > finish["end"]
            up = int(within.get(s, -1))
            before = last.get(up)
            since = max(before, begin) if before is not None and before < end else begin
            rows.append({"rank": rank, "step": int(s), "within": up, "start_us": begin, "end_us": stop,
                         "finish_us": end, "node": int(final["node"] if by_marker else finish["node"]),
                         "tail_us": stop - final["end"] if by_marker else 0.0, "from_us": since,
                         "latency_us": end - since})
            last[up] = end
    return pd.DataFrame(rows, columns=["rank", "step", "within", "start_us", "end_us", "finish_us", "node",
                                       "tail_us", "from_us", "latency_us"])


def _with_holders(frame: pd.DataFrame, within: dict) -> pd.DataFrame:
    """``frame`` (a node per row, its ``step``) with each node repeated for every instance that
    holds its own (``within``: step -> the step it is nested in, -1 for none), so that an outer
    instance's nodes include its nested ones'."""
    if not within or max(within.values()) < 0:
        return frame
    up = pd.Series(within, dtype=np.int64)
    parts, cur = [frame], frame
    while True:
        holder = up.reindex(cur["step"].to_numpy()).fillna(-1).to_numpy(np.int64)
        cur = cur[holder >= 0].assign(step=holder[holder >= 0])
        if cur.empty:
            return pd.concat(parts, ignore_index=True)
        parts.append(cur)


def marker_table(tables, annotation: str | None = None) -> pd.DataFrame:
    """The iterations of one trace: its ``ProfilerStep`` markers (step, ts, end), or with
    ``annotation`` the CPU ops or user annotations of that name (step: 0, 1... in time order,
    nested ones too), as HTA's ``critical_path_analysis(annotation, instance_id)`` numbers its
    windows; with ``within``, the instance each is nested in (:func:`nesting`). A node in nested
    instances belongs to the innermost (:func:`steps`), and an outer instance's path runs through
    the nested ones (:func:`periods`), as HTA's window of the outer instance holds them."""
    if annotation is None:
        return nesting(tables.markers)
    ops = tables.cpu_ops
    hit = ops[ops["name"].astype(str) == annotation].sort_values("ts", kind="stable")
    return nesting(pd.DataFrame({"step": np.arange(len(hit)), "ts": hit["ts"].to_numpy(float),
                                 "end": hit["end"].to_numpy(float)}))


class _Lists:
    """The arrays a path walk reads, as Python lists (a walk reads them one item at a time), and
    each node's part and kernel class when the path runs through its own time."""

    def __init__(self, g: Graph, tm: Timing):
        self.src, self.at_start, self.edge_kind = g.src.tolist(), g.at_start.tolist(), g.edge_kind.tolist()
        self.start, self.end = tm.start.tolist(), tm.end.tolist()
        self.bind_start, self.bind_end = tm.bind_start.tolist(), tm.bind_end.tolist()
        klass = g.klass.astype(object)
        host = g.kind == HOST
        part = np.where(klass == COMM, "comm", np.where(klass == "memcpy/memset", "transfer", "kernel")).astype(object)
        part[host] = pd.Series(klass[host]).map(_HOST_PART).to_numpy()
        self.part = part.tolist()
        self.host = host.tolist()
        self.klass = np.where(part == "kernel", klass, "").tolist()


def trace_back(g: Graph, tm: Timing, node: int, stop: float, lists: _Lists | None = None) -> list[tuple]:
    """The critical path that ends at ``node``'s end, back to time ``stop`` (µs): segments
    (node, part, kernel class, lo, hi) latest first, clipped at ``stop``."""
    x = lists or _Lists(g, tm)
    out, cur, at_end = [], node, True
    for _ in range(4 * len(x.part) + 4):   # every node at most once each way: a bound, not a limit
        e, hi = (x.bind_end[cur], x.end[cur]) if at_end else (-1, x.start[cur])
        if at_end and e < 0:   # the node's own time, then the edge that set its start
            hi = x.start[cur]
            out.append((cur, x.part[cur], x.klass[cur], hi if hi > stop else stop, x.end[cur]))
            if hi <= stop:
                break
        if e < 0:
            e = x.bind_start[cur]
            if e < 0:   # before a thread's first call its CPU time (HTA's reading), else nothing traced
                out.append((cur, "cpu" if x.host[cur] else "untracked", "", stop, x.start[cur]))
                break
        u = x.src[e]
        t = x.start[u] if x.at_start[e] else x.end[u]
        out.append((cur, _EDGE_PART[x.edge_kind[e]], "", t if t > stop else stop, hi))
        if t <= stop:
            break
        cur, at_end = u, not x.at_start[e]
    return [s for s in out if s[4] > s[3]]


def segments(g: Graph, tm: Timing, per: pd.DataFrame) -> pd.DataFrame:
    """The critical path of every iteration of ``per`` (:func:`periods`): one row per segment,
    rank, step, node, part, class (a kernel's), name, rank_of_node, start_us, end_us, dur_us.
    A segment on another rank than its iteration's is part ``rank_wait`` (its own part in
    ``on_rank_part``)."""
    cols = {c: [] for c in ("rank", "step", "node", "on_rank_part", "class", "start_us", "end_us")}
    lists = _Lists(g, tm)
    for r in per.itertuples(index=False):
        stop = r.from_us
        found = trace_back(g, tm, r.node, stop, lists)
        if r.tail_us > 0:
            found.insert(0, (r.node, "cpu", "", max(r.finish_us - r.tail_us, stop), r.finish_us))
        for c, values in zip(("node", "on_rank_part", "class", "start_us", "end_us"), zip(*found) if found else []):
            cols[c].extend(values)
        cols["rank"].extend([r.rank] * len(found))
        cols["step"].extend([r.step] * len(found))
    # typed, so that an iteration with no segment (every op of it 0 µs long) still merges by rank and step
    out = pd.DataFrame({c: np.asarray(v, dtype=np.int64 if c in ("rank", "step", "node") else
                                      np.float64 if c.endswith("_us") else object) for c, v in cols.items()})
    node = out["node"].to_numpy()
    out["name"] = g.name[node]
    out["node_rank"] = g.rank[node]
    out["dur_us"] = out["end_us"] - out["start_us"]
    out["part"] = np.where(out["node_rank"] != out["rank"], "rank_wait", out["on_rank_part"])
    return out[["rank", "step", "part", "class", "name", "node", "node_rank", "on_rank_part", "start_us", "end_us",
                "dur_us"]]


def split(per: pd.DataFrame, segs: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, step): latency_us and the time of each part on its critical path (``<part>_us``
    for every part of ``PARTS``; they add up to latency_us), last ``within`` (the instance it is
    nested in, -1 for none: :func:`nesting`)."""
    sums = segs.pivot_table(index=["rank", "step"], columns="part", values="dur_us", aggfunc="sum", fill_value=0.0)
    sums = sums.reindex(columns=list(PARTS), fill_value=0.0)
    sums.columns = [f"{c}_us" for c in sums.columns]
    out = per[["rank", "step", "latency_us"]].merge(sums.reset_index(), on=["rank", "step"], how="left")
    return out.fillna({f"{p}_us": 0.0 for p in PARTS}).assign(within=per["within"].to_numpy())


def kernel_classes(segs: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, step, class): the kernel time on the critical path (kernel_us)."""
    k = segs[segs["part"] == "kernel"]
    return (k.groupby(["rank", "step", "class"], as_index=False)["dur_us"].sum()
            .rename(columns={"dur_us": "kernel_us"}))

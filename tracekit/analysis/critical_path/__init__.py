"""The critical path of every profiled iteration, from the trace alone (issue 30).

:func:`analyze` builds the dependency graph of the trace's host calls and GPU ops
(:mod:`~tracekit.analysis.critical_path.graph`), re-times it
(:mod:`~tracekit.analysis.critical_path.retime`) and follows, for each iteration, the
chain of edges that set its finish (:mod:`~tracekit.analysis.critical_path.path`). A
what-if is the same graph re-timed after an edit
(:mod:`~tracekit.analysis.critical_path.edits`), calibrated first to the unprofiled
latency (:mod:`~tracekit.analysis.critical_path.calibrate`).

Where our definitions differ from HolisticTraceAnalysis 0.5.0's
(``TraceAnalysis.critical_path_analysis``, hta/analyzers/critical_path_analysis.py), and why:

* HTA's nodes are the start and end of every CPU op, runtime call and GPU op; ours are
  runtime calls and GPU ops, with the CPU time between a thread's calls as the weight of
  the edge between them. Each host segment of our path is still named by the call it
  leads to (:func:`tracekit.analysis.critical_path.top`), and the path's length is the same.
  A thread's time before its first call in the iteration is ``cpu`` in both (HTA's path runs
  through its CPU ops there; ours through the CPU time from the iteration's start).
* HTA gives a kernel-to-kernel gap to the kernel before it; we count it apart
  (``gpu_gap``): it is what a CUDA graph replay changes.
* HTA gives dependency and sync edges weight 0, so the time a host waits in a sync is
  the sync call's own span there; we split it: the GPU work it waited for is on the path,
  and only the return after it is ``sync``.
* HTA draws a kernel launch edge only when the stream was empty at the launch (its queue
  length); we draw one for every op and let re-timing find which edge binds.
* HTA needs one annotation instance as its window; we take every iteration (``ProfilerStep``
  markers, or the instances of ``annotation``) and chain them: an iteration's length is
  from the previous one's finish, so back-to-back iterations add up to the window. Nested
  instances agree with HTA's windows: the outer one's path runs through the inner ones (their
  GPU work included), an inner one is chained only to the previous instance of its own nesting,
  and the steady-state iteration is the outermost instances' (an inner one is part of it).
* HTA runs on one rank; a job's ranks are one graph here, joined at their collectives.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path import path
from tracekit.analysis.critical_path import reasons as why
from tracekit.analysis.critical_path.graph import Graph, build
from tracekit.analysis.critical_path.kinds import GPU
from tracekit.analysis.critical_path.retime import Timing, retime, visit_order, weights
from tracekit.trace.reader import EventTables


class AnnotationError(ValueError):
    """An iteration annotation (``annotation``, ``tracekit whatif --annotation``) that no CPU op
    or user annotation of the trace is named; its message says so."""

    def __init__(self, annotation: str):
        super().__init__(annotation)
        self.annotation = annotation

    def __str__(self) -> str:
        return f"no CPU op or annotation named {self.annotation!r} in the trace"


class CannotAnalyze(ValueError):
    """Traces of which no critical path can be made; ``reason`` says why (a reason of
    :mod:`~tracekit.analysis.critical_path.reasons`: :func:`can_analyze`'s, or a job's too few
    ranks), its ``code`` the message."""

    def __init__(self, reason: dict):
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason["code"]


@dataclass
class CriticalPath:
    """The critical path of a trace (or a job's traces).

    graph, timing: the dependency graph and its re-timing (observed times, host time scaled
    by ``host_scale``, GPU op time by ``gpu_scale``). steps: each node's iteration.
    markers: rank -> its iterations (step, ts, end µs). iterations: per (rank, step) its
    start_us, finish_us, latency_us (:func:`path.periods`). segments: the critical path of
    each iteration (:func:`path.segments`). split: per (rank, step) latency_us and the time
    of each part on its path (``<part>_us``; :data:`path.PARTS`). missing: what the trace
    lacks for a complete graph (the graph's); problems: what could not be computed; each a
    reason (:mod:`~tracekit.analysis.critical_path.reasons`).
    """

    graph: Graph
    timing: Timing
    steps: np.ndarray
    markers: dict[int, pd.DataFrame]
    iterations: pd.DataFrame
    segments: pd.DataFrame
    split: pd.DataFrame
    host_scale: float = 1.0
    gpu_scale: float = 1.0
    missing: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)

    def latency_us(self) -> float:
        """The iteration latency the path gives (:func:`steady_latency_us`)."""
        return steady_latency_us(self.iterations)


def steady_latency_us(iterations: pd.DataFrame) -> float:
    """The steady-state iteration (µs): the median of :func:`steady_latencies_us`; NaN without
    iterations."""
    lat = steady_latencies_us(iterations)
    return float(np.median(lat)) if len(lat) else float("nan")


def steady_latencies_us(iterations: pd.DataFrame) -> np.ndarray:
    """The steady iterations' lengths (µs), in step order: every iteration's, leaving out the first
    when there are three or more (it starts on an idle GPU: the profiler's warm-up step is
    synchronized). A job's iteration is its slowest rank's, iteration by
    iteration (what run.json's ``latency_ms`` of a job measures: the slowest rank of each timed
    iteration): the time from the last rank's finish of one iteration (or the first rank's start of
    the next, where that is later) to the last rank's finish of the next (``finish_us``,
    ``start_us``, where the table has them), so that a rank whose iteration starts early only to
    wait for another's does not count its wait twice (the job's iterations add up to its window, as
    a rank's do). An instance nested in another (``within`` >= 0: an annotation inside one of the
    same name) is part of that one's iteration, not one more: only the outermost count."""
    if "within" in iterations:
        iterations = iterations[iterations["within"] < 0]
    if not len(iterations):
        return np.zeros(0)
    per_step = iterations.groupby("step", sort=True)
    lat = per_step["latency_us"].max().to_numpy(float, copy=True)
    if iterations["rank"].nunique() > 1 and "finish_us" in iterations:
        finish, begin = per_step["finish_us"].max().to_numpy(float), per_step["start_us"].min().to_numpy(float)
        lat[1:] = finish[1:] - np.maximum(finish[:-1], begin[1:])
    return lat[1:] if len(lat) >= 3 else lat


def steady_rows(split: pd.DataFrame) -> pd.DataFrame:
    """The rows of a table per (rank, step) (a critical path's split; per (job, rank, step) where it
    has a job) that a mean per iteration takes: each rank's first iteration left out where that
    rank has three or more (it starts on an idle GPU, as in :func:`steady_latency_us`), and the
    instances nested in another (``within`` >= 0: part of the outer one's iteration)."""
    if "within" in split:
        split = split[split["within"] < 0]
    if split.empty:
        return split
    keys = ["job", "rank"] if "job" in split else ["rank"]
    nth = split.sort_values([*keys, "step"]).groupby(keys).cumcount().reindex(split.index)
    return split[(nth > 0) | (split.groupby(keys)["step"].transform("size") < 3)]


def cannot_reason(exc: ValueError) -> dict | str:
    """The reason a path could not be made, of the error that said so: a :class:`CannotAnalyze`'s,
    ``NO_ANNOTATION`` for an :class:`AnnotationError`; another error's message as it is."""
    if isinstance(exc, CannotAnalyze):
        return exc.reason
    if isinstance(exc, AnnotationError):
        return {"code": why.NO_ANNOTATION, "annotation": exc.annotation}
    return str(exc)


def can_analyze(ranks: list[tuple[int, EventTables]]) -> dict | None:
    """Why no critical path can be made of these traces (a reason: no GPU op, no host call, or a
    rank of a job with GPU ops and no host call: :mod:`~tracekit.analysis.critical_path.reasons`), or None."""
    if not any(len(t.gpu_ops) for _, t in ranks):
        return {"code": why.NO_GPU}
    if not any(len(t.host_calls) for _, t in ranks):
        return {"code": why.NO_LAUNCH_CALLS}
    if blind := [r for r, t in ranks if len(t.gpu_ops) and not len(t.host_calls)]:
        return {"code": why.BLIND_RANKS, "ranks": blind}
    return None


def cannot_retime_launches(ranks: list[tuple[int, EventTables]]) -> dict | None:
    """Why launch removal (``cuda-graphs``, ``host-faster``) cannot be predicted for these traces:
    fewer than two launches (:func:`tracekit.analysis.metrics.summary.launch_count`) leave no launch
    overhead to remove or re-time (``ONE_LAUNCH``, with the ``launches``); None otherwise."""
    from tracekit.analysis.metrics.summary import launch_count

    n = sum(launch_count(t.gpu_ops["correlation"].to_numpy()) for _, t in ranks)
    return {"code": why.ONE_LAUNCH, "launches": n} if n < 2 else None


def analyze(ranks: list[tuple[int, EventTables]] | EventTables, annotation: str | None = None,
            host_scale: float = 1.0, gpu_scale: float = 1.0, graph: Graph | None = None) -> CriticalPath:
    """The critical path of each iteration of a trace, or of a job's traces.

    Args:
        ranks: one trace's tables, or (rank, tables) per trace of a job.
        annotation: the name of the CPU op or user annotation that marks an iteration
            (default: ``ProfilerStep#N``; the whole trace is one iteration without either).
        host_scale, gpu_scale: factors on host time and GPU op time (1: as traced;
            :mod:`~tracekit.analysis.critical_path.calibrate` fits them).
        graph: the graph of these traces, when already built.

    Returns:
        A :class:`CriticalPath`.

    Raises:
        CannotAnalyze: the traces hold no GPU op or no host call (:func:`can_analyze` says why).
        AnnotationError: ``annotation`` given, and no CPU op or annotation of the traces is named so.
    """
    g, step, markers, problems = prepare(ranks, annotation, graph)
    return _retimed(g, step, markers, host_scale, gpu_scale, problems)


def prepare(ranks: list[tuple[int, EventTables]] | EventTables, annotation: str | None = None,
            graph: Graph | None = None) -> tuple[Graph, np.ndarray, dict, list[dict]]:
    """(graph, each node's step, rank -> iteration markers, problems): what :func:`analyze` and a
    prediction re-time. Raises CannotAnalyze and AnnotationError as :func:`analyze` does."""
    if isinstance(ranks, EventTables):
        ranks = [(0, ranks)]
    if (cannot := can_analyze(ranks)) is not None:
        raise CannotAnalyze(cannot)
    g = graph if graph is not None else build(ranks)
    markers = {rank: path.marker_table(t, annotation) for rank, t in ranks}
    problems = []
    if annotation is not None and all(m.empty for m in markers.values()):
        raise AnnotationError(annotation)
    if all(m.empty for m in markers.values()):
        problems.append({"code": why.NO_MARKERS})
        markers = {rank: _whole(t) for rank, t in ranks}
    return g, path.steps(g, markers), markers, problems


def _whole(tables: EventTables) -> pd.DataFrame:
    """A trace without markers as one iteration: from its first CPU op or host call to the last
    one's end (the CPU ops before the first CUDA call included, as the note says: the whole trace)."""
    spans = [(f["ts"], f["end"]) for f in (tables.cpu_ops, tables.host_calls) if len(f)]
    ts = min(float(a.min()) for a, _ in spans)
    end = max(float(b.max()) for _, b in spans)
    return pd.DataFrame({"step": [0], "ts": [ts], "end": [np.nextafter(end, np.inf)], "within": [-1]})


def _retimed(g: Graph, step: np.ndarray, markers: dict, host_scale: float, gpu_scale: float,
             problems: list[dict], edited=None) -> CriticalPath:
    """The critical path of ``g`` re-timed with the calibration's factors, or with ``edited``
    weights (:class:`tracekit.analysis.critical_path.edits.Edited`)."""
    if edited is None:
        base, lag = weights(g, host_scale, gpu_scale)
        removed, marker_scale = None, host_scale
    else:
        base, lag, removed, marker_scale = edited.base, edited.lag, edited.removed, edited.marker_scale
    tm = retime(g, base, lag, visit_order(g), removed)
    per = path.periods(g, tm, step, markers, marker_scale)
    segs = path.segments(g, tm, per)
    problems = list(problems)
    if tm.skipped:
        problems.append({"code": why.SKIPPED_EDGES, "edges": tm.skipped})
    return CriticalPath(g, tm, step, markers, per, segs, path.split(per, segs), host_scale, gpu_scale,
                        list(g.missing), problems)


def name_segments(cp: CriticalPath, gpu_attribution: dict[int, pd.DataFrame]) -> None:
    """Add ``op`` and ``module`` to ``cp.segments`` (in place): a GPU op's from its attribution
    (``gpu_attribution``: rank -> :func:`tracekit.analysis.attribution.attribute`'s frame, rows
    aligned with that rank's gpu_ops), a host call's from the GPU op it launches (host time
    before a launch is the dispatch of that op); "" where unknown."""
    from tracekit.analysis.critical_path.edits import gpu_names

    g, segs = cp.graph, cp.segments
    names = gpu_names(g, gpu_attribution)
    op, module = names.op, names.module
    launched = np.flatnonzero((g.kind == GPU) & (g.launch >= 0))
    op[g.launch[launched][::-1]] = op[launched][::-1]        # a call's first op (reversed: the first wins)
    module[g.launch[launched][::-1]] = module[launched][::-1]
    node = segs["node"].to_numpy(dtype=np.int64)
    segs["op"], segs["module"] = op[node], module[node]


def top(cp: CriticalPath, n: int = 10) -> pd.DataFrame:
    """What is on the critical path most, by each of: ``name`` (the call, kernel or memcpy of
    each segment; part: the part where it has the most time, as a launch call's time is host
    CPU and launch latency), ``op`` and ``module`` (where :func:`name_segments` added them; ""
    for unknown): by, part ("" but for names), key, us_per_iter (µs on the path per iteration)
    and share (of the path), the ``n`` largest of each."""
    segs = cp.segments
    cols = ["by", "part", "key", "us_per_iter", "share"]
    if segs.empty:
        return pd.DataFrame(columns=cols)
    iters, total = max(len(cp.iterations), 1), float(segs["dur_us"].sum()) or 1.0
    out = []
    for by in ("name", "op", "module"):
        if by not in segs or (by != "name" and not (segs[by] != "").any()):
            continue
        t = segs.groupby([by, "part"], as_index=False)["dur_us"].sum().sort_values("dur_us", ascending=False)
        t = t.groupby(by, as_index=False, sort=False).agg(dur_us=("dur_us", "sum"), part=("part", "first"))
        t = t.rename(columns={by: "key"}).assign(by=by, us_per_iter=t["dur_us"] / iters, share=t["dur_us"] / total)
        if by != "name":
            t["part"] = ""
        out.append(t.sort_values("us_per_iter", ascending=False).head(n)[cols])
    return pd.concat(out, ignore_index=True)

"""What-if: the calibrated graph of a trace re-timed after an edit, and the iteration it predicts.

Edits (each a change of node durations or edge lags; several apply in order):

* ``cuda-graphs``: each iteration replayed as one CUDA graph. Its host calls cost nothing
  but one graph launch (the replay's host time: the Python call, the input copy and
  ``cudaGraphLaunch``, ``graph_launch_us`` plus ``per_kernel_us`` for each GPU op of the
  iteration: the costs of the trace's GPU, :mod:`~tracekit.analysis.critical_path.replay_costs`);
  its GPU ops (each ``kernel_delta_us`` longer: 0, but at an interval's ends) start after the
  previous op of their stream plus the replay's gap between kernels (``replay_gap_us``), the first
  after the launch plus the launch latency; cross-stream order and the syncs outside the graph stay.
* ``faster PATTERN=FACTOR``: the GPU ops matching PATTERN take 1/FACTOR of their time. A
  pattern (shell-style, ``fnmatch``) matches a kernel class or a part of one, in any case
  (``gemm`` for "GEMM/conv": :mod:`tracekit.analysis.metrics.kernels`), a kernel's name or
  short name (``*sgemm*``), an op (``mm``, ``aten::mm``) or a module and its submodules
  (``blocks.*.mlp``), from :mod:`tracekit.analysis.attribution.gpu_ops`. Host time is unchanged.
* ``host-faster FACTOR``: every host call, the CPU time between calls and the host time inside a
  launch call before its op began (a synchronous launch, a graph replay) 1/FACTOR as long.
* ``overlap-comm``: the computation no longer waits for the gradient reductions (all_reduce,
  reduce_scatter) but where it reads their result: the ops launched after the last reduction of
  the iteration (the optimizer step) still wait for them; collectives still wait for the
  computation that feeds them and every other collective's output (an all_gather's parameters,
  an all_to_all's embeddings) is still waited for (:func:`overlapped`). An iteration still ends
  after its collectives. Edges are only removed, so the job is never slower than before it.
* ``balance-ranks``: each rank's host and GPU work beyond the other ranks', per iteration, taken
  away (:mod:`tracekit.analysis.critical_path.balance`); the ranks still meet at every collective,
  and the job's iteration is still its slowest rank's.

On a job every edit applies to each rank, with that rank's own calibration
(:func:`tracekit.analysis.critical_path.calibrate.calibrate_job`); ``cuda-graphs`` makes one replay
per rank and iteration, its collectives kernels of the replay, still waiting for the other ranks.
"""

from __future__ import annotations

import fnmatch
import math
import numbers
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path.balance import balance
from tracekit.analysis.critical_path.collective_edges import REDUCTIONS
from tracekit.analysis.critical_path.graph import Graph
from tracekit.analysis.critical_path.kinds import COMM, GPU, HOST, LAUNCH, STREAM, WAIT
from tracekit.analysis.critical_path.replay_costs import Replay, replay_for
from tracekit.analysis.critical_path.retime import Scale, host_lags, times, weights

KINDS = ("cuda-graphs", "faster", "host-faster", "overlap-comm", "balance-ranks")


class EditError(ValueError):
    """An edit that cannot apply: a pattern that matches nothing, a factor that is no number > 0."""


@dataclass(frozen=True)
class Edit:
    """One edit: ``kind`` (one of ``KINDS``), ``pattern`` (faster), ``factor`` (faster, host-faster)."""

    kind: str
    pattern: str = ""
    factor: float = 1.0

    def __str__(self) -> str:
        if self.kind == "faster":
            return f"faster {self.pattern}={self.factor:g}"
        return f"{self.kind} {self.factor:g}" if self.kind == "host-faster" else self.kind


def faster_edit(spec: str) -> Edit:
    """``'PATTERN=FACTOR'`` -> an Edit. Raises EditError for a bad spec."""
    pattern, sep, factor = spec.rpartition("=")
    try:
        value = float(factor)
    except ValueError:
        value = math.nan
    if not sep or not pattern or not value > 0:
        raise EditError(f"--faster {spec!r}: expected PATTERN=FACTOR with a factor above 0, e.g. 'blocks.*.mlp=2'")
    return Edit("faster", pattern, value)


def edits_of(cuda_graphs: bool = False, faster: Mapping[str, float] | Iterable[str] | str | None = None,
             host_faster: float | None = None, overlap_comm: bool = False, balance_ranks: bool = False) -> list[Edit]:
    """The edits asked for, in the order they apply (that of ``tracekit whatif``'s options):
    ``cuda-graphs``, each ``faster``, ``host-faster``, ``overlap-comm``, ``balance-ranks``.

    Args:
        cuda_graphs, overlap_comm, balance_ranks: those edits (see the module docstring).
        faster: ``{pattern: factor}`` (a pattern may hold ``=``), or ``"PATTERN=FACTOR"`` strings as
            ``--faster`` takes them (one string, or several), e.g. ``{"blocks.*.mlp": 2}`` or
            ``["blocks.*.mlp=2", "gemm=1.5"]``: the matching GPU ops take 1/FACTOR of their time.
        host_faster: every host call and the CPU time between calls this factor shorter (None: unchanged).

    Raises:
        EditError: no edit at all, a faster spec that is not PATTERN=FACTOR, or a factor that is no
            number above 0.
    """
    if isinstance(faster, Mapping):
        specs = [f"{pattern}={factor}" for pattern, factor in faster.items()]
    else:
        specs = [faster] if isinstance(faster, str) else list(faster or [])
    edits = [Edit("cuda-graphs")] if cuda_graphs else []
    edits += [faster_edit(spec) for spec in specs]
    if host_faster is not None:
        if not (isinstance(host_faster, numbers.Real) and host_faster > 0):
            raise EditError(f"host-faster {host_faster!r}: expected a factor above 0, e.g. 2")
        edits.append(Edit("host-faster", factor=float(host_faster)))
    edits += [Edit("overlap-comm")] if overlap_comm else []
    edits += [Edit("balance-ranks")] if balance_ranks else []
    if not edits:
        raise EditError("no edit: give cuda_graphs=True, faster={PATTERN: FACTOR}, host_faster=FACTOR, "
                        "overlap_comm=True or balance_ranks=True")
    return edits


@dataclass
class Names:
    """What a pattern is matched against, per GPU node: op and module (from attribution)."""

    op: np.ndarray
    module: np.ndarray


def gpu_names(g: Graph, attributed: dict[int, pd.DataFrame]) -> Names:
    """Each node's op and module ("" for host nodes and where unknown); ``attributed``: rank
    -> the attribution frame of that rank's GPU ops (rows aligned with its gpu_ops)."""
    op = np.full(len(g), "", dtype=object)
    module = np.full(len(g), "", dtype=object)
    for rank, att in attributed.items():
        rows = np.flatnonzero((g.rank == rank) & (g.kind == GPU))
        if len(att) != len(rows):
            continue
        op[rows] = att["op"].astype(str).to_numpy()
        module[rows] = att["module"].astype(str).to_numpy()
    return Names(op, module)


def matches(g: Graph, names: Names, pattern: str) -> np.ndarray:
    """GPU nodes whose class, name, op or module (or a module above it) matches ``pattern``."""
    from tracekit.analysis.metrics.kernels import short_name

    gpu = g.kind == GPU
    out = np.zeros(len(g), dtype=bool)
    cache: dict[tuple, bool] = {}
    for i in np.flatnonzero(gpu).tolist():
        key = (g.klass[i], g.name[i], names.op[i], names.module[i])
        hit = cache.get(key)
        if hit is None:
            module = names.module[i]
            scopes = [".".join(module.split(".")[:k]) for k in range(1, module.count(".") + 2)] if module else []
            ops = [o for part in names.op[i].split("+") for o in (part, f"aten::{part}")] if names.op[i] else []
            classes = [g.klass[i].lower(), *g.klass[i].lower().split("/")]
            hit = (any(fnmatch.fnmatchcase(c, pattern.lower()) for c in classes)
                   or any(fnmatch.fnmatchcase(c, pattern) for c in [g.name[i], short_name(g.name[i]), *ops, *scopes]))
            cache[key] = hit
        out[i] = hit
    return out


@dataclass
class Edited:
    """A graph's weights after edits: base (node durations, µs), lag (edge lags, µs), removed
    (edges left out), marker_scale (the factor on the CPU time between an iteration's marker
    and its first and last host call: one, or one per rank), balanced (``balance-ranks``: the
    work it took from each rank, :func:`tracekit.analysis.critical_path.balance.balance`; None
    without that edit)."""

    base: np.ndarray
    lag: np.ndarray
    removed: np.ndarray
    marker_scale: Scale
    balanced: pd.DataFrame | None = None


def apply(g: Graph, step: np.ndarray, edits: list[Edit], host_scale: Scale, gpu_scale: float,
          replay: Replay | None = None, names: Names | None = None) -> Edited:
    """The graph's node durations and edge lags after the calibration's factors (``host_scale``: one,
    or one per rank; ``gpu_scale``) and ``edits``, and the edges the edits remove. Raises EditError
    for a pattern that matches no GPU op."""
    base, lag = weights(g, host_scale, gpu_scale)
    removed = np.zeros(len(g.src), dtype=bool)
    marker_scale, balanced = host_scale, None
    for edit in edits:
        if edit.kind == "faster":
            hit = matches(g, names or Names(np.full(len(g), ""), np.full(len(g), "")), edit.pattern)
            if not hit.any():
                raise EditError(f"--faster {edit.pattern}={edit.factor:g}: the pattern matches no kernel class, "
                                "kernel, op or module of the trace")
            base[hit] /= edit.factor
        elif edit.kind == "host-faster":
            base[g.kind == HOST] /= edit.factor
            # the CPU time between calls, and inside a launch call before the op that began in it
            lag[host_lags(g) | ((g.edge_kind == LAUNCH) & g.at_start)] /= edit.factor
            marker_scale = times(marker_scale, 1 / edit.factor)
        elif edit.kind == "cuda-graphs":
            _cuda_graphs(g, step, base, lag, replay)
            marker_scale = 0.0
        elif edit.kind == "overlap-comm":
            removed |= overlapped(g, step)
        elif edit.kind == "balance-ranks":
            balanced = balance(g, step, base, lag)
        else:
            raise EditError(f"unknown edit {edit.kind!r}; valid: {', '.join(KINDS)}")
    return Edited(base, lag, removed, marker_scale, balanced)


def overlapped(g: Graph, step: np.ndarray) -> np.ndarray:
    """The edges ``overlap-comm`` removes (a bool per edge): those that hold a GPU op that is no
    collective behind a gradient reduction (:data:`~tracekit.analysis.critical_path.collective_edges.REDUCTIONS`)
    on its stream or through a cross-stream wait, where the op was launched before the last
    reduction of its rank's iteration: the ops launched after it (the optimizer step) read the
    reduced gradients and keep waiting."""
    comm = g.klass == COMM
    named = g.collective if g.collective is not None else np.full(len(g), "", dtype=object)
    reduction = comm & np.isin(named, list(REDUCTIONS))
    launched = np.where((g.kind == GPU) & (g.launch >= 0), g.ts[np.maximum(g.launch, 0)], g.ts)
    last = pd.DataFrame({"rank": g.rank[reduction], "step": step[reduction], "ts": launched[reduction]}) \
        .groupby(["rank", "step"])["ts"].max()
    key = pd.MultiIndex.from_arrays([g.rank[g.dst], step[g.dst]])
    before_last = launched[g.dst] < last.reindex(key).to_numpy(dtype=float, na_value=-np.inf)
    return reduction[g.src] & ~comm[g.dst] & ((g.edge_kind == STREAM) | (g.edge_kind == WAIT)) & before_last


def _cuda_graphs(g: Graph, step: np.ndarray, base: np.ndarray, lag: np.ndarray, replay: Replay | None) -> None:
    """The ``cuda-graphs`` edit, in place (see the module docstring)."""
    replay = replay or Replay(0.0, replay_for(None).replay_gap_us)   # no host cost given: the largest known gap
    gap = replay.replay_gap_us
    inside = step >= 0
    host = inside & (g.kind == HOST)
    launches = host & (g.klass == "launch")
    base[host] = 0.0
    into_host = host[g.dst] & host_lags(g)
    lag[into_host] = 0.0
    # one graph launch per iteration (and rank): its first launch call
    frame = pd.DataFrame({"node": np.flatnonzero(launches), "rank": g.rank[launches], "step": step[launches],
                          "ts": g.ts[launches]})
    if len(frame):
        first = frame.loc[frame.groupby(["rank", "step"])["ts"].idxmin()]
        gpu = g.kind == GPU   # each rank's replay holds its own GPU ops of the iteration
        ops = pd.Series(1, index=pd.MultiIndex.from_arrays([g.rank[gpu], step[gpu]])).groupby(level=[0, 1]).size()
        kernels = ops.reindex(pd.MultiIndex.from_frame(first[["rank", "step"]])).fillna(0).to_numpy()
        base[first["node"].to_numpy()] = replay.graph_launch_us + replay.per_kernel_us * kernels
    base[inside & (g.kind == GPU)] += replay.kernel_delta_us
    gpu_in = inside[g.dst] & (g.kind[g.dst] == GPU)
    lag[gpu_in & (g.edge_kind == LAUNCH)] = g.launch_lag_us
    lag[gpu_in & ((g.edge_kind == STREAM) | (g.edge_kind == WAIT))] = gap

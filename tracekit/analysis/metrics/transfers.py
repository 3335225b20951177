"""Memory transfers from the trace itself: memcpy and memset bytes and bandwidth by direction.

Kineto writes one ``gpu_memcpy`` / ``gpu_memset`` event per copy or fill, with
its ``bytes`` in ``args`` and a name that gives the direction, e.g.
``Memcpy HtoD (Pageable -> Device)``, ``Memcpy DtoH (Device -> Pinned)``,
``Memcpy DtoD (Device -> Device)``, ``Memcpy PtoP (Device -> Device)``
(CUPTI's ``CUpti_ActivityMemcpyKind``; libkineto/src/output_json.cpp).
Directions: H2D, D2H, D2D, H2H, P2P (peer to peer), memset.

Bandwidth is bytes over the ops' own durations: ``bw_GBps = bytes / dur_us / 1e3``
(1 GB = 1e9 bytes), the figure Kineto writes as ``memory bandwidth (GB/s)``,
summed over the ops of a direction (total bytes / total time).
"""

from __future__ import annotations

import math

import pandas as pd

from tracekit.analysis.metrics.idle import op_iterations
from tracekit.analysis.registry import Inputs, Output, register
from tracekit.trace.reader import EventTables

_DIRECTION = {"HtoD": "H2D", "DtoH": "D2H", "DtoD": "D2D", "HtoH": "H2H", "PtoP": "P2P"}
COLUMNS = ["direction", "count", "bytes", "dur_us", "bw_GBps"]


def direction(name: str, kind: str) -> str:
    """The direction of one GPU op: H2D, D2H, D2D, H2H, P2P, memset, or "memcpy" if the name gives none."""
    if kind == "memset":
        return "memset"
    for word, label in _DIRECTION.items():
        if word in name:
            return label
    return "memcpy"


def _transfers(tables: EventTables) -> pd.DataFrame:
    ops = tables.gpu_ops[tables.gpu_ops["kind"].isin(["memcpy", "memset"])]
    labels = {(n, k): direction(n, k) for n, k in ops[["name", "kind"]].drop_duplicates().itertuples(index=False)}
    return ops.assign(direction=[labels[(n, k)] for n, k in zip(ops["name"], ops["kind"])],
                      nbytes=ops["bytes"].fillna(0.0))


def _aggregate(ops: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    g = ops.groupby(by, sort=True)
    out = pd.DataFrame({"count": g.size(), "bytes": g["nbytes"].sum(), "dur_us": g["dur"].sum()}).reset_index()
    out["bw_GBps"] = out["bytes"] / out["dur_us"].where(out["dur_us"] > 0) / 1e3
    return out


def by_direction(tables: EventTables, iterations: float | None = None) -> pd.DataFrame:
    """Memcpy/memset totals of a trace, one row per direction.

    Args:
        tables: the trace's event tables.
        iterations: iterations in the trace (markers, or run.json's count), to
            give per-iteration figures; None or 0 leaves them NaN.

    Returns:
        direction, count, bytes, dur_us (sum of the ops' durations), bw_GBps,
        bytes_per_iter, count_per_iter. Empty (with these columns) for a trace
        without memcpy or memset. An op without ``bytes`` counts 0 bytes.
    """
    cols = COLUMNS + ["bytes_per_iter", "count_per_iter"]
    ops = _transfers(tables)
    if ops.empty:
        return pd.DataFrame(columns=cols)
    out = _aggregate(ops, ["direction"])
    n = iterations if iterations and iterations > 0 else math.nan
    out["bytes_per_iter"] = out["bytes"] / n
    out["count_per_iter"] = out["count"] / n
    return out[cols]


def per_iteration(tables: EventTables) -> pd.DataFrame:
    """Memcpy/memset per marked iteration (``ProfilerStep#N``) and direction.

    An op belongs to the iteration during which its launch call ran (found by
    correlation id), or, without one, to the iteration its start falls in; ops
    outside every iteration are left out.

    Returns:
        step, direction, count, bytes, dur_us, bw_GBps. Empty when the trace
        has no markers or no memcpy/memset.
    """
    cols = ["step"] + COLUMNS
    ops = _transfers(tables)
    if ops.empty or tables.markers.empty:
        return pd.DataFrame(columns=cols)
    ops = ops.assign(step=op_iterations(tables, ops))
    return _aggregate(ops[ops["step"] >= 0], ["step", "direction"])[cols]


@register("transfers", reads=("gpu_ops", "host_calls", "markers"), order=54,
          tables=("transfers", "transfer_iterations"))
def _transfers_analysis(x: Inputs) -> Output:
    """Bytes and bandwidth by direction, over the run and per iteration."""
    return Output(tables={"transfers": by_direction(x.tables, x.row["iterations"]),
                          "transfer_iterations": per_iteration(x.tables)})

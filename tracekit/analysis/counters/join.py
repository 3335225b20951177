"""Join ncu's per-kernel counters to the kernels of a trace, by name and order (no torch).

ncu profiles kernels in launch order from the first measured iteration on;
the trace records the same workload's steady-state iterations. The k-th
profiled kernel with a given name is joined to the k-th kernel of that name in
the trace (kernels ordered by start time), so repeated kernels (one GEMM per
layer) pair up in order and the join does not depend on kernels of other names.

Names are compared whitespace- and case-insensitively when every profiled
name occurs in the trace that way; otherwise by function name only (the
identifier before any template arguments or parameters, without namespaces),
which tolerates the two demanglers (CUPTI's in Kineto, ncu's) writing
templates differently, or ncu printing function names only.
"""

from __future__ import annotations

import re

import pandas as pd

_IDENT = re.compile(r"[^<(]*")


def full_key(name: str) -> str:
    """The name without whitespace, lower case."""
    return "".join(name.split()).lower()


def function_key(name: str) -> str:
    """The function identifier: ``void at::native::foo<4, ...>(int)`` -> ``foo``."""
    for anonymous in ("(anonymous namespace)", "<unnamed>"):  # CUPTI's and ncu's spelling
        name = name.replace(anonymous, "")
    head = _IDENT.match(name).group(0).strip()
    return head.split()[-1].split("::")[-1] if head else name


def join(counters: pd.DataFrame, gpu_ops: pd.DataFrame) -> pd.DataFrame:
    """Add to each profiled kernel the trace kernel it corresponds to.

    Args:
        counters: ncu rows (``kernel`` names, in launch order), as from
            :func:`tracekit.analysis.counters.parse.parse`.
        gpu_ops: a trace's GPU ops (:class:`tracekit.trace.EventTables.gpu_ops`).

    Returns:
        ``counters`` (same rows, same order) plus ``trace_name``, ``trace_ts``
        and ``trace_dur_us`` (µs; NaN where no trace kernel corresponds) and
        ``matched`` (bool). ``attrs["join"]`` is "full name" or "function name".
    """
    kernels = gpu_ops[gpu_ops["kind"] == "kernel"].sort_values("ts", kind="stable")
    by_full = set(kernels["name"].map(full_key)) >= set(counters["kernel"].map(full_key))
    key = full_key if by_full else function_key
    left = counters.assign(_key=counters["kernel"].map(key))
    left["_occ"] = left.groupby("_key").cumcount()
    right = pd.DataFrame({"_key": kernels["name"].map(key).to_numpy(), "trace_name": kernels["name"].to_numpy(),
                          "trace_ts": kernels["ts"].to_numpy(), "trace_dur_us": kernels["dur"].to_numpy()})
    right["_occ"] = right.groupby("_key").cumcount()
    out = left.merge(right, on=["_key", "_occ"], how="left").drop(columns=["_key", "_occ"])
    out["matched"] = out["trace_name"].notna()
    out.attrs = {**counters.attrs, "join": "full name" if by_full else "function name"}
    return out

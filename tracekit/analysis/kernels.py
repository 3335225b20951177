"""Kernel tables: the top kernels by time, and time by coarse kernel class.

Classes come from kernel names (first rule that matches, case-insensitive):

* ``memcpy/memset``: GPU ops that are not kernels.
* ``attention``: flash/fused attention kernels: ``flash``, ``fmha``,
  ``attention``, ``sdpa`` (FlashAttention, cuDNN/xFormers fMHA, PyTorch's
  memory-efficient attention, Inductor's flex-attention templates).
* ``GEMM/conv``: cuBLAS/cuBLASLt/CUTLASS/cuDNN matrix and convolution kernels:
  ``gemm``, ``xmma``, ``cutlass``, ``cublas``, ``nvjet`` (cuBLAS on Hopper),
  ``wgmma``, ``sm80_``/``sm90_``, ``conv``, ``implicit``, and Inductor's
  matmul templates ``triton_tem_``/``mm``.
* ``reduction/norm``: ``reduce``, ``norm``, ``softmax``, ``argmax``, and
  Inductor's reduction kernels ``triton_per_`` (persistent) / ``triton_red_``.
* ``elementwise/fused``: ``elementwise``, ``triton_poi_`` (Inductor's fused
  pointwise kernels), ``copy``, ``fill``, ``cat``, ``index``, other ``triton_``.
* ``other``: the rest.

Inductor's prefixes are documented in torch/_inductor/codegen/triton.py
(kernel names ``triton_{poi,red,per,tem}_...``).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.trace.reader import EventTables

CLASS_RULES = [
    ("attention", re.compile(r"flash|fmha|attention|sdpa", re.I)),
    ("GEMM/conv", re.compile(r"gemm|xmma|cutlass|cublas|nvjet|wgmma|sm[89]0_|conv|implicit|triton_tem_|"
                             r"(^|[^a-z])mm([^a-z]|$)|matmul", re.I)),
    ("reduction/norm", re.compile(r"reduce|norm|softmax|argmax|triton_per_|triton_red_", re.I)),
    ("elementwise/fused", re.compile(r"elementwise|triton_poi_|copy|fill|cat|index|triton_", re.I)),
]


def kernel_class(name: str, kind: str = "kernel") -> str:
    """The coarse class of one GPU op (see the module docstring)."""
    if kind != "kernel":
        return "memcpy/memset"
    for label, rule in CLASS_RULES:
        if rule.search(name):
            return label
    return "other"


def _classes(ops: pd.DataFrame) -> pd.Series:
    # Classify each distinct name once: traces repeat a few hundred names many times.
    labels = {name: kernel_class(name) for name in ops["name"].unique()}
    return ops["name"].map(labels).where(ops["kind"] == "kernel", "memcpy/memset")


def top_kernels(tables: EventTables, n: int = 20) -> pd.DataFrame:
    """The ``n`` GPU ops (by name) with the most total time.

    Returns:
        name, class, count, total_us, mean_us, median_us, share (of GPU-op
        time), grid ("x,y,z" of its first launch), occupancy_pct (mean of
        Kineto's "est. achieved occupancy %", NaN where absent).
    """
    ops = tables.gpu_ops
    if ops.empty:
        return pd.DataFrame(columns=["name", "class", "count", "total_us", "mean_us", "median_us", "share",
                                     "grid", "occupancy_pct"])
    g = ops.groupby("name", sort=False)
    out = pd.DataFrame({"count": g.size(), "total_us": g["dur"].sum(), "mean_us": g["dur"].mean(),
                        "median_us": g["dur"].median(), "occupancy_pct": g["occupancy_pct"].mean()})
    out["share"] = out["total_us"] / ops["dur"].sum()
    out = out.sort_values("total_us", ascending=False).head(n)
    first = ops.drop_duplicates("name").set_index("name").loc[out.index]
    out["class"] = [kernel_class(name, kind) for name, kind in zip(out.index, first["kind"])]
    out["grid"] = [",".join("-" if np.isnan(v) else str(int(v)) for v in xyz)
                   for xyz in first[["grid_x", "grid_y", "grid_z"]].to_numpy()]
    out = out.reset_index()
    return out[["name", "class", "count", "total_us", "mean_us", "median_us", "share", "grid", "occupancy_pct"]]


def by_class(tables: EventTables) -> pd.DataFrame:
    """GPU-op time by class: class, count, total_us, mean_us, share (of GPU-op time)."""
    ops = tables.gpu_ops
    if ops.empty:
        return pd.DataFrame(columns=["class", "count", "total_us", "mean_us", "share"])
    g = ops.assign(cls=_classes(ops)).groupby("cls")
    out = pd.DataFrame({"count": g.size(), "total_us": g["dur"].sum(), "mean_us": g["dur"].mean()})
    out["share"] = out["total_us"] / ops["dur"].sum()
    return out.sort_values("total_us", ascending=False).rename_axis("class").reset_index()


def durations(tables: EventTables) -> np.ndarray:
    """Kernel durations (µs), sorted: the data of a duration CDF."""
    return np.sort(tables.gpu_ops.loc[tables.gpu_ops["kind"] == "kernel", "dur"].to_numpy())

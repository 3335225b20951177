"""Kernel tables: the top kernels by time, and time by coarse kernel class.

A kernel's class comes from its own name: a C++ kernel's qualified function
name without return type, template arguments or parameter list (see
:func:`short_name`), since arguments name libraries that are no clue to what
the kernel does (``vectorized_elementwise_kernel<4, fbgemm_gpu::...>`` is no
GEMM). The first rule that matches wins, case-insensitive:

* ``memcpy/memset``: GPU ops that are not kernels.
* Inductor's kernels by their prefix, whatever ops their names list
  (torch/_inductor/codegen/triton.py names them ``triton_{poi,red,per,tem}_``):
  ``triton_tem_`` templates are ``attention`` when flex-attention, else
  ``GEMM/conv``; ``triton_per_`` (persistent) and ``triton_red_`` reductions are
  ``reduction/norm``; ``triton_poi_`` pointwise kernels are ``elementwise/fused``.
* ``communication``: collective and point-to-point kernels: ``nccl``, ``rccl``,
  ``gloo`` (HolisticTraceAnalysis' COMMUNICATION type matches ``^nccl.*Kernel``,
  hta/utils/utils.py). Before the rest: their names also say "Reduce".
* ``attention``: flash/fused attention kernels: ``flash``, ``fmha``,
  ``attention``, ``sdpa`` (FlashAttention, cuDNN/xFormers fMHA, PyTorch's
  memory-efficient attention).
* ``embedding``: embedding lookups and their backward (``embedding``, ``embs``:
  PyTorch's and fbgemm's table-batched embeddings in recommendation models).
* ``GEMM/conv``: cuBLAS/cuBLASLt/CUTLASS/cuDNN matrix and convolution kernels:
  ``gemm`` (not fbgemm, a library of embedding and quantization kernels),
  ``gemv``, ``splitK`` (split-K GEMM reductions), ``xmma``, ``cutlass``,
  ``cublas``, ``nvjet`` (cuBLAS on Hopper), ``wgmma``, ``sm80_``/``sm90_``,
  ``conv`` (not convert), ``implicit``, ``winograd``, cuDNN's convolution
  engines ``scudnn``/``hcudnn`` (fp32/fp16) and ``dgrad``/``wgrad`` (data and
  weight gradients), ROCm's Tensile GEMMs ``Cijk_...`` (rocBLAS/hipBLASLt name
  them by their index order), ``matmul``, ``mm``.
* ``reduction/norm``: ``reduce``, ``norm``, ``softmax``, ``argmax``, pooling
  (``pool``, not pooled), cuDNN's batch-norm kernels ``bn_fw``/``bn_bw``,
  PyTorch's layer/group-norm statistics and backward (``RowwiseMoments``,
  ``GammaBetaBackward``).
* ``elementwise/fused``: ``elementwise``, ``copy``, ``fill``, ``cat``,
  ``index``, ``dropout``, layout changes (``nchwToNhwc``, ``nhwcToNchw``,
  ``transpose``, ``permute``), foreach optimizer steps (``multi_tensor_apply``),
  other ``triton_`` kernels.
* ``other``: the rest (sorts, scans, quantization...).

The cuDNN, Tensile, fbgemm and PyTorch names above are those of the real
traces in tests/analysis/metrics/test_kernels.py.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.registry import Inputs, Output, register
from tracekit.trace.reader import EventTables

CLASS_RULES = [
    ("attention", re.compile(r"^triton_tem_.*(flex|attention)", re.I)),
    ("GEMM/conv", re.compile(r"^triton_tem_", re.I)),
    ("reduction/norm", re.compile(r"^triton_(per|red)_", re.I)),
    ("elementwise/fused", re.compile(r"^triton_poi_", re.I)),
    ("communication", re.compile(r"nccl|rccl|gloo", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|sdpa", re.I)),
    ("embedding", re.compile(r"embedding|embs", re.I)),
    ("GEMM/conv", re.compile(r"(?<!fb)gemm|gemv|splitK|xmma|cutlass|cublas|nvjet|wgmma|sm[89]0_|conv(?!ert)|"
                             r"implicit|winograd|[sh]cudnn|dgrad|wgrad|^Cijk_|matmul|(^|[^a-z])mm([^a-z]|$)", re.I)),
    ("reduction/norm", re.compile(r"reduce|norm|softmax|argmax|pool(?!ed)|bn_fw|bn_bw|moments|gammabeta", re.I)),
    ("elementwise/fused", re.compile(r"elementwise|copy|fill|cat|index|dropout|nchwToNhwc|nhwcToNchw|transpose|"
                                     r"permute|multi_tensor_apply|triton_", re.I)),
]
QUANTILES = np.linspace(0, 1, 101)  # of kernel durations, kernel_quantiles
_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")


def short_name(name: str) -> str:
    """A kernel's own name: ``void ns::kernel<T, 4>(float*, int)`` -> ``ns::kernel``.

    Removes template arguments (nested ``<...>``), the parameter list and the
    return type; an anonymous namespace stays, as ``(anonymous namespace)``
    (Kineto) or ``<unnamed>`` (Nsight Compute). Plain names (cuDNN, Triton)
    come back as they are.
    """
    s = name.replace("(anonymous namespace)", "{anonymous}").replace("<unnamed>", "{unnamed}")
    while (shorter := _TEMPLATE_ARGS.sub("", s)) != s:
        s = shorter
    s = s.split("(", 1)[0].strip()
    s = s.rsplit(" ", 1)[-1]
    return s.replace("{anonymous}", "(anonymous namespace)").replace("{unnamed}", "<unnamed>")


def kernel_class(name: str, kind: str = "kernel") -> str:
    """The coarse class of one GPU op (see the module docstring)."""
    if kind != "kernel":
        return "memcpy/memset"
    short = short_name(name)
    for label, rule in CLASS_RULES:
        if rule.search(short):
            return label
    return "other"


def _classes(ops: pd.DataFrame) -> pd.Series:
    # Classify each distinct name once: traces repeat a few hundred names many times.
    labels = {name: kernel_class(name) for name in ops["name"].unique()}
    return ops["name"].map(labels).astype(object).where(ops["kind"] == "kernel", "memcpy/memset")


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


@register("kernels", reads=("gpu_ops",), order=52, tables=("kernels", "kernel_classes", "kernel_quantiles"))
def _kernels_analysis(x: Inputs) -> Output:
    """The top kernels, time by class, and kernel duration (µs) at :data:`QUANTILES`."""
    d = durations(x.tables)
    quantiles = pd.DataFrame({"quantile": QUANTILES, "dur_us": np.quantile(d, QUANTILES)}) if len(d) else pd.DataFrame()
    return Output(tables={"kernels": top_kernels(x.tables), "kernel_classes": by_class(x.tables),
                          "kernel_quantiles": quantiles})

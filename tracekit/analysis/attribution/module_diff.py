"""Two runs side by side, module by module: where GPU time and launches went (issue 20).

Runs are aligned by module path (cut to a depth) and, in the op table, by aten op
too, never by kernel name: a compiled run's kernels have other names than eager's.
Per module, per iteration, B minus A: Δ busy, Δ kernels, Δ launches, Δ idle time,
and which kernels appeared, vanished or were fused. Every figure is a sum of the
runs' attribution rows (:mod:`tracekit.analysis.attribution.modules`), which split each run's
busy time, idle time and launches exactly, unattributed work included as its own
row; so the rows of a diff sum exactly to the runs' Δ busy, Δ idle and Δ launches
per iteration. Rows are sorted by contribution: |Δ busy|, then |Δ launches|.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracekit.analysis.attribution.modules import DEFAULT_DEPTH, SUMS, cut

PER_ITER = ["busy_us", "kernels", "launches", "launch_cpu_us", "idle_us", "idle_host_wait_us"]


def _per_iter(long: pd.DataFrame, iterations: float | None, depth: int) -> pd.DataFrame:
    n = iterations if iterations and not math.isnan(iterations) else 1.0
    out = long.assign(module=cut(long["module"], depth))
    out[SUMS] = out[SUMS] / n
    return out


def diff(long_a: pd.DataFrame, long_b: pd.DataFrame, iterations_a: float | None, iterations_b: float | None,
         depth: int = DEFAULT_DEPTH, by: tuple[str, ...] = ("module",)) -> pd.DataFrame:
    """Per module (or per module and op, ``by=("module", "op")``) of two runs.

    Args:
        long_a, long_b: the runs' attribution rows (:func:`tracekit.analysis.attribution.modules.long_table`,
            the ``attribution`` table of an analysis).
        iterations_a, iterations_b: profiled iterations of each run (figures are per
            iteration; None or NaN: per trace).
        depth: module paths are cut to this many parts.

    Returns:
        One row per key present in either run: the keys; ``<x>_a``, ``<x>_b`` and
        ``d_<x>`` (B - A) per iteration for x in busy_us, kernels, launches,
        launch_cpu_us, idle_us, idle_host_wait_us; contribution (d_busy_us over the
        runs' Δ busy); ops_a, ops_b (the ops of each run's GPU ops, most busy first, as
        ``((op, kernels per iteration), ...)``); appeared, vanished (the kernels only one run
        has, ``((name, GPU ops per iteration), ...)``), fused (B's kernels computing several ops,
        ``((name, "op+op"), ...)``) and became_triton (B's kernels are all Triton kernels, A's
        none). Sorted by |d_busy_us|, then |d_launches|. The report words these lists and each
        row's change (:func:`tracekit.report.module_text.worded_diff`).
    """
    keys = list(by)
    a, b = _per_iter(long_a, iterations_a, depth), _per_iter(long_b, iterations_b, depth)
    sa, sb = a.groupby(keys)[PER_ITER].sum(), b.groupby(keys)[PER_ITER].sum()
    out = sa.add_suffix("_a").join(sb.add_suffix("_b"), how="outer").fillna(0.0)
    for col in PER_ITER:
        out[f"d_{col}"] = out[f"{col}_b"] - out[f"{col}_a"]
    total = out["d_busy_us"].sum()
    out["contribution"] = out["d_busy_us"] / total if total else np.nan
    kernels_a, kernels_b = _kernels(a, keys), _kernels(b, keys)
    out["ops_a"] = [_ops(kernels_a.get(k)) for k in out.index]
    out["ops_b"] = [_ops(kernels_b.get(k)) for k in out.index]
    described = [_describe(kernels_a.get(k), kernels_b.get(k)) for k in out.index]
    for i, col in enumerate(("appeared", "vanished", "fused", "became_triton")):
        out[col] = [d[i] for d in described]
    out = out.reset_index()
    order = np.lexsort((-out["d_launches"].abs().to_numpy(), -out["d_busy_us"].abs().to_numpy()))
    return out.iloc[order].reset_index(drop=True)


def _kernels(rows: pd.DataFrame, keys: list[str]) -> dict:
    """key -> DataFrame (kernel, op, n per iteration, busy_us) of its GPU ops."""
    ops = rows[rows["gpu_ops"] > 0]
    per = ops.groupby(list(dict.fromkeys([*keys, "kernel", "op"])), as_index=False)[
        ["gpu_ops", "kernels", "busy_us"]].sum()
    return {k if len(keys) > 1 else k[0]: g.drop(columns=[c for c in keys if c != "op"])
            for k, g in per.groupby(keys, sort=False)}


def _ops(k: pd.DataFrame | None) -> tuple:
    """``(("addmm", 2.0), ("gelu", 1.0), ...)``: the ops of the kernels, by busy time, with their
    kernels per iteration; () without GPU ops."""
    if k is None or k.empty:
        return ()
    per = k.groupby("op")[["kernels", "busy_us"]].sum().sort_values("busy_us", ascending=False)
    return tuple(zip(per.index, per["kernels"]))


def _describe(ka: pd.DataFrame | None, kb: pd.DataFrame | None) -> tuple[tuple, tuple, tuple, bool]:
    """(appeared, vanished, fused, became_triton): kernel names only in B and only in A, each
    ``(name, GPU ops per iteration)``, most first; B's kernels computing several ops, each
    ``(name, "op+op")``, most busy first; and whether B's kernels are all Triton kernels where A
    has none."""
    empty = pd.DataFrame(columns=["kernel", "op", "gpu_ops", "kernels", "busy_us"])
    ka, kb = (empty if k is None else k for k in (ka, kb))
    na, nb = ka.groupby("kernel")["gpu_ops"].sum(), kb.groupby("kernel")["gpu_ops"].sum()
    ranked = lambda s: tuple(sorted(s.items(), key=lambda i: (-i[1], i[0])))  # noqa: E731
    appeared, vanished = nb[~nb.index.isin(na.index)], na[~na.index.isin(nb.index)]
    by_busy = kb.sort_values("busy_us", ascending=False, kind="stable").drop_duplicates("kernel")
    fused = tuple((k, o) for k, o in by_busy[["kernel", "op"]].itertuples(index=False) if "+" in o)
    gb = float(kb["kernels"].sum())
    triton = float(kb.loc[kb["kernel"].str.startswith("triton_"), "kernels"].sum()) if len(kb) else 0.0
    became = bool(gb and abs(triton - gb) < 1e-9 and not ka["kernel"].str.startswith("triton_").any())
    return ranked(appeared), ranked(vanished), fused, became


def totals(long_a: pd.DataFrame, long_b: pd.DataFrame, iterations_a: float | None,
           iterations_b: float | None) -> dict:
    """Run totals per iteration (busy_us, kernels, launches, idle_us for a and b, and
    d_ = B - A): what the rows of :func:`diff` sum to."""
    a = _per_iter(long_a, iterations_a, 1)[PER_ITER].sum()
    b = _per_iter(long_b, iterations_b, 1)[PER_ITER].sum()
    return {**{f"{c}_a": float(a[c]) for c in PER_ITER}, **{f"{c}_b": float(b[c]) for c in PER_ITER},
            **{f"d_{c}": float(b[c] - a[c]) for c in PER_ITER}}

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
        runs' Δ busy); ops_a, ops_b (ops with their kernels per iteration);
        appeared, vanished (kernel names only one run has, with counts per
        iteration), fused (B's kernels computing several ops) and change (one
        sentence). Sorted by |d_busy_us|, then |d_launches|.
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
    out["ops_a"] = [_ops_text(kernels_a.get(k)) for k in out.index]
    out["ops_b"] = [_ops_text(kernels_b.get(k)) for k in out.index]
    described = [_describe(kernels_a.get(k), kernels_b.get(k), r)
                 for k, r in zip(out.index, out.to_dict("records"))]
    for i, col in enumerate(("appeared", "vanished", "fused", "change")):
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


def _count(n: float) -> str:
    return f"{n:.3g}" if abs(n - round(n)) > 1e-9 else f"{int(round(n))}"


def _ops_text(k: pd.DataFrame | None) -> str:
    """``addmm x2, gelu, add``: the ops of the kernels, by busy time, with their kernels per iteration."""
    if k is None or k.empty:
        return ""
    per = k.groupby("op")[["kernels", "busy_us"]].sum().sort_values("busy_us", ascending=False)
    return ", ".join((op or "?") + (f" x{_count(n)}" if abs(n - 1) > 1e-9 else "")
                     for op, n in per["kernels"].items() if n > 0)


def _describe(ka: pd.DataFrame | None, kb: pd.DataFrame | None, r: dict) -> tuple[str, str, str, str]:
    """(appeared, vanished, fused, change): kernel names only in B and only in A (``name
    xN`` per iteration), B's kernels computing several ops (``name (op+op)``), and one
    sentence: ``4 kernels (addmm, gelu, addmm, add) became 2 Triton kernels (...); busy
    -41.0 µs; launches 4 -> 0``."""
    empty = pd.DataFrame(columns=["kernel", "op", "gpu_ops", "kernels", "busy_us"])
    ka, kb = (empty if k is None else k for k in (ka, kb))
    na, nb = ka.groupby("kernel")["gpu_ops"].sum(), kb.groupby("kernel")["gpu_ops"].sum()
    fmt = lambda s: ", ".join(f"{name} x{_count(n)}" for name, n in sorted(s.items(), key=lambda i: (-i[1], i[0])))  # noqa: E731
    appeared, vanished = nb[~nb.index.isin(na.index)], na[~na.index.isin(nb.index)]
    by_busy = kb.sort_values("busy_us", ascending=False, kind="stable").drop_duplicates("kernel")
    fused = ", ".join(f"{k} ({o})" for k, o in by_busy[["kernel", "op"]].itertuples(index=False) if "+" in o)
    ga, gb = float(ka["kernels"].sum()), float(kb["kernels"].sum())
    if len(appeared) or len(vanished) or abs(ga - gb) > 1e-9:
        triton = float(kb.loc[kb["kernel"].str.startswith("triton_"), "kernels"].sum()) if len(kb) else 0.0
        kind = " Triton" if gb and abs(triton - gb) < 1e-9 and not ka["kernel"].str.startswith("triton_").any() else ""
        ta, tb = r["ops_a"], r["ops_b"]     # _ops_text of ka and kb, made by diff()
        text = (f"{_count(ga)} kernels ({ta or '-'}) became {_count(gb)}{kind} kernels"
                + (f" ({tb})" if len(kb) and tb != ta else ""))
    else:
        text = "same kernels"
    text += f"; busy {r['d_busy_us']:+.1f} µs"
    if abs(r["d_launches"]) > 1e-9:
        text += f"; launches {_count(r['launches_a'])} -> {_count(r['launches_b'])}"
    if abs(r["d_idle_us"]) >= 0.05:
        text += f"; GPU idle before them {r['d_idle_us']:+.1f} µs"
    return fmt(appeared), fmt(vanished), fused, text


def totals(long_a: pd.DataFrame, long_b: pd.DataFrame, iterations_a: float | None,
           iterations_b: float | None) -> dict:
    """Run totals per iteration (busy_us, kernels, launches, idle_us for a and b, and
    d_ = B - A): what the rows of :func:`diff` sum to."""
    a = _per_iter(long_a, iterations_a, 1)[PER_ITER].sum()
    b = _per_iter(long_b, iterations_b, 1)[PER_ITER].sum()
    return {**{f"{c}_a": float(a[c]) for c in PER_ITER}, **{f"{c}_b": float(b[c]) for c in PER_ITER},
            **{f"d_{c}": float(b[c] - a[c]) for c in PER_ITER}}

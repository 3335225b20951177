"""The words of module-by-module tables: the ops of a module (``addmm x2, gelu``), the kernels
that appeared, vanished or were fused between two runs, and what changed in each row of a diff
(:func:`tracekit.analysis.attribution.module_diff.diff`: ``4 kernels (addmm, gelu, addmm, add)
became 2 Triton kernels (...); busy -41.0 µs; launches 4 -> 0``), made from their lists and figures."""

from __future__ import annotations

import pandas as pd

# A diff's lists, worded in place; became_triton is read by ``change`` only.
LISTS = ("ops_a", "ops_b", "appeared", "vanished", "fused")


def count(n: float) -> str:
    """A count per iteration as shown: ``2`` when whole, else 3 significant digits."""
    return f"{n:.3g}" if abs(n - round(n)) > 1e-9 else f"{int(round(n))}"


def ops_text(ops: tuple) -> str:
    """``addmm x2, gelu, add``: a diff's ops (``((op, kernels per iteration), ...)``), those with kernels."""
    return ", ".join((op or "?") + (f" x{count(n)}" if abs(n - 1) > 1e-9 else "") for op, n in ops if n > 0)


def module_ops_text(ops) -> str:
    """``addmm x2, gelu``: a module's ops (``((op, GPU ops per iteration), ...)``:
    :func:`tracekit.analysis.attribution.modules.by_module`), NaN where it has none."""
    if not isinstance(ops, tuple):
        return ops
    return ", ".join(f"{op or '?'}" + (f" x{k:g}" if (k := round(n, 1)) != 1 else "") for op, n in ops)


def kernels_text(kernels: tuple) -> str:
    """``name x2, other x1``: kernels with their GPU ops per iteration."""
    return ", ".join(f"{name} x{count(n)}" for name, n in kernels)


def fused_text(fused: tuple) -> str:
    """``name (op+op), ...``: kernels computing several ops."""
    return ", ".join(f"{kernel} ({ops})" for kernel, ops in fused)


def change(r: dict) -> str:
    """One row of a diff in a sentence: its kernels before and after (with their ops, and
    "Triton" where every kernel became one) or "same kernels", then Δ busy, the launches where
    they changed and the GPU idle before its kernels where it changed."""
    ga, gb = float(r["kernels_a"]), float(r["kernels_b"])
    if r["appeared"] or r["vanished"] or abs(ga - gb) > 1e-9:
        ta, tb = ops_text(r["ops_a"]), ops_text(r["ops_b"])
        kind = " Triton" if r["became_triton"] else ""
        text = (f"{count(ga)} kernels ({ta or '-'}) became {count(gb)}{kind} kernels"
                + (f" ({tb})" if len(r["ops_b"]) and tb != ta else ""))
    else:
        text = "same kernels"
    text += f"; busy {r['d_busy_us']:+.1f} µs"
    if abs(r["d_launches"]) > 1e-9:
        text += f"; launches {count(r['launches_a'])} -> {count(r['launches_b'])}"
    if abs(r["d_idle_us"]) >= 0.05:
        text += f"; GPU idle before them {r['d_idle_us']:+.1f} µs"
    return text


def worded_diff(rows: pd.DataFrame) -> pd.DataFrame:
    """A diff's rows (:func:`tracekit.analysis.attribution.module_diff.diff`, alone or per run:
    ``Result.modules``) with their lists in words and ``change`` in place of ``became_triton``;
    unchanged without them."""
    if "became_triton" not in rows:
        return rows
    records = rows.to_dict("records")
    texts = {"ops_a": ops_text, "ops_b": ops_text, "appeared": kernels_text, "vanished": kernels_text,
             "fused": fused_text}
    out = rows.assign(**{col: [texts[col](r[col]) for r in records] for col in LISTS})
    out.insert(out.columns.get_loc("became_triton"), "change", [change(r) for r in records])
    return out.drop(columns="became_triton")

"""A suite's report.md: results, comparison tables, published claims checked, and
"what the traces show" — every sentence generated from the run rows, none hand-written.

Input: the rows of :func:`tracekit.analysis.runs.analyze` (one per run) and the
cells' manifests. Speedups compare each run with the eager run of the same
workload: same op (a variant such as ``softmax4096-triton`` computes the op
``softmax4096``), batch, dtype, device and phase. Achieved rates are the
analysis' (``achieved_TFLOPs``, ``achieved_GBps``: a call's minimum work over
its median latency, against :mod:`tracekit.peaks`).
"""

from __future__ import annotations

import math
import re

import pandas as pd

from tracekit.manifest import Manifest
from tracekit.peaks import SOURCES, key
from tracekit.report.columns import IDLE, headline
from tracekit.report.files import _markdown_table

SLOWER = 0.98  # a speedup below this is reported as a regression (2% is beyond run-to-run noise of medians)
_PER_ITER = ("kernels_per_iter", "launches_per_iter", "busy_per_iter_us", "idle_per_iter_us",
             "host_wait_per_iter_us", "peak_memory_MB")


def comparison(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run, with ``workload`` (the key of comparable runs), ``contender``
    (the mode, plus the model when it is a variant of the op), ``eager_ms`` and
    ``speedup_vs_eager`` (eager median latency / this one), ``host_wait_per_iter_us``
    (GPU idle waiting on the host, per profiled iteration) and ``eager_<x>`` for
    the eager run's figures. GPU figures of a trace without GPU activity, and
    achieved rates of phases other than a forward call (the work stated is one
    forward call's), are NaN.
    """
    if runs.empty or "mode" not in runs:
        return pd.DataFrame()
    df = runs.drop_duplicates("run").copy()
    for col in ("op", "phase", "latency_median_ms", "kernels_per_iter", "launches_per_iter", "busy_per_iter_us",
                "idle_per_iter_us", "idle_host_wait_us", "iterations", "utilization", "device_name", "has_gpu",
                "peak_memory_MB", "max_abs_diff", "achieved_TFLOPs", "achieved_GBps", "pct_peak_compute",
                "pct_peak_bw", "requested_device"):
        if col not in df:
            df[col] = math.nan
    df["host_wait_per_iter_us"] = df["idle_host_wait_us"] / df["iterations"]
    no_gpu = df["has_gpu"] != True  # noqa: E712  (NaN for runs without a trace)
    df.loc[no_gpu, ["kernels_per_iter", "launches_per_iter", "busy_per_iter_us", "idle_per_iter_us",
                    "host_wait_per_iter_us", "utilization"]] = math.nan
    backward = ~df["phase"].fillna("inference").isin(["inference", "forward"])
    df.loc[backward, ["achieved_TFLOPs", "achieved_GBps", "pct_peak_compute", "pct_peak_bw"]] = math.nan
    df["op"] = df["op"].where(df["op"].notna(), df["model"])
    df["phase"] = df["phase"].fillna("inference")
    df["workload"] = df.apply(_workload_name, axis=1)
    df["contender"] = [m if model == op else f"{model} ({m})" for m, model, op in zip(df["mode"], df["model"], df["op"])]
    ok = df["status"] == "ok"
    eager = df[ok & (df["mode"] == "eager") & (df["model"] == df["op"])].set_index("workload")
    df["eager_ms"] = df["workload"].map(eager["latency_median_ms"])
    df["speedup_vs_eager"] = (df["eager_ms"] / df["latency_median_ms"]).where(ok)
    for col in _PER_ITER:
        df[f"eager_{col}"] = df["workload"].map(eager[col])
    return df.reset_index(drop=True)


def _workload_name(row) -> str:
    parts = [str(row["op"])]
    if pd.notna(row.get("batch")):
        parts.append(f"b{int(row['batch'])}")
    parts += [str(row.get("dtype")), str(row.get("device_type"))]
    if row.get("phase") not in (None, "inference"):
        parts.append(str(row["phase"]))
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------
# Published claims: [[claims]] in a suite file, checked against the numbers.

CLAIM_METRICS = {
    "speedup": ("speedup_vs_eager", "latency speedup over eager (median latencies)"),
    "kernels_vs_eager": ("kernels_ratio", "kernels executed per iteration, relative to eager"),
    "launches_vs_eager": ("launches_ratio", "host launches per iteration, relative to eager"),
}


def check_claims(claims: list[dict], cmp: pd.DataFrame) -> pd.DataFrame:
    """Each claim's measured values and verdict.

    A claim: ``text``, ``metric`` (a key of :data:`CLAIM_METRICS`), ``range``
    [low, high], and filters on run columns (``model``, ``mode``, ``batch``...; a
    value or a list). The eager baselines themselves are not measured (1.0 by
    definition). Verdict: "consistent" (every matching run in range),
    "contradicted" (none), "partly" (some), "no data" (no matching run with the metric).
    """
    rows = []
    if not cmp.empty:
        cmp = cmp[cmp["contender"] != "eager"]
        cmp = cmp.assign(kernels_ratio=cmp["kernels_per_iter"] / cmp["eager_kernels_per_iter"],
                         launches_ratio=cmp["launches_per_iter"] / cmp["eager_launches_per_iter"])
    for claim in claims:
        column, meaning = CLAIM_METRICS.get(claim.get("metric", ""), (None, ""))
        low, high = claim.get("range", [math.nan, math.nan])
        sel = cmp
        for k, want in claim.items():
            if k in ("text", "metric", "range") or sel.empty:
                continue
            want = want if isinstance(want, list) else [want]
            sel = sel[sel[k].isin(want)] if k in sel else sel.iloc[0:0]
        values = sel[column].dropna() if column and not sel.empty else pd.Series(dtype=float)
        inside = values.between(low, high)
        verdict = ("no data" if values.empty else "consistent" if inside.all() else
                   "contradicted" if not inside.any() else "partly")
        measured = ", ".join(f"{sel.loc[i, 'workload']} {sel.loc[i, 'contender']}: {v:.3g}" for i, v in values.items())
        rows.append({"claim": claim.get("text", ""), "measure": meaning or f"unknown metric {claim.get('metric')!r}",
                     "claimed range": f"{low:g}–{high:g}", "measured": measured or "-", "verdict": verdict})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# "What the traces show": sentences from numbers.

def _span(values: pd.Series, spec: str = ".3g") -> str:
    lo, hi = values.min(), values.max()
    return f"{lo:{spec}}" if math.isclose(lo, hi, rel_tol=5e-3) else f"{lo:{spec}}–{hi:{spec}}"


def findings(cmp: pd.DataFrame) -> list[str]:
    """Bullet sentences on speedups, launches vs kernels, where the time went, rates,
    memory, accuracy and failures, each computed from ``cmp`` (:func:`comparison`)."""
    if cmp.empty:
        return ["No runs have results yet."]
    out: list[str] = []
    ok = cmp[cmp["status"] == "ok"]
    if not ok.empty and (ok["device_type"] == "cpu").all():
        names = ok["device_name"].dropna()
        out.append(f"All {len(ok)} finished runs ran on the CPU ({names.iloc[0] if len(names) else 'cpu'}): "
                   "their traces hold no GPU activity, so only latency and CPU-side figures apply.")
    for part in (_speedups, _other_device, _launches, _time_sources, _rates, _memory, _accuracy):
        out += part(ok)
    return out + _failures(cmp[cmp["status"] != "ok"])


def _speedups(ok: pd.DataFrame) -> list[str]:
    out = []
    others = ok[ok["contender"] != "eager"].dropna(subset=["speedup_vs_eager"])
    for contender, g in others.groupby("contender", sort=False):
        s = g["speedup_vs_eager"]
        slower = g[s < SLOWER]
        text = (f"{contender} vs eager: faster on {int((s >= 1 / SLOWER).sum())} of {len(g)} workloads, "
                f"speedup {_span(s)}x (median {s.median():.3g}x)")
        if len(slower):
            worst = slower.loc[slower["speedup_vs_eager"].idxmin()]
            text += (f"; slower than eager on {len(slower)}: "
                     + ", ".join(f"{w} ({v:.3g}x)" for w, v in zip(slower["workload"], slower["speedup_vs_eager"]))
                     + f" — worst {worst['workload']}, {worst['latency_median_ms']:.3f} ms vs eager "
                     f"{worst['eager_ms']:.3f} ms")
        out.append(text + ".")
    return out


def _other_device(ok: pd.DataFrame) -> list[str]:
    """Runs that ran elsewhere than asked (ONNX Runtime's CPU provider on a GPU machine): said,
    and why they have no speedup (their workload is the device they ran on)."""
    asked = ok["requested_device"].map(lambda d: d.split(":")[0] if isinstance(d, str) else None)
    moved = ok[asked.notna() & (asked != ok["device_type"])]
    out = []
    for (contender, ran, wanted), g in moved.groupby(["contender", "device_type", asked[moved.index]], sort=False):
        names = ", ".join(sorted(g["device_name"].dropna().astype(str).unique())) or ran
        out.append(f"{contender} ran on the {ran} ({names}) although {wanted} was asked, on {len(g)} workloads "
                   f"(latency {_span(g['latency_median_ms'])} ms): not compared with the {wanted} eager runs, "
                   "since that speedup would compare devices, not modes.")
    return out


def _launches(ok: pd.DataFrame) -> list[str]:
    gpu = ok[ok["launches_per_iter"] > 0]
    out = []
    for contender, g in gpu.groupby("contender", sort=False):
        per_launch = g["kernels_per_iter"] / g["launches_per_iter"]
        text = (f"{contender}: {_span(g['kernels_per_iter'], '.0f')} kernels per iteration from "
                f"{_span(g['launches_per_iter'], '.1f')} host launches, {_span(per_launch, '.1f')} kernels per launch")
        if (per_launch > 2).any():
            text += " (a CUDA graph replays many kernels from one launch)"
        out.append(text + ".")
    return out


def _time_sources(ok: pd.DataFrame) -> list[str]:
    cols = ["busy_per_iter_us", "idle_per_iter_us", "host_wait_per_iter_us", "eager_busy_per_iter_us",
            "eager_idle_per_iter_us", "eager_host_wait_per_iter_us"]
    g = ok[ok["contender"] != "eager"].dropna(subset=cols)
    out = []
    for contender, rows in g.groupby("contender", sort=False):
        d_busy = (rows["busy_per_iter_us"] - rows["eager_busy_per_iter_us"]).sum() / 1e3
        d_wait = (rows["host_wait_per_iter_us"] - rows["eager_host_wait_per_iter_us"]).sum() / 1e3
        d_idle = (rows["idle_per_iter_us"] - rows["eager_idle_per_iter_us"]).sum() / 1e3
        out.append(f"{contender}: over its {len(rows)} workloads a profiled iteration changes by "
                   f"{d_busy + d_idle:+.2f} ms in all vs eager: {d_busy:+.2f} ms of GPU busy time (kernel work), "
                   f"{d_wait:+.2f} ms of GPU idle waiting on the host (launches, Python) and "
                   f"{d_idle - d_wait:+.2f} ms of other GPU idle (launch latency, syncs); median utilization "
                   f"{rows['utilization'].median():.2f} (eager: {_eager_median(ok, rows, 'utilization'):.2f}).")
    return out


def _eager_median(ok: pd.DataFrame, rows: pd.DataFrame, column: str) -> float:
    eager = ok[(ok["contender"] == "eager") & ok["workload"].isin(rows["workload"])]
    return eager[column].median() if len(eager) else math.nan


def _rates(ok: pd.DataFrame) -> list[str]:
    """Per kind of op (the name without its size), the achieved rate of the resource nearer
    its peak (the one that bounds the op, as a roofline reads it); both where no peak is known."""
    rated = ok.dropna(subset=["achieved_TFLOPs", "achieved_GBps"], how="all")
    out = []
    for kind, g in rated.groupby(rated["op"].str.replace(r"\d.*$", "", regex=True), sort=False):
        measures = [("achieved_TFLOPs", "TFLOP/s", "pct_peak_compute"), ("achieved_GBps", "GB/s", "pct_peak_bw")]
        if g["pct_peak_compute"].notna().any() and g["pct_peak_bw"].notna().any():
            nearer = g["pct_peak_compute"].max() >= g["pct_peak_bw"].max()
            measures = [measures[0] if nearer else measures[1]]
        for column, unit, pct in measures:
            best = g.loc[g[column].idxmax()]
            text = (f"{kind}: achieved {unit} {_span(g[column])}; highest {best[column]:.3g} {unit} "
                    f"({best['workload']}, {best['contender']})")
            if pd.notna(best[pct]):
                text += f", {best[pct]:.0f}% of the device's datasheet peak"
            out.append(text + ".")
    return out


def _memory(ok: pd.DataFrame) -> list[str]:
    g = ok[(ok["contender"] != "eager") & (ok["device_type"] == "cuda")].dropna(
        subset=["peak_memory_MB", "eager_peak_memory_MB"])
    out = []
    for contender, rows in g.groupby("contender", sort=False):
        ratio = rows["peak_memory_MB"] / rows["eager_peak_memory_MB"]
        out.append(f"{contender}: peak GPU memory {_span(ratio)}x eager's (median {ratio.median():.3g}x).")
    return out


def _accuracy(ok: pd.DataFrame) -> list[str]:
    g = ok[ok["contender"] != "eager"].dropna(subset=["max_abs_diff"])
    return [f"{contender}: output max-abs-diff vs eager {_span(rows['max_abs_diff'], '.2g')} "
            f"({', '.join(sorted(rows['dtype'].dropna().astype(str).unique()))})."
            for contender, rows in g.groupby("contender", sort=False)]


def _failures(bad: pd.DataFrame) -> list[str]:
    out = []
    for status, g in bad.groupby("status", sort=False):
        if status in ("oom", "timeout"):
            out.append(f"{status}: {', '.join(g['run'])}.")
            continue
        reasons = g["reason"].fillna("").map(lambda r: re.sub(r"\s+", " ", str(r))[:160])
        for reason, rows in g.groupby(reasons, sort=False):
            out.append(f"{status} ({len(rows)}): {reason} — {', '.join(rows['run'][:6])}"
                       + (f" and {len(rows) - 6} more" if len(rows) > 6 else "") + ".")
    return out


# ---------------------------------------------------------------------------------------------
# The report.

RESULTS = [
    ("run", "run", "{}"), ("status", "status", "{}"), ("latency_median_ms", "latency p50 (ms)", "{:.3f}"),
    ("speedup_vs_eager", "vs eager", "{:.3g}x"), ("compile_s", "first call (s)", "{:.2f}"),
    ("peak_memory_MB", "peak mem (MB)", "{:.0f}"), ("max_abs_diff", "max abs diff", "{:.2g}"),
    ("kernels_per_iter", "kernels/iter", "{:.0f}"), ("launches_per_iter", "launches/iter", "{:.1f}"),
    ("busy_per_iter_us", "GPU busy/iter (ms)", "ms3"), ("idle_per_iter_us", "GPU idle/iter (ms)", "ms3"),
    ("utilization", "util", "{:.2f}"), ("verdict", "verdict", "{}"),
]
RANKED = [("workload", "workload", "{}"), ("contender", "contender", "{}"), ("eager_ms", "eager (ms)", "{:.3f}"),
          ("latency_median_ms", "this (ms)", "{:.3f}"), ("speedup_vs_eager", "speedup", "{:.3g}x"),
          ("regression", "", "{}")]
RATES = [("workload", "workload", "{}"), ("contender", "contender", "{}"),
         ("latency_median_ms", "latency (ms)", "{:.4f}"), ("achieved_TFLOPs", "TFLOP/s", "{:.3g}"),
         ("pct_peak_compute", "% of peak FLOP/s", "{:.0f}"), ("achieved_GBps", "GB/s", "{:.3g}"),
         ("pct_peak_bw", "% of peak GB/s", "{:.0f}")]


def _table(df: pd.DataFrame, columns: list[tuple[str, str, str]]) -> str:
    headers, rows = headline(df, columns)
    return _markdown_table(headers, rows) if rows else "(none)"


def _environment(manifests: dict[str, Manifest]) -> str:
    seen = []
    for m in manifests.values():
        env = m.environment or {}
        if env.get("device_name"):
            text = f"{env['device_name']} (torch {env.get('torch')}" + (
                f", CUDA {env.get('cuda_runtime')}, driver {env.get('cuda_driver')}" if env.get("cuda_driver") else "") + ")"
            if text not in seen:
                seen.append(text)
    return "; ".join(seen) or "no run has finished yet"


def _status(manifest: Manifest | None) -> str:
    """A cell's status; "not run" without a run.json."""
    return "not run" if manifest is None else manifest.status or "not run"


def _variant_note(suite) -> str | None:
    if not suite.variant_of:
        return None
    from tracekit.suite import SuiteError, load_suite

    full_path = suite.path.parent / f"{suite.variant_of}.toml" if suite.path else None
    try:
        full = f"{len(load_suite(full_path).cells)} cells" if full_path else "an unknown number of cells"
    except SuiteError:
        full = "cells that could not be read"
    return (f"This is **{suite.name}**, a trimmed variant of the suite `{suite.variant_of}` "
            f"(`workloads/{suite.variant_of}.toml`, {full}): {len(suite.cells)} cells. Trimmed: {suite.trimmed}\n")


def suite_report(suite, planned, analysis, manifests: dict[str, Manifest], command: str = "",
                 rewritten_by: str = "") -> str:
    """report.md of a suite: what ran where, the results table, speedups, idle time by
    cause, achieved rates, claims checked, what the traces show, and the cells without a result.

    ``command``: the bench command that ran the cells; ``rewritten_by``: the command
    that wrote this report from runs made earlier (``tracekit bench --report-only``)."""
    cmp = comparison(analysis.runs)
    if not cmp.empty:  # grid order, as the suite file lists the cells
        order = {p.name: i for i, p in enumerate(planned)}
        cmp = cmp.sort_values("run", key=lambda r: r.map(order).fillna(len(order)), kind="stable")
    states = pd.Series([_status(manifests.get(p.name)) for p in planned], dtype=object)
    parts = [f"# {suite.name}\n", suite.description + "\n" if suite.description else None,
             f"Made by `{command or 'tracekit bench'}` on {_environment(manifests)}"
             + (f"; this report written from those runs by `{rewritten_by}`" if rewritten_by else "") + ".\n",
             _variant_note(suite),
             "Cells: " + ", ".join(f"{n} {s}" for s, n in states.value_counts().items()) + ".\n",
             "Latency: median of the unprofiled timed iterations; per-iteration trace figures come from the "
             "profiled window (the profiler adds host overhead there). Speedups compare with the eager run of the "
             "same workload.\n",
             "## Results\n", _table(cmp, RESULTS) if not cmp.empty else "No runs have results yet.", ""]
    if not cmp.empty:
        ranked = cmp[cmp["contender"] != "eager"].dropna(subset=["speedup_vs_eager"])
        if not ranked.empty:
            ranked = ranked.sort_values("speedup_vs_eager", ascending=False).assign(
                regression=lambda d: ["slower than eager" if v < SLOWER else "" for v in d["speedup_vs_eager"]])
            parts += ["## Speedup over eager, ranked\n", _table(ranked, RANKED), ""]
        if (cmp["has_gpu"] == True).any():  # noqa: E712
            parts += ["## GPU idle time by cause\n", _table(cmp[cmp["has_gpu"] == True], IDLE), ""]  # noqa: E712
        rated = cmp.dropna(subset=["achieved_TFLOPs", "achieved_GBps"], how="all")
        if not rated.empty:
            sources = sorted({SOURCES[k] for k in map(key, rated["device_name"].dropna()) if k})
            parts += ["## Achieved rates\n", "A call's minimum work over its median latency; peaks: "
                      + ("; ".join(sources) or "none known for this device") + ".\n", _table(rated, RATES), ""]
    if suite.claims:
        claims = check_claims(suite.claims, cmp)
        parts += ["## Published claims, checked\n", _markdown_table(list(claims.columns), claims.values.tolist()), ""]
    parts += ["## What the traces show\n", *[f"- {line}" for line in findings(cmp)], ""]
    unfinished = [(p.name, manifests.get(p.name)) for p in planned]
    unfinished = [(n, m) for n, m in unfinished if m is None or m.status != "ok"]
    if unfinished:
        parts += ["## Cells without a result\n", _markdown_table(
            ["run", "status", "reason"],
            [[n, _status(m), re.sub(r"\s+", " ", str(m.reason or "") if m else "")[:300]]
             for n, m in unfinished]), ""]
    return "\n".join(p for p in parts if p is not None) + "\n"

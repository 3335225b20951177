"""A suite's findings, "what the traces show" in its report.md: sentences computed from the
comparison's numbers (:func:`tracekit.analysis.comparison.suite_comparison.comparison`), none
hand-written (speedups and regressions, launches vs kernels, where the time went, achieved
rates, memory, accuracy, failures)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from tracekit.analysis.comparison.suite_comparison import SLOWER


def _span(values: pd.Series, spec: str = ".3g") -> str:
    lo, hi = values.min(), values.max()
    return f"{lo:{spec}}" if math.isclose(lo, hi, rel_tol=5e-3) else f"{lo:{spec}}–{hi:{spec}}"


def suite_findings(cmp: pd.DataFrame) -> list[str]:
    """Bullet sentences on speedups, launches vs kernels, where the time went, rates,
    memory, accuracy and failures, each computed from ``cmp``
    (:func:`tracekit.analysis.comparison.suite_comparison.comparison`: one row per run with its eager figures)."""
    if cmp.empty:
        return ["No runs have results yet."]
    out: list[str] = []
    ok = cmp[cmp["status"] == "ok"]
    if not ok.empty and (ok["device_type"] == "cpu").all():
        names = ok["device_name"].dropna()
        out.append(f"All {len(ok)} finished runs ran on the CPU ({names.iloc[0] if len(names) else 'cpu'}): "
                   "their traces hold no GPU activity, so only latency and CPU-side figures apply.")
    for part in (_speedups, _by_size, _other_device, _launches, _time_sources, _rates, _memory, _accuracy):
        out += part(ok)
    return out + _failures(cmp[cmp["status"] != "ok"])


def _speedups(ok: pd.DataFrame) -> list[str]:
    """Per contender: where it is faster and slower than eager; speedups whose p10-p90
    latency ranges overlap, or whose two timers contradict, count as inconclusive, neither faster
    nor slower (:func:`tracekit.analysis.comparison.trust.inconclusive`)."""
    out = []
    others = ok[ok["contender"] != "eager"].dropna(subset=["speedup_vs_eager"])
    for contender, g in others.groupby("contender", sort=False):
        unsure = g["speedup_inconclusive"].fillna(False).astype(bool) if "speedup_inconclusive" in g else g["run"] == ""
        sure = g[~unsure]
        if sure.empty:
            out.append(f"{contender} vs eager: inconclusive on all {len(g)} workloads (the p10-p90 latency ranges "
                       "overlap or the timers contradict).")
            continue
        s = sure["speedup_vs_eager"]
        slower = sure[s < SLOWER]
        text = (f"{contender} vs eager: faster on {int((s >= 1 / SLOWER).sum())} of {len(g)} workloads, "
                f"speedup {_span(s)}x (median {s.median():.3g}x)")
        if unsure.any():
            text += (f"; inconclusive on {int(unsure.sum())} (the p10-p90 latency ranges overlap or the timers "
                     "contradict: "
                     + ", ".join(g.loc[unsure, "workload"]) + ")")
        if len(slower):
            worst = slower.loc[slower["speedup_vs_eager"].idxmin()]
            text += (f"; slower than eager on {len(slower)}: "
                     + ", ".join(f"{w} ({v:.3g}x)" for w, v in zip(slower["workload"], slower["speedup_vs_eager"]))
                     + f" — worst {worst['workload']}, {worst['latency_median_ms']:.3f} ms vs eager "
                     f"{worst['eager_ms']:.3f} ms")
        out.append(text + ".")
    return out


LAST_NUMBER = re.compile(r"(\d+)(?!.*\d)")  # the size in a model name: matmul4096, lm-small-1024, attn16x4096
NUMBER = re.compile(r"\d+")


def _size_axis(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Each row's kind of workload and its size on that kind's axis: the model name without its
    last number, sized by that number (``attn16x#`` at 256, 1024, ...); where that leaves a kind
    with one size only, the model family (every number out: ``vit#x#x#``), sized by eager's
    latency (vit16x6x384 < vit32x12x768 < vit32x18x1024)."""
    size = rows["op"].astype(str).map(lambda op: int(m.group(1)) if (m := LAST_NUMBER.search(op)) else -1)
    kind = rows["op"].astype(str).str.replace(LAST_NUMBER, "#", regex=True)
    rows = rows.assign(_size=size.astype(float), _kind=kind)
    single = rows.groupby(keys, dropna=False)["_size"].transform("nunique") == 1
    family = rows["op"].astype(str).str.replace(NUMBER, "#", regex=True)
    return rows.assign(_kind=kind.where(~single, family), _size=rows["_size"].where(~single, rows["eager_ms"]),
                       _by_latency=single)


def _by_size(ok: pd.DataFrame) -> list[str]:
    """Where the answer changes with size: per contender and kind of workload (same phase, dtype and
    device; workloads that differ in batch or sequence length are kinds apart; kinds and sizes as
    :func:`_size_axis` reads them), the verdict vs eager (faster, slower, no clear difference:
    :data:`SLOWER` and :func:`tracekit.analysis.comparison.trust.inconclusive`) at
    each size, smallest first, when it is not the same at all sizes. Returns one sentence per
    such kind."""
    rows = ok[ok["contender"] != "eager"].dropna(subset=["speedup_vs_eager"])
    if rows.empty:
        return []
    contender = rows["contender"].str.replace(LAST_NUMBER, "#", regex=True)
    speedup = rows["speedup_vs_eager"]
    unsure = rows.get("speedup_inconclusive", pd.Series(False, index=rows.index)).fillna(False).astype(bool)
    unclear = unsure | speedup.between(SLOWER, 1 / SLOWER, inclusive="left")
    verdict = np.where(unclear, "no clear difference", np.where(speedup >= 1 / SLOWER, "faster", "slower"))
    keys = ["_contender", "_kind", "phase", "dtype", "device_type"] + [k for k in ("batch", "seq") if k in rows]
    rows = _size_axis(rows.assign(_contender=contender, _verdict=verdict), keys)
    rows = rows.sort_values("_size", kind="stable")
    out = []
    for (who, what, phase, dtype, device, *_), g in rows[rows["_size"] >= 0].groupby(keys, sort=False, dropna=False):
        verdicts = g["_verdict"].tolist()
        if g["_size"].nunique() < len(g) or len(g) < 2 or len(set(verdicts)) == 1:
            continue
        runs, start = [], 0
        for i in range(1, len(g) + 1):
            if i == len(g) or verdicts[i] != verdicts[start]:
                part = g.iloc[start:i]
                sizes = f"{part['op'].iloc[0]}" + (f"–{part['op'].iloc[-1]}" if len(part) > 1 else "")
                runs.append(f"{verdicts[start]} at {sizes} ({_span(part['speedup_vs_eager'])}x)")
                start = i
        axis = ", sizes in order of eager's latency" if g["_by_latency"].all() else ""
        out.append(f"{who} vs eager on {what} ({dtype}, {phase}, {device}{axis}) changes with size: "
                   + "; ".join(runs) + ".")
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

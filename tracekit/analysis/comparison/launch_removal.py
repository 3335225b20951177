"""How much of reduce-overhead's gain is launch removal alone: the CUDA-graphs control.

``reduce-overhead`` (Inductor + CUDA graphs) gains from two things at once:
fusion (fewer, faster kernels) and launch removal (one ``cudaGraphLaunch``
per iteration instead of one launch per kernel). ``cudagraphs`` captures the
eager model unchanged, so it removes launches without fusing; the time it
saves against eager, over the time reduce-overhead saves, is the share of
reduce-overhead's gain that launch removal alone gives.
"""

from __future__ import annotations

import math

import pandas as pd

COLUMNS = ["workload", "latency_eager_ms", "latency_cudagraphs_ms", "latency_default_ms",
           "latency_reduce_overhead_ms", "saved_by_cudagraphs_ms", "saved_by_reduce_overhead_ms",
           "launch_removal_share"]


def launch_vs_fusion(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per workload that has ok runs of eager, cudagraphs and reduce-overhead.

    Args:
        runs: ``Analysis.runs`` (columns run, mode, status, latency_median_ms).

    Returns:
        COLUMNS: the unprofiled median latencies (ms) of eager, cudagraphs,
        default (NaN if absent) and reduce-overhead; the time each of
        cudagraphs and reduce-overhead saves against eager (ms); and
        launch_removal_share = saved_by_cudagraphs / saved_by_reduce_overhead
        (NaN when reduce-overhead saves nothing; over 1 means plain CUDA
        graphs beat reduce-overhead). The report words each row
        (:func:`tracekit.report.comparison_text.launch_removal`).
    """
    if runs.empty or "latency_median_ms" not in runs:
        return pd.DataFrame(columns=COLUMNS)
    ok = runs[runs["status"] == "ok"].assign(workload=lambda d: d["run"].str.rsplit("/", n=1).str[0])
    rows = []
    for workload, group in ok.groupby("workload", sort=True):
        lat = group.groupby("mode")["latency_median_ms"].median()
        if not {"eager", "cudagraphs", "reduce-overhead"} <= set(lat.index):
            continue
        saved_graphs = lat["eager"] - lat["cudagraphs"]
        saved_ro = lat["eager"] - lat["reduce-overhead"]
        rows.append({
            "workload": workload, "latency_eager_ms": lat["eager"], "latency_cudagraphs_ms": lat["cudagraphs"],
            "latency_default_ms": lat.get("default", math.nan), "latency_reduce_overhead_ms": lat["reduce-overhead"],
            "saved_by_cudagraphs_ms": saved_graphs, "saved_by_reduce_overhead_ms": saved_ro,
            "launch_removal_share": saved_graphs / saved_ro if saved_ro > 0 else math.nan,
        })
    return pd.DataFrame(rows, columns=COLUMNS)

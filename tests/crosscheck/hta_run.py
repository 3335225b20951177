"""Run HolisticTraceAnalysis on one trace and print its figures as JSON (run as a
subprocess by test_hta.py: HTA is slow to import and noisy on the logs).

Usage: python hta_run.py TRACE_FILE

Prints one JSON object: rank, min_ts (µs: HTA's times count from it), gpu (the
events HTA takes as GPU work: every event with a ``stream`` arg, as
[ts, dur, stream, cat, name]), kernels, idle_us and span_us (the idle time and
span of its temporal breakdown), temporal (the public temporal breakdown's
row, or {"error": ...} where it fails), idle_by_stream (its idle-time
breakdown), kernel_types and kernel_names (its kernel breakdown, with nothing
folded into "others"), categories (the events of its trace table per ``cat``).
"""

import json
import logging
import shutil
import sys
import tempfile
from pathlib import Path

logging.disable(logging.WARNING)
from hta.analyzers.breakdown_analysis import BreakdownAnalysis  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402

with tempfile.TemporaryDirectory() as d:
    src = Path(sys.argv[1])
    shutil.copy(src, Path(d) / ("rank-0.json.gz" if src.suffix == ".gz" else "rank-0.json"))
    a = TraceAnalysis(trace_dir=d)
    rank = next(iter(a.t.traces))          # the rank written in the trace (distributedInfo), else 0
    df = a.t.get_trace(rank)
    sym = a.t.symbol_table.get_sym_table()
    gpu = df[df["stream"].ne(-1)]
    # The idle time and span of HTA's temporal breakdown, from the method it calls: with HTA's
    # default rounding to whole µs an op shorter than 1 µs can get a negative duration, and the
    # public breakdown's assert non_compute_time >= 0 fires (the default-mode ViT fixture).
    idle_time, span = BreakdownAnalysis._get_idle_time_for_kernels(gpu.copy())
    try:
        temporal = a.get_temporal_breakdown(visualize=False).iloc[0].to_dict()
    except AssertionError:
        temporal = {"error": "AssertionError (non_compute_time >= 0)"}
    idle = a.get_idle_time_breakdown(ranks=[rank], visualize=False)[0]
    types, names = a.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True,
                                              num_kernels=10**9, duration_ratio=1.0)
    print(json.dumps({
        "rank": int(rank),
        "min_ts": float(a.t.min_ts),
        # HTA leaves out the last ProfilerStep iteration; these are the events it kept
        "gpu": [[float(r.ts), float(r.dur), int(r.stream), sym[r.cat], sym[r.name]] for r in gpu.itertuples()],
        "kernels": int(sum(sym[c] == "kernel" for c in gpu["cat"])),
        "idle_us": float(idle_time),
        "span_us": float(span),
        "temporal": {k: float(v) for k, v in temporal.items()} if "error" not in temporal else temporal,
        "idle_by_stream": [{"stream": int(r.stream), "category": r.idle_category, "idle_us": float(r.idle_time)}
                           for r in idle.itertuples()],
        "kernel_types": {r.kernel_type: float(r.sum) for r in types.itertuples()},
        "categories": {sym[c]: int(n) for c, n in df["cat"].value_counts().items()},
        "kernel_names": [{"name": r["name"], "type": r["kernel_type"], "sum_us": float(r["sum (us)"]),
                          "max_us": float(r["max (us)"]), "min_us": float(r["min (us)"]),
                          "mean_us": float(r["mean (us)"])} for r in names.to_dict("records")],
    }))

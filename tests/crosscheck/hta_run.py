"""Run HolisticTraceAnalysis on one trace and print its figures as JSON (run as a
subprocess by test_hta.py: HTA is slow to import and noisy on the logs).

Usage: python hta_run.py TRACE_FILE
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
    df = a.t.get_trace(0)
    ids = a.t.symbol_table.get_sym_id_map()
    kernels = int(df["cat"].isin([ids.get(c, -1) for c in ("kernel", "Kernel")]).sum())
    # The idle time and span of HTA's temporal breakdown, from the method it calls: the
    # breakdown itself asserts non_compute_time >= 0, which float timestamps (rounding
    # off) break by a rounding error.
    idle_time, span = BreakdownAnalysis._get_idle_time_for_kernels(df[df["stream"].ne(-1)].copy())
    idle = a.get_idle_time_breakdown(visualize=False)[0]
    gpu = df[df["stream"].ne(-1)]
    print(json.dumps({
        # HTA leaves out the last ProfilerStep iteration; these are the GPU ops it kept
        "kept": sorted(zip(gpu["ts"].round(3).tolist(), gpu["stream"].astype(int).tolist())),
        "kernels": kernels,
        "idle_us": float(idle_time),
        "span_us": float(span),
        "idle_by_stream": [{"stream": int(r.stream), "category": r.idle_category, "idle_us": float(r.idle_time)}
                           for r in idle.itertuples()],
    }))

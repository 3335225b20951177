"""Run HolisticTraceAnalysis on a folder of one job's rank traces and print its per-rank
figures as JSON (run as a subprocess by test_hta_job.py: HTA is slow to import and noisy).

Usage: python hta_job_run.py TRACE_FOLDER

Prints one JSON object: min_ts (µs: HTA's times count from it) and ranks: per rank,
gpu (the events HTA takes as GPU work, [ts, dur, stream, cat, name]), temporal (the row of
get_temporal_breakdown) and overlap_pctg (get_comm_comp_overlap's comp_comm_overlap_pctg).
"""

import json
import logging
import sys

logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis  # noqa: E402

a = TraceAnalysis(trace_dir=sys.argv[1])
sym = a.t.symbol_table.get_sym_table()
temporal = a.get_temporal_breakdown(visualize=False).set_index("rank")
overlap = a.get_comm_comp_overlap(visualize=False).set_index("rank")
ranks = {}
for rank, df in a.t.traces.items():
    gpu = df[df["stream"].ne(-1)]
    ranks[int(rank)] = {
        "gpu": [[float(r.ts), float(r.dur), int(r.stream), sym[r.cat], sym[r.name]] for r in gpu.itertuples()],
        "temporal": {k: float(v) for k, v in temporal.loc[rank].items()},
        "overlap_pctg": float(overlap.loc[rank, "comp_comm_overlap_pctg"]),
    }
print(json.dumps({"min_ts": float(a.t.min_ts), "ranks": ranks}))

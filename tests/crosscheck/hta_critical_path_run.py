"""Run HolisticTraceAnalysis 0.5.0's critical path on one trace and print it as JSON (run by
test_hta_critical_path.py in the HTA environment `make setup` makes: HTA's critical path
needs pandas < 3, tracekit's environment has pandas 3).

Usage: python hta_critical_path_run.py TRACE_FILE ANNOTATION INSTANCE

Prints {ok, min_ts (µs: HTA's times count from it), start and end (the path's first and
last node, µs), length (the sum of its edges' weights), events (name, cat, ts, dur of each
event on the path), edges (type and weight of each edge on the path)}.
"""

import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

logging.disable(logging.WARNING)
os.environ.setdefault("CRITICAL_PATH_ADD_ZERO_WEIGHT_LAUNCH_EDGE", "1")   # as HTA's own test sets it
from hta.trace_analysis import TraceAnalysis  # noqa: E402

src, annotation, instance = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
with tempfile.TemporaryDirectory() as d:
    shutil.copy(src, Path(d) / ("rank-0.json.gz" if src.suffix == ".gz" else "rank-0.json"))
    a = TraceAnalysis(trace_dir=d)
    graph, ok = a.critical_path_analysis(rank=0, annotation=annotation, instance_id=instance)
    df, sym = a.t.get_trace(0), a.t.symbol_table.get_sym_table()
    nodes = [graph.node_list[i] for i in graph.critical_path_nodes]
    events = [{"name": sym[int(df.loc[i, "name"])], "cat": sym[int(df.loc[i, "cat"])], "ts": int(df.loc[i, "ts"]),
               "dur": int(df.loc[i, "dur"])} for i in sorted(graph.critical_path_events_set)]
    edges = [{"type": e.type.value, "weight": int(e.weight)} for e in graph.critical_path_edges_set]
    print(json.dumps({"ok": bool(ok), "min_ts": int(a.t.min_ts), "start": int(nodes[0].ts), "end": int(nodes[-1].ts),
                      "length": sum(e["weight"] for e in edges), "events": events, "edges": edges}))

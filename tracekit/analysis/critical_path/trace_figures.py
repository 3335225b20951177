"""The critical path's figures for one trace's analysis (the registered analysis ``critical_path``,
:mod:`tracekit.analysis.registry`).

By default a trace whose run.json has the unprofiled latency gets its calibrated CUDA-graph
prediction (``cuda_graphs_predicted_ms``, ``cuda_graphs_saving_ms``: what the reports' "CUDA
graphs could save" shows); with the option ``critical_path`` (``tracekit analyze
--critical-path``) also the split of each iteration's critical path and what is on it,
calibrated where it can be, as traced (and said so) where not. The option ``annotation`` says
what marks an iteration (default ``ProfilerStep#N``).
"""

from __future__ import annotations

import math

import pandas as pd

from tracekit.analysis.critical_path import (
    analyze,
    can_analyze,
    cannot_retime_launches,
    name_segments,
    steady_rows,
    top,
)
from tracekit.analysis.critical_path import reasons as why
from tracekit.analysis.critical_path.edits import Edit
from tracekit.analysis.critical_path.replay_costs import default_replay
from tracekit.analysis.critical_path.path import PARTS, marker_table
from tracekit.analysis.critical_path.predict import predict, with_capture_path
from tracekit.analysis.options import AnalysisOptions, RunFacts
from tracekit.analysis.registry import Inputs, Output, register
from tracekit.trace.reader import EventTables

NAN = float("nan")
EMPTY = {"cuda_graphs_predicted_ms": NAN, "cuda_graphs_saving_ms": NAN, "cp_calibrated": False,
         "cp_host_scale": NAN, "cp_gpu_scale": NAN}


def trace_figures(tables: EventTables, options: AnalysisOptions, run: RunFacts,
                  gpu_attribution: pd.DataFrame | None = None) -> tuple[dict, dict[str, pd.DataFrame]]:
    """(row fields, tables) of the critical path of one trace.

    Args:
        tables: the trace's event tables.
        options: ``critical_path`` (the split and what is on the path, besides the prediction)
            and ``annotation`` (what marks an iteration; None: ProfilerStep#N).
        run: run.json's unprofiled latency (``latency_ms``, to calibrate to) and host time
            (``host_ms``, for a GPU-bound run's calibration; a job's rank: its own, ``rank_host_ms``).
        gpu_attribution: the trace's :func:`tracekit.analysis.attribution.attribute` frame
            (module and op of each GPU op), to name what is on the path; None: unnamed.

    Returns:
        Row: cuda_graphs_predicted_ms (the calibrated ``cuda-graphs`` what-if, ms, with the kernels of
        the run's capture path where it traced them, as ``tracekit whatif``; NaN without an
        unprofiled latency to calibrate to, with fewer than two launches, or an ``annotation``
        the trace lacks), cuda_graphs_saving_ms (the unprofiled latency less it, ms per
        iteration), cp_calibrated, cp_host_scale, cp_gpu_scale; with ``critical_path``:
        cp_latency_us (the modelled steady-state iteration, µs), ``cp_<part>_share`` (each part's
        share of the critical path, :data:`PARTS`) and critical_path_note (a tuple of reasons,
        :mod:`~tracekit.analysis.critical_path.reasons`: uncalibrated, what the trace lacks, what
        could not be computed; or why there is no path; () when nothing). Tables
        (``critical_path``): critical_path (per iteration: step, latency_us and ``<part>_us``),
        critical_path_top (what has the most time on the path, by name, op and module:
        :func:`tracekit.analysis.critical_path.top`).
    """
    row, out = dict(EMPTY), {}
    latency_ms, annotation = run.latency_ms, options.annotation
    cannot = can_analyze([(0, tables)]) or cannot_retime_launches([(0, tables)])
    if cannot is None and annotation is not None and marker_table(tables, annotation).empty:
        cannot = {"code": why.NO_ANNOTATION, "annotation": annotation}
    calibratable = latency_ms is not None and math.isfinite(latency_ms) and latency_ms > 0
    if cannot is not None or not (calibratable or options.critical_path):
        if options.critical_path:
            row["critical_path_note"] = ({"code": why.NO_PATH, "why": cannot},) if cannot else ()
        return row, out
    if calibratable:
        graphs = [Edit("cuda-graphs")]
        result = predict(tables, graphs, latency_ms, annotation=annotation, replay=default_replay([(0, tables)]),
                         host_ms=_host_ms(tables, run))
        result = with_capture_path(result, [(0, tables)], run.capture_trace, graphs, annotation)
        cal, path = result.calibration, result.before
        row.update(cp_calibrated=True, cp_host_scale=cal.host_scale, cp_gpu_scale=cal.gpu_scale,
                   cuda_graphs_predicted_ms=result.predicted_ms, cuda_graphs_saving_ms=latency_ms - result.predicted_ms)
        notes = []
    else:   # the profiled window as traced: one re-timing, no prediction
        path = analyze(tables, annotation)
        notes = [{"code": why.UNCALIBRATED}]
    if options.critical_path:
        split = path.split
        rows = steady_rows(split)
        mean = {c: float(rows[c].mean()) for c in rows.columns if c.endswith("_us")}
        total = mean.get("latency_us", NAN)
        row["cp_latency_us"] = path.latency_us()
        row.update({f"cp_{p}_share": mean.get(f"{p}_us", NAN) / total if total else NAN for p in PARTS})
        row["critical_path_note"] = tuple(notes + path.missing + path.problems)
        out["critical_path"] = split.drop(columns=["rank"])
        if gpu_attribution is not None:
            name_segments(path, {0: gpu_attribution})
        out["critical_path_top"] = top(path)
    return row, out


def _host_ms(tables: EventTables, run: RunFacts) -> float | None:
    """The unprofiled host time per call to calibrate a trace with: its rank's own, for a rank of a
    job whose run.json has it (``RunFacts.rank_host_ms``), else the run's."""
    rank = (tables.meta.get("distributed") or {}).get("rank")
    return (run.rank_host_ms or {}).get(rank, run.host_ms) if isinstance(rank, int) else run.host_ms


@register("critical_path", reads=("gpu_ops", "host_calls", "cpu_ops", "syncs", "markers", "comms"),
          uses=("attribution_tables",), order=80, tables=("critical_path", "critical_path_top"),
          default=Output(row=dict(EMPTY)), columns={
              "cuda_graphs_predicted_ms": "ms", "cuda_graphs_saving_ms": "ms", "cp_calibrated": "",
              "cp_host_scale": "ratio", "cp_gpu_scale": "ratio", "cp_latency_us": "µs",
              **{f"cp_{p}_share": "share" for p in PARTS}, "critical_path_note": ""})
def _critical_path_analysis(x: Inputs) -> Output:
    """:func:`trace_figures`, naming the path's ops and modules from the attribution where it stands."""
    row, tables = trace_figures(x.tables, x.options, x.run, x["attribution_tables"])
    return Output(row=row, tables=tables)

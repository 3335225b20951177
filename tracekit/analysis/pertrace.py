"""Every analysis of one trace, from one set of event tables: its run row and its tables."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.analysis import (collectives, communication, cpu_ops, idle, integrity, kernels, launches, modules,
                               summary, timeline, transfers, verdict)
from tracekit.analysis.attribution import attribute
from tracekit.trace.reader import EventTables

QUANTILES = np.linspace(0, 1, 101)


@dataclass
class TraceResult:
    """row: the flat metrics of the trace (units in the names);
    tables: name -> DataFrame (see :func:`analyze_trace`)."""

    row: dict
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def analyze_trace(tables: EventTables, iterations: int | None = None,
                  latency_ms: float | None = None, attribution: dict | None = None) -> TraceResult:
    """Run every analysis on one trace.

    Args:
        tables: the trace's event tables.
        iterations: iterations in the profiled window, used when the trace has
            no ``ProfilerStep`` markers (the runner records it in run.json).
        latency_ms: the run's unprofiled latency (median, ms) from run.json,
            to check the verdict against the profiler's overhead.
        attribution: run.json's ``attribution`` (module scopes, Inductor
            provenance, CUDA-graph captures), for :mod:`tracekit.analysis.attribution`.

    Returns:
        A :class:`TraceResult`. Its row has :func:`summary.summarize`'s metrics,
        the device idle breakdown (``idle_<cause>_us``, ``gaps_<cause>``), the
        launch metrics of :func:`launches.summary`, the verdict, and
        ``attributed_busy_share`` (GPU busy time attributed to a module). Its tables:

        * iterations: per marked iteration: kernels, launches, busy, span,
          idle by cause, first launch and framework CPU time before it.
        * devices: per device busy/span/utilization and idle by cause.
        * streams: per (device, stream) idle by cause, gaps between ops of
          one stream (HolisticTraceAnalysis' view).
        * idle_histogram: gap-length bins x cause: gaps, idle_us.
        * verdict_evidence: the figures behind the verdict with their rules
          (:func:`verdict.evidence_rows`).
        * launch_apis: launches per host API.
        * kernels: the top 20 kernels; kernel_classes: time by class.
        * kernel_quantiles: kernel duration (µs) at quantiles 0, 0.01, ... 1.
        * transfers: memcpy/memset bytes and GB/s by direction (H2D, D2H, D2D,
          memset, ...), per run and per iteration; transfer_iterations: the
          same per marked iteration (:mod:`tracekit.analysis.transfers`).
        * timeline: one marked iteration's GPU ops per stream and CUDA API calls
          (:func:`timeline.iteration_timeline`).
        * integrity: what keeps the trace's figures from being trusted
          (:func:`integrity.checks`); the row's ``integrity`` and
          ``integrity_detail`` sum it up, and a failed check makes the verdict
          ``undetermined``.
        * cpu_ops: CPU ops by name: calls and self time, per iteration
          (:func:`cpu_ops.by_op`).
        * collectives: one row per collective call, numbered by ``call``
          (:func:`collectives.calls`); collective_idle: the GPU idle gaps inside
          them (:func:`communication.idle_in_calls`), for the job analysis.
        * attribution: GPU busy, kernels, launches, idle by cause per (module,
          op, kernel, rule) (:func:`modules.long_table`); attribution_modules,
          attribution_ops: the same per module (and op) at depth
          ``modules.DEFAULT_DEPTH``; attribution_iterations: attributed share per
          iteration (:mod:`tracekit.analysis.modules`).

        The row also has the rank's communication, computation, their overlap and
        exposed communication (:func:`communication.breakdown`) and ``collectives``.
    """
    row = summary.summarize(tables, iterations)
    n_iter = row["iterations"]
    # The analyses on the CPU-op nest first, while little else is held (the idle gaps after the
    # CPU ops' self times), then its memory back; the per-op attribution is summed up at once and
    # dropped (a frame as long as the GPU ops).
    by_op, host = cpu_ops.by_op(tables, n_iter), modules.scope_times(tables)
    gaps = idle.gaps(tables)
    attributed = attribute(tables, attribution)
    tables.forget("nest")  # attribute is the last analysis on the CPU-op nest: its memory back before the sums
    attributed = modules.attributed_ops(tables, gaps=gaps, att=attributed)
    by_key, attributed_iterations = modules.long_table(attributed), modules.per_iteration(attributed)
    del attributed
    checks = integrity.checks(tables)
    row.update(integrity.summary(checks))
    if row["integrity"] == "failed" and not tables.has_gpu:  # not "CPU ops only": GPU ops were not recorded
        row["note"] = row["integrity_detail"]
    if tables.has_gpu:
        row.update(idle.breakdown(gaps).iloc[0].to_dict())
    else:  # no GPU timeline: idle time is undefined, not zero
        row.update(dict.fromkeys(idle.breakdown(gaps).columns, float("nan")))
    span = row["active_span_us"]
    for cause in idle.CAUSES:  # share of the GPU's active span idle for each cause (0..1)
        row[f"idle_{cause}_share"] = row[f"idle_{cause}_us"] / span if span and span > 0 else float("nan")
    launch = launches.launch_table(tables)
    row.update(launches.summary(tables, launch))
    per_iter = summary.per_iteration(tables)
    if len(per_iter) and tables.has_gpu:  # a typical iteration's GPU work, for the verdict's unprofiled check
        row["iteration_busy_us"] = float(per_iter["gpu_busy_us"].median())
    row.update(verdict.verdict(row, latency_ms))
    row.update(communication.breakdown(tables))
    calls = collectives.calls(tables)
    row["collectives"] = len(calls)

    if len(per_iter):
        by_iter = idle.breakdown(gaps, ["iteration"]).rename(columns={"iteration": "step"})
        per_iter = (per_iter.merge(by_iter.drop(columns=["idle_us", "idle_gaps"]), on="step", how="left")
                    .merge(launches.dispatch_per_iteration(tables, launch), on="step", how="left")
                    .fillna({c: 0 for c in by_iter.columns if c != "step"}))
    devices = summary.per_device(tables)
    if len(devices):
        devices = devices.merge(idle.breakdown(gaps, ["device"]).drop(columns=["idle_us", "idle_gaps"]),
                                on="device", how="left").fillna(0)
    streams = idle.breakdown(idle.gaps(tables, per_stream=True), ["device", "stream"])
    row["attributed_busy_share"] = modules.coverage(by_key)
    durations = kernels.durations(tables)
    return TraceResult(row=row, tables={
        "iterations": per_iter,
        "devices": devices,
        "streams": streams,
        "idle_histogram": idle.histogram(gaps) if len(gaps) else pd.DataFrame(),
        "verdict_evidence": pd.DataFrame(verdict.evidence_rows(row), columns=["evidence", "value", "rule", "supports"]),
        "launch_apis": launches.by_api(launch, n_iter),
        "kernels": kernels.top_kernels(tables),
        "kernel_classes": kernels.by_class(tables),
        "kernel_quantiles": pd.DataFrame({"quantile": QUANTILES, "dur_us": np.quantile(durations, QUANTILES)})
        if len(durations) else pd.DataFrame(),
        "transfers": transfers.by_direction(tables, n_iter),
        "transfer_iterations": transfers.per_iteration(tables),
        "timeline": timeline.iteration_timeline(tables),
        "integrity": checks,
        "cpu_ops": by_op,
        "collectives": calls.assign(call=np.arange(len(calls))),
        "collective_idle": communication.idle_in_calls(gaps, calls),
        "attribution": by_key,
        "attribution_modules": modules.by_module(by_key, modules.DEFAULT_DEPTH, n_iter, host),
        "attribution_ops": modules.by_op(by_key, modules.DEFAULT_DEPTH, n_iter),
        "attribution_iterations": attributed_iterations,
    })

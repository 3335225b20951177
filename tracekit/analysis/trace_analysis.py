"""Every analysis of one trace, from one set of event tables: its run row and its tables."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.analysis.attribution import modules
from tracekit.analysis.attribution.gpu_ops import attribute
from tracekit.analysis.critical_path.trace_figures import EMPTY as CP_EMPTY
from tracekit.analysis.critical_path.trace_figures import trace_figures
from tracekit.analysis.distributed import collectives, communication
from tracekit.analysis.metrics import cpu_ops, idle, integrity, kernels, launches, summary, timeline, transfers, verdict
from tracekit.manifest import Attribution
from tracekit.trace.reader import EventTables

QUANTILES = np.linspace(0, 1, 101)


@dataclass
class TraceResult:
    """row: the flat metrics of the trace (units in the names);
    tables: name -> DataFrame (see :func:`analyze_trace`);
    failures: the analyses that raised (:class:`Sections`)."""

    row: dict
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    failures: list[dict] = field(default_factory=list)


@dataclass
class Sections:
    """Runs the analyses of one trace so that one that raises loses only its own figures.

    An analysis that raises leaves its default (empty tables, NaN figures) and a failure,
    {"analysis", "reason" (``Type: message``), "traceback"}; the analyses that need its
    result (``after``) are not run and leave theirs. A bug in one analysis is then a line
    of the report, not the loss of the trace (issue 31); the cost is one ``try`` per analysis.
    """

    failures: list[dict] = field(default_factory=list)

    def run(self, name: str, make, default, after: list[str] | tuple = ()):
        """``make()``, or ``default`` if it raises or an analysis of ``after`` failed."""
        if any(self.failed(a) for a in after):
            return default
        try:
            return make()
        except Exception as exc:  # noqa: BLE001 - any bug of one analysis stays in it
            self.failures.append({"analysis": name, "reason": f"{type(exc).__name__}: {exc}",
                                  "traceback": traceback.format_exc()})
            return default

    def failed(self, name: str) -> bool:
        return any(f["analysis"] == name for f in self.failures)

    def reason(self, *names: str) -> str:
        """``name failed: reason`` of the failed analyses among ``names``, "; "-joined."""
        return "; ".join(f"{f['analysis']} failed: {f['reason']}" for f in self.failures if f["analysis"] in names)

    def summary(self) -> str:
        """Every failure as ``name failed: reason``, "; "-joined ("" when none)."""
        return self.reason(*dict.fromkeys(f["analysis"] for f in self.failures))


def analyze_trace(tables: EventTables, iterations: int | None = None,
                  latency_ms: float | None = None, attribution: Attribution | None = None,
                  host_ms: float | None = None, critical_path: bool = False) -> TraceResult:
    """Run every analysis on one trace.

    Args:
        tables: the trace's event tables.
        iterations: iterations in the profiled window, used when the trace has
            no ``ProfilerStep`` markers (the runner records it in run.json).
        latency_ms: the run's unprofiled latency (median, ms) from run.json,
            to check the verdict against the profiler's overhead.
        attribution: run.json's ``attribution`` (module scopes, Inductor
            provenance, CUDA-graph captures), for :mod:`tracekit.analysis.attribution.gpu_ops`.
        host_ms: the run's unprofiled host time per call (run.json ``host_ms`` median),
            for the critical path's calibration of a GPU-bound run.
        critical_path: also the critical path of each iteration (tables critical_path,
            critical_path_top; :func:`tracekit.analysis.critical_path.trace_figures.trace_figures`).

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
          same per marked iteration (:mod:`tracekit.analysis.metrics.transfers`).
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
          iteration (:mod:`tracekit.analysis.attribution.modules`).

        * critical_path, critical_path_top (with ``critical_path``): each iteration's
          critical path split into its parts, and what is on it most.

        The row also has the calibrated CUDA-graph prediction where run.json has the
        unprofiled latency (``cuda_graphs_predicted_ms``, ``cuda_graphs_saving_ms``:
        :mod:`tracekit.analysis.critical_path.trace_figures`), the rank's communication, computation, their overlap and
        exposed communication (:func:`communication.breakdown`), ``collectives``, and
        ``failed_analyses``: each analysis that raised, ``name failed: reason``
        ("" when none; :class:`Sections`: its figures are left NaN or empty, the
        others stand, and the result's ``failures`` keep the tracebacks).

    Raises:
        Whatever :func:`summary.summarize` raises: without its base figures the trace
        has none (:func:`tracekit.analysis.runs.analyze` makes that the file's error).
    """
    row = summary.summarize(tables, iterations)  # the base of every figure: its failure fails the trace
    n_iter = row["iterations"]
    s = Sections()
    # The analyses on the CPU-op nest first, while little else is held (the idle gaps after the
    # CPU ops' self times), then its memory back; the per-op attribution is summed up at once and
    # dropped (a frame as long as the GPU ops).
    by_op = s.run("cpu_ops", lambda: cpu_ops.by_op(tables, n_iter), pd.DataFrame())
    host = s.run("modules", lambda: modules.scope_times(tables), None)
    gaps = s.run("idle", lambda: idle.gaps(tables), None)

    gpu_attribution = None   # each GPU op's module and op, kept for the critical path's names

    def attribution_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
        nonlocal gpu_attribution
        attributed = attribute(tables, attribution)
        if critical_path:
            gpu_attribution = attributed[["module", "op"]]
        tables.forget("nest")  # attribute is the last analysis on the CPU-op nest: its memory back before the sums
        attributed = modules.attributed_ops(tables, gaps=gaps, att=attributed)
        return modules.long_table(attributed), modules.per_iteration(attributed)
    by_key, attributed_iterations = s.run("attribution", attribution_tables,
                                          (modules.long_table(pd.DataFrame()), pd.DataFrame()), after=["idle"])
    tables.forget("nest")
    checks = s.run("integrity", lambda: integrity.checks(tables), None)
    if checks is None:  # unchecked: the figures are not vouched for
        checks = pd.DataFrame([{"check": "integrity", "status": "failed", "count": 0,
                                "detail": f"the integrity checks failed ({s.reason('integrity')})"}])
    row.update(integrity.summary(checks))
    if row["integrity"] == "failed" and not tables.has_gpu:  # not "CPU ops only": GPU ops were not recorded
        row["note"] = row["integrity_detail"]
    no_idle = dict.fromkeys(idle.breakdown(pd.DataFrame()).columns, float("nan"))
    # no GPU timeline: idle time is undefined, not zero
    row.update(s.run("idle", lambda: idle.breakdown(gaps).iloc[0].to_dict() if tables.has_gpu else no_idle, no_idle,
                     after=["idle"]))
    span = row["active_span_us"]
    for cause in idle.CAUSES:  # share of the GPU's active span idle for each cause (0..1)
        row[f"idle_{cause}_share"] = row[f"idle_{cause}_us"] / span if span and span > 0 else float("nan")
    launch = s.run("launches", lambda: launches.launch_table(tables), None)
    row.update(s.run("launches", lambda: launches.summary(tables, launch), {}, after=["launches"]))
    per_iter = s.run("iterations", lambda: summary.per_iteration(tables), pd.DataFrame())
    if len(per_iter) and tables.has_gpu:  # a typical iteration's GPU work, for the verdict's unprofiled check
        row["iteration_busy_us"] = float(per_iter["gpu_busy_us"].median())
    judged = s.run("verdict", lambda: verdict.verdict(row, latency_ms), None, after=["idle", "launches"])
    row.update(judged or verdict.undetermined(f"not judged: {s.reason('idle', 'launches', 'verdict')}"))
    row.update(s.run("communication", lambda: communication.breakdown(tables), {}))
    calls = s.run("collectives", lambda: collectives.calls(tables), pd.DataFrame(columns=collectives.CALL_COLUMNS))
    row["collectives"] = float("nan") if s.failed("collectives") else len(calls)
    cp_row, cp_tables = s.run("critical_path", lambda: trace_figures(tables, latency_ms, host_ms, critical_path,
                                                                     gpu_attribution), (dict(CP_EMPTY), {}))
    row.update(cp_row)

    if len(per_iter):
        def with_idle_and_dispatch() -> pd.DataFrame:
            by_iter = idle.breakdown(gaps, ["iteration"]).rename(columns={"iteration": "step"})
            return (per_iter.merge(by_iter.drop(columns=["idle_us", "idle_gaps"]), on="step", how="left")
                    .merge(launches.dispatch_per_iteration(tables, launch), on="step", how="left")
                    .fillna({c: 0 for c in by_iter.columns if c != "step"}))
        per_iter = s.run("iterations", with_idle_and_dispatch, per_iter, after=["idle", "launches"])

    def per_device() -> pd.DataFrame:
        devices = summary.per_device(tables)
        if len(devices):
            devices = devices.merge(idle.breakdown(gaps, ["device"]).drop(columns=["idle_us", "idle_gaps"]),
                                    on="device", how="left").fillna(0)
        return devices
    row["attributed_busy_share"] = modules.coverage(by_key)

    def quantiles() -> pd.DataFrame:
        durations = kernels.durations(tables)
        return pd.DataFrame({"quantile": QUANTILES, "dur_us": np.quantile(durations, QUANTILES)}) \
            if len(durations) else pd.DataFrame()
    empty = pd.DataFrame
    out = TraceResult(row=row, tables={
        "iterations": per_iter,
        "devices": s.run("devices", per_device, empty(), after=["idle"]),
        "streams": s.run("idle", lambda: idle.breakdown(idle.gaps(tables, per_stream=True), ["device", "stream"]),
                         empty(), after=["idle"]),
        "idle_histogram": s.run("idle", lambda: idle.histogram(gaps) if len(gaps) else empty(), empty(),
                                after=["idle"]),
        "verdict_evidence": s.run("verdict", lambda: pd.DataFrame(verdict.evidence_rows(row), columns=[
            "evidence", "value", "rule", "supports"]), empty()),
        "launch_apis": s.run("launches", lambda: launches.by_api(launch, n_iter), empty(), after=["launches"]),
        "kernels": s.run("kernels", lambda: kernels.top_kernels(tables), empty()),
        "kernel_classes": s.run("kernels", lambda: kernels.by_class(tables), empty()),
        "kernel_quantiles": s.run("kernels", quantiles, empty()),
        "transfers": s.run("transfers", lambda: transfers.by_direction(tables, n_iter), empty()),
        "transfer_iterations": s.run("transfers", lambda: transfers.per_iteration(tables), empty()),
        "timeline": s.run("timeline", lambda: timeline.iteration_timeline(tables), empty()),
        "integrity": checks,
        "cpu_ops": by_op,
        "collectives": calls.assign(call=np.arange(len(calls))),
        "collective_idle": s.run("collectives", lambda: communication.idle_in_calls(gaps, calls), empty(),
                                 after=["idle", "collectives"]),
        "attribution": by_key,
        "attribution_modules": s.run("attribution", lambda: modules.by_module(by_key, modules.DEFAULT_DEPTH, n_iter,
                                                                              host), empty()),
        "attribution_ops": s.run("attribution", lambda: modules.by_op(by_key, modules.DEFAULT_DEPTH, n_iter), empty()),
        "attribution_iterations": attributed_iterations,
        **cp_tables,
    }, failures=s.failures)
    row["failed_analyses"] = s.summary()
    return out

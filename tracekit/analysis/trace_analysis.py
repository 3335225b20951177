"""Every analysis of one trace, from one set of event tables: its run row and its tables.

The analyses are the registered ones (:mod:`tracekit.analysis.registry`): importing this module
imports every module of :mod:`.metrics`, :mod:`.attribution`, :mod:`.distributed` and
:mod:`.critical_path`, each of which registers the analyses it holds; :func:`analyze_trace` runs
them in the order their declarations allow (:func:`run_order`), each isolated (:class:`Sections`).
"""

from __future__ import annotations

import importlib
import pkgutil
import traceback
from dataclasses import dataclass, field

import pandas as pd

from tracekit.analysis import attribution, critical_path, distributed, metrics
from tracekit.analysis.options import AnalysisOptions, RunFacts
from tracekit.analysis.registry import ANALYSES, SHARED_TABLES, Inputs, Output, TraceAnalysis
from tracekit.trace.reader import EventTables

for _package in (metrics, attribution, distributed, critical_path):
    for _module in sorted(m.name for m in pkgutil.iter_modules(_package.__path__)):
        importlib.import_module(f"{_package.__name__}.{_module}")


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
    """Runs analyses so that one that raises loses only its own figures.

    An analysis that raises leaves its default and a failure, {"analysis", "reason"
    (``Type: message``), "traceback"}. A bug in one analysis is then a line of the report,
    not the loss of the trace (issue 31); the cost is one ``try`` per analysis.
    """

    failures: list[dict] = field(default_factory=list)

    def run(self, name: str, make, default):
        """``make()``, or ``default`` if it raises."""
        try:
            return make()
        except Exception as exc:  # noqa: BLE001 - any bug of one analysis stays in it
            self.failures.append({"analysis": name, "reason": f"{type(exc).__name__}: {exc}",
                                  "traceback": traceback.format_exc()})
            return default

    def failed(self, name: str) -> bool:
        """True when the analysis ``name`` raised."""
        return any(f["analysis"] == name for f in self.failures)

    def reason(self, *names: str) -> str:
        """``name failed: reason`` of the failed analyses among ``names``, "; "-joined."""
        return "; ".join(f"{f['analysis']} failed: {f['reason']}" for f in self.failures if f["analysis"] in names)

    def summary(self) -> str:
        """Every failure as ``name failed: reason``, "; "-joined ("" when none)."""
        return self.reason(*dict.fromkeys(f["analysis"] for f in self.failures))


def run_order(analyses: list[TraceAnalysis]) -> list[TraceAnalysis]:
    """The order the analyses run in: the required ones first, then each once what it needs and
    uses has run, preferring, among those that can run, one that reads a shared table (the CPU-op
    nest: it is freed after its last reader, so its readers run together while little else is
    held), then one that reads a result still held (freed after its last reader), then the lowest
    ``order`` (ties by name).

    Raises:
        ValueError: an analysis needs or uses one that is not registered, or they depend on each
            other in a circle.
    """
    names = {a.name for a in analyses}
    unknown = sorted(f"{a.name} reads {d}" for a in analyses for d in a.needs + a.uses if d not in names)
    if unknown:
        raise ValueError(f"analyses not registered: {', '.join(unknown)}")
    pending = sorted((a for a in analyses if not a.required), key=lambda a: (a.order, a.name))
    done = sorted((a for a in analyses if a.required), key=lambda a: (a.order, a.name))
    ran = {a.name for a in done}
    while pending:
        ready = [a for a in pending if all(d in ran for d in a.needs + a.uses)]
        if not ready:
            raise ValueError(f"analyses that depend on each other: {', '.join(a.name for a in pending)}")
        held = {d for a in pending for d in a.needs + a.uses if d in ran}
        pick = min(ready, key=lambda a: (not set(a.reads) & set(SHARED_TABLES), not set(a.needs + a.uses) & held))
        pending.remove(pick)
        done.append(pick)
        ran.add(pick.name)
    return done


def analyze_trace(tables: EventTables, options: AnalysisOptions | None = None,
                  run: RunFacts | None = None) -> TraceResult:
    """Run every registered analysis on one trace.

    Args:
        tables: the trace's event tables.
        options: the analysis's options (:class:`tracekit.analysis.options.AnalysisOptions`:
            the critical path, what marks an iteration, the iterations of a trace without
            markers); None: the defaults.
        run: what the trace's run.json says (:class:`tracekit.analysis.options.RunFacts`: the
            profiled window's iterations, the unprofiled latency and host time, the attribution
            record); None: nothing (a bare trace).

    Returns:
        A :class:`TraceResult`. Its row: the columns each analysis declares, in their ``order``
        (:func:`tracekit.analysis.metrics.summary.summarize`'s headline figures, integrity,
        the device idle breakdown (``idle_<cause>_us``, ``gaps_<cause>``, ``idle_<cause>_share``),
        the launch metrics, the verdict, communication, ``collectives``, the critical path's
        (the calibrated CUDA-graph prediction), ``attributed_busy_share``), and
        ``failed_analyses``: each analysis that raised, ``name failed: reason`` ("" when none;
        its figures are left as its declared default, the analyses that need it are not run,
        the others stand, and the result's ``failures`` keep the tracebacks). Its tables:

        * iterations: per marked iteration: kernels, launches, busy, span, idle by cause, first
          launch and framework CPU time before it (:mod:`tracekit.analysis.metrics.summary`).
        * devices: per device busy/span/utilization and idle by cause.
        * streams: per (device, stream) idle by cause, gaps between ops of one stream
          (HolisticTraceAnalysis' view); idle_histogram: gap-length bins x cause: gaps, idle_us
          (:mod:`tracekit.analysis.metrics.idle`).
        * verdict_evidence: the figures behind the verdict and which way each points
          (:func:`tracekit.analysis.metrics.verdict.evidence_rows`; the report adds their rules).
        * launch_apis: launches per host API (:mod:`tracekit.analysis.metrics.launches`).
        * kernels: the top 20 kernels; kernel_classes: time by class; kernel_quantiles: kernel
          duration (µs) at quantiles 0, 0.01, ... 1 (:mod:`tracekit.analysis.metrics.kernels`).
        * transfers: memcpy/memset bytes and GB/s by direction (H2D, D2H, D2D, memset, ...), per
          run and per iteration; transfer_iterations: the same per marked iteration
          (:mod:`tracekit.analysis.metrics.transfers`).
        * timeline: one marked iteration's GPU ops per stream and CUDA API calls
          (:mod:`tracekit.analysis.metrics.timeline`).
        * integrity: what keeps the trace's figures from being trusted
          (:mod:`tracekit.analysis.metrics.integrity`); a failed check makes the verdict
          ``undetermined``.
        * cpu_ops: CPU ops by name: calls and self time, per iteration
          (:mod:`tracekit.analysis.metrics.cpu_ops`).
        * collectives: one row per collective call, numbered by ``call``; collective_idle: the
          GPU idle gaps inside them, for the job analysis (:mod:`tracekit.analysis.distributed.collectives`).
        * attribution: GPU busy, kernels, launches, idle by cause per (module, op, kernel, rule);
          attribution_modules, attribution_ops: the same per module (and op) at depth
          ``modules.DEFAULT_DEPTH``; attribution_iterations: attributed share per iteration
          (:mod:`tracekit.analysis.attribution.modules`).
        * critical_path, critical_path_top (with ``options.critical_path``): each iteration's
          critical path split into its parts, and what is on it most
          (:mod:`tracekit.analysis.critical_path.trace_figures`).

        And those of any other registered analysis.

    Raises:
        Whatever a required analysis raises (the summary: without its base figures the trace
        has none; :func:`tracekit.analysis.runs.analyze` makes that the file's error).
        ValueError: the registered analyses' declarations do not fit together (:func:`run_order`).
    """
    options, run = options or AnalysisOptions(), run or RunFacts()
    plan = run_order(list(ANALYSES.values()))
    s = Sections()
    outputs: dict[str, Output] = {}
    values: dict = {}
    why: dict[str, str] = {}    # analysis -> why it failed or was not run
    base: dict = {}
    for i, a in enumerate(plan):
        out = _step(a, Inputs(tables, options, run, {**base, **_rows(outputs, a)},
                              {d: values.get(d) for d in a.needs + a.uses}), s, why)
        if a.required:
            base.update(out.row)
        outputs[a.name] = Output(out.row, out.tables)
        values[a.name] = out.value
        del out   # (a result no later analysis reads is then held nowhere)
        _free(plan[i + 1:], tables, values)
    order = sorted(plan, key=lambda a: (not a.required, a.order, a.name))
    row = {k: v for a in order for k, v in outputs[a.name].row.items()}
    row["failed_analyses"] = s.summary()
    return TraceResult(row=row, tables={k: v for a in order for k, v in outputs[a.name].tables.items()},
                       failures=s.failures)


def _step(a: TraceAnalysis, inputs: Inputs, s: Sections, why: dict[str, str]) -> Output:
    """What ``a`` gives: its own output, or its fallback where it raised or an analysis it needs
    failed or was not run (``why[a.name]`` then says why). A required analysis's error is raised."""
    if a.required:
        return a.checked(a.run(inputs))
    if missing := [d for d in a.needs if d in why]:
        why[a.name] = "; ".join(dict.fromkeys(why[d] for d in missing))
        return a.fallback(inputs, why[a.name])
    out = s.run(a.name, lambda: a.checked(a.run(inputs)), None)
    if out is None:
        why[a.name] = s.reason(a.name)
        return a.fallback(inputs, why[a.name])
    return out


def _rows(outputs: dict[str, Output], a: TraceAnalysis) -> dict:
    """The columns of the analyses ``a`` needs and uses, in their row order."""
    deps = sorted((ANALYSES[d] for d in a.needs + a.uses), key=lambda d: (d.order, d.name))
    return {k: v for d in deps for k, v in outputs[d.name].row.items()}


def _free(later: list[TraceAnalysis], tables: EventTables, values: dict) -> None:
    """Drop the shared tables and the results no analysis of ``later`` reads."""
    for name in SHARED_TABLES:
        if not any(name in a.reads for a in later):
            tables.forget(name)
    for name in [n for n in values if not any(n in a.needs + a.uses for a in later)]:
        del values[name]

"""What reaches every trace's analyses besides its event tables: the options asked for
(:class:`AnalysisOptions`, the same for every trace of an analysis) and what the trace's run.json
says (:class:`RunFacts`), together per file as one :class:`TraceJob`. All three are frozen and
picklable: a job crosses process-pool and Dask boundaries (:func:`tracekit.analysis.runs.analyze`).
No pandas here: :mod:`tracekit.analysis.runs` imports this at start-up."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tracekit.manifest import Attribution, Manifest


@dataclass(frozen=True)
class AnalysisOptions:
    """The options of an analysis (``tracekit analyze``, :func:`tracekit.analyze`).

    critical_path: also each iteration's critical path split into its parts, and what is on it most
        (``--critical-path``: tables critical_path, critical_path_top;
        :mod:`tracekit.analysis.critical_path.trace_figures`). Without it, a trace gets only the
        calibrated CUDA-graph prediction, where its run.json has the unprofiled latency.
    annotation: the CPU op or user annotation that marks an iteration for the critical path, as
        ``tracekit whatif --annotation`` (None: the ``ProfilerStep#N`` markers).
    iterations: iterations each trace holds, for traces with neither ProfilerStep markers nor a
        run.json recording its profiled window (``--iterations``); per-iteration figures divide by it.
    """

    critical_path: bool = False
    annotation: str | None = None
    iterations: int | None = None


@dataclass(frozen=True)
class RunFacts:
    """What a trace's run.json tells its analyses (every field None for a bare trace).

    iterations: the profiled window's iterations (``profile.iterations``).
    latency_ms: the unprofiled latency per call, median (ms): the verdict's check of the
        profiler's overhead and the critical path's calibration.
    host_ms: the host's time to issue one call with the GPU idle, median (ms): the critical
        path's calibration of a GPU-bound run (a job's: rank 0's).
    attribution: the module scopes, Inductor provenance and CUDA-graph captures recorded with the
        run (:mod:`tracekit.analysis.attribution.gpu_ops`).
    rank_host_ms: a job's host time per call of each rank (rank -> median ms, run.json
        ``distributed.ranks[i].host_ms``): a rank's trace is calibrated with its own.
    capture_trace: the file name of the eager step's capture path traced beside the run's trace
        (run.json ``capture_path.trace``: :mod:`tracekit.capture.capture_path`), whose kernels the
        ``cuda-graphs`` prediction replays.
    """

    iterations: int | None = None
    latency_ms: float | None = None
    host_ms: float | None = None
    attribution: Attribution | None = None
    rank_host_ms: dict[int, float] | None = None
    capture_trace: str | None = None

    @classmethod
    def of(cls, manifest: Manifest | None) -> RunFacts:
        """The facts of a run's manifest (all None without one)."""
        if manifest is None:
            return cls()
        return cls(iterations=manifest.profile.iterations if manifest.profile else None,
                   latency_ms=manifest.latency_ms.median if manifest.latency_ms else None,
                   host_ms=manifest.host_ms.median if manifest.host_ms else None,
                   attribution=manifest.attribution,
                   rank_host_ms={r.rank: r.host_ms.median for r in manifest.distributed.ranks or []
                                 if r.host_ms is not None and r.host_ms.median is not None}
                   if manifest.distributed else None,
                   capture_trace=manifest.capture_path.trace if manifest.capture_path else None)


@dataclass(frozen=True)
class TraceJob:
    """One trace file to analyze: its path, the analysis's options and its run's facts."""

    path: Path
    options: AnalysisOptions = field(default_factory=AnalysisOptions)
    run: RunFacts = field(default_factory=RunFacts)

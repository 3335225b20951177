"""Analyze every run under a path: one metrics row per trace file, plus failed runs.

This is the library call behind ``tracekit analyze``; it needs no torch. pandas
and the analyses are imported when first used: a large trace's reader workers
start decoding first (start-up of ``tracekit analyze`` stays under 0.15 s).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.analysis.dask_cluster import on_dask
from tracekit.analysis.manifest_fields import manifest_fields
from tracekit.analysis.options import AnalysisOptions, RunFacts, TraceJob
from tracekit.analysis.trace_file import FileResult, analyze_file, outcome
from tracekit.errors import ExitCode
from tracekit.io import records
from tracekit.manifest import Distributed, Manifest
from tracekit.trace import Run, TraceError, discover
from tracekit.trace.file_kinds import size_or_zero

if TYPE_CHECKING:
    import pandas as pd


class NothingAnalyzed(TraceError):
    """No run under a path could be analyzed (:meth:`Analysis.nothing_to_report`): a TraceError
    with, as :class:`Analysis` has them, ``errors`` (each unreadable file's (path, problem, exit
    code)) and ``failures`` (each analysis that raised)."""

    def __init__(self, path, problem: str, code: ExitCode, errors: list, failures: list):
        super().__init__(path, problem, code)
        self.errors, self.failures = errors, failures


@dataclass
class Analysis:
    """What ``analyze`` found.

    runs:    one row per trace file (or per failed run without a trace):
             identity (run, trace, rank, job, world_size, backend (of a
             distributed run; rank and job None for others), model, mode, batch,
             seq (token inputs' length, None for models without one), dtype,
             phase, op (the op
             a single-op run computes), device_type (where the run really ran: cuda, mtia, xpu, cpu),
             requested_device (the spec's), device_name (where it ran), requested_device_name
             (the spec's device), status, reason, note (run.json's: the report adds the trace's,
             :func:`tracekit.report.worded.worded`), trace_problems (the damage the reader mended
             or dropped, by kind: the ``events`` checks of the ``integrity`` table)),
             the manifest's timings
             (latency_*_ms, compile_s, peak_memory_MB, max_abs_diff; and how far
             the timing can be trusted: wall_median_ms, wall_p10_ms,
             wall_p90_ms, wall_calls_per_block, timer_agreement, timer_gap
             (:func:`tracekit.analysis.comparison.trust.timer_gap`), host_load_start/end
             (1-minute load), host_cpus, threads, processes, process_spread, host_cpus_end:
             :mod:`tracekit.capture.timers`) and the
             trace metrics of :func:`tracekit.analysis.trace_analysis.analyze_trace`
             (kernels, launches, busy/idle, idle by cause, launch latency, verdict).
    tables:  name -> one DataFrame over all traces, each row tagged with its
             run, trace and rank: iterations, devices, streams, idle_histogram,
             verdict_evidence, launch_apis, kernels, kernel_classes,
             kernel_quantiles, transfers, transfer_iterations, timeline,
             collectives, collective_idle (see
             :func:`tracekit.analysis.trace_analysis.analyze_trace`); across runs
             (no run/trace columns), launch_vs_fusion
             (:func:`tracekit.analysis.comparison.launch_removal.launch_vs_fusion`); and per
             job of two ranks or more (a ``job`` column): jobs, ranks,
             collective_calls, stragglers (:mod:`tracekit.analysis.distributed.job`), and
             with ``critical_path`` job_critical_path (each job's ranks joined at their
             collectives: :mod:`tracekit.analysis.critical_path.job_figures`).
    errors:  (path, problem, exit code) for each file that could not be read or
             analyzed (``internal error: ...``, code 70: a bug in tracekit; the other
             files are analyzed all the same).
    failures: (path, analysis, reason, traceback) of each analysis that raised: a
             trace's (:class:`tracekit.analysis.trace_analysis.Sections`; its run row says
             so in ``failed_analyses``, its other figures stand), a whole file's
             (analysis ``trace``, also in ``errors``) or a job's (``jobs``).
    skipped: (path, why) for JSON files found in a folder that are not
             traces (a summary.json, an ONNX Runtime profile).
    root:    the folder run names and ``trace`` paths are relative to.
    """

    runs: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    errors: list[tuple[str, str, int]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    root: Path = Path(".")
    failures: list[tuple[str, str, str, str]] = field(default_factory=list)

    def table(self, name: str) -> pd.DataFrame:
        """One of ``tables``, or an empty DataFrame when no trace gave it.

        Raises:
            KeyError: no analysis makes a table of that name (:func:`table_names`): a misspelt name
                would otherwise read as an empty result.
        """
        import pandas as pd

        if name not in self.tables and name not in table_names():
            raise KeyError(f"no analysis makes a table named {name!r}; the tables: {', '.join(sorted(table_names()))}")
        return self.tables.get(name, pd.DataFrame())

    def nothing_to_report(self, path) -> NothingAnalyzed | None:
        """Why nothing under ``path`` could be analyzed, or None where some run was: the one
        rule of :func:`tracekit.analyze` and ``tracekit analyze``/``compare``.

        Returns:
            None where ``runs`` has a row; else a :class:`NothingAnalyzed`: no trace under ``path``
            (exit code NO_TRACES), or the first unreadable file's path and problem with the
            others' after it (``; path: problem``) and its exit code, INTERNAL where
            tracekit failed on any file (a bug in tracekit is never hidden behind bad input).
        """
        if len(self.runs):
            return None
        if not self.errors:
            return NothingAnalyzed(path, "no traces found (looked for *.json and *.json.gz)", ExitCode.NO_TRACES,
                                   self.errors, self.failures)
        first, problem, code = self.errors[0]
        if any(c == ExitCode.INTERNAL for *_, c in self.errors):
            code = ExitCode.INTERNAL
        return NothingAnalyzed(first, problem + "".join(f"; {p}: {e}" for p, e, _ in self.errors[1:]), code,
                               self.errors, self.failures)

    def to_dict(self) -> dict:
        """All tables as lists of records (JSON-ready after :func:`tracekit.io.jsonable`)."""
        return {"runs": records(self.runs), **{name: records(df) for name, df in self.tables.items()},
                "errors": [{"path": p, "problem": e, "code": c} for p, e, c in self.errors],
                "skipped": [{"path": p, "why": w} for p, w in self.skipped],
                "failures": [{"path": p, "analysis": a, "reason": r} for p, a, r, _ in self.failures]}


def table_names() -> frozenset[str]:
    """Every table an :class:`Analysis` can hold: each registered analysis' declared tables
    (:data:`tracekit.analysis.registry.ANALYSES`), the jobs' (:data:`tracekit.analysis.distributed.job.JOB_TABLES`,
    ``job_critical_path``) and the runs' ``launch_vs_fusion``."""
    from tracekit.analysis import trace_analysis  # noqa: F401  (imports every analysis, which registers)
    from tracekit.analysis.distributed.job import JOB_TABLES
    from tracekit.analysis.registry import ANALYSES

    return frozenset(t for a in ANALYSES.values() for t in a.tables) | {*JOB_TABLES, "job_critical_path",
                                                                         "launch_vs_fusion"}


def _collect(run: Run, manifest: Manifest | None, root: Path, results: list[FileResult], result: Analysis,
             scanned: bool) -> None:
    from tracekit.analysis.distributed import job

    base = {"run": run.name, **manifest_fields(manifest)}
    if run.problem:
        result.errors.append((str(root / run.name / "run.json"), run.problem, int(ExitCode.BAD_CONTENT)))
    if not run.traces:
        result.runs.append({**base, "trace": ""})
        return
    for path, r in zip(run.traces, results):
        result.failures += [(str(path), f["analysis"], f["reason"], f["traceback"]) for f in r.failures]
        if r.error:
            # Found by scanning a folder, a JSON that is no trace is passed over, not an error.
            if r.not_a_trace and scanned and manifest is None:
                result.skipped.append((str(path), r.error[0]))
            else:
                result.errors.append((str(path), *r.error))
            continue
        metrics = dict(r.metrics)
        full, top = path.absolute(), root.absolute()
        rel = str(full.relative_to(top)) if full.is_relative_to(top) else str(path)
        if base.get("device_type") is None:
            base = {**base, "device_type": r.device_type, "device_name": r.device_name}
        in_job = None if r.rank is None else job.job_name(run.name, rel, manifest is not None, root)
        launched = (manifest.distributed if manifest else None) or Distributed()
        ranked = {"rank": r.rank, "job": in_job,
                  "world_size": r.distributed.get("world_size") or launched.world_size,
                  "backend": r.distributed.get("backend") or launched.backend}
        result.runs.append({**base, "trace": rel, **ranked, **metrics, "note": base.get("note") or "",
                            "trace_problems": len(r.problems)})
        for name, df in r.tables.items():
            if len(df):
                result.tables.setdefault(name, []).append(df.assign(run=run.name, trace=rel, rank=r.rank))


PARALLEL_FILES_MIN_BYTES = 16 << 20  # several files totalling more than this are analyzed in parallel


def _analyze_files(runs: list[Run], manifests: list[Manifest | None], options: AnalysisOptions,
                   dask: str | None = None) -> list[list[FileResult]]:
    """Analyze every trace of ``runs`` with ``options`` and its run's facts (one
    :class:`~tracekit.analysis.options.TraceJob` per file): where the files are read is chosen here, once.

    On a Dask cluster when ``dask`` names one (a scheduler address such as
    ``tcp://host:8786``, or ``"local"``): one task per file. Otherwise here: one file at a
    time (each decoded in parallel if large), or, for several files of some size, one
    worker process per core. Every way runs :func:`tracekit.analysis.trace_file.analyze_file`
    on each file, so the results are the same.

    Raises:
        tracekit.analysis.dask_cluster.ClusterError: ``dask`` given, and dask is missing or its
            scheduler unreachable.
    """
    jobs = [TraceJob(p.absolute(), options, RunFacts.of(m)) for r, m in zip(runs, manifests) for p in r.traces]
    workers = min(len(os.sched_getaffinity(0)), len(jobs))
    if dask and jobs:
        from functools import partial

        flat = on_dask(dask, partial(analyze_file, workers=1), jobs)
    elif workers > 1 and sum(size_or_zero(job.path) for job in jobs) > PARALLEL_FILES_MIN_BYTES:
        import multiprocessing  # here, not at start-up: a single trace never needs it
        from concurrent.futures import ProcessPoolExecutor

        import tracekit.analysis.trace_analysis  # noqa: F401 - once, before the workers fork
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(analyze_file, job, 1) for job in jobs]
            flat = [outcome(f) for f in futures]
    else:
        flat = [analyze_file(job) for job in jobs]
    out, i = [], 0
    for r in runs:
        out.append(flat[i:i + len(r.traces)])
        i += len(r.traces)
    return out


def _ordered(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs of one workload together, eager (the usual baseline) first, then by name."""
    import pandas as pd

    if runs.empty or "model" not in runs:
        return runs
    workload = runs["run"].str.rsplit("/", n=1).str[0]
    key = pd.DataFrame({"w": workload, "e": runs["mode"] != "eager", "r": runs["run"]})
    return runs.loc[key.sort_values(["w", "e", "r"]).index].reset_index(drop=True)


def analyze(path: Path | str | list[Path | str], options: AnalysisOptions | None = None,
            only: set[str] | None = None, dask: str | None = None) -> Analysis:
    """Analyze a trace file or every run under a folder (recursively), or several of them.

    Args:
        path: a trace file or a folder, or a list of them (``tracekit compare A B``):
            run names and trace paths are then relative to the folder that holds them all.
        options: what every trace's analysis is asked (:class:`~tracekit.analysis.options.AnalysisOptions`:
            ``critical_path`` adds the tables critical_path and critical_path_top, ``annotation``
            what marks an iteration for it, ``iterations`` the iterations of traces with neither
            ProfilerStep markers nor a run.json); None: the defaults.
        only: if given, analyze just the runs with these names (folder paths
            relative to ``path``, e.g. ``"vit16x6x384/eager"``).
        dask: analyze the files on this Dask cluster (a scheduler address, or
            ``"local"``), one task per file; None analyzes them here. The result is
            the same either way.

    Returns:
        An :class:`Analysis`; unreadable files are listed in ``errors`` and do
        not stop the others.

    Raises:
        TraceError: ``path`` does not exist.
        tracekit.analysis.dask_cluster.ClusterError: ``dask`` given, and dask is missing or its
            scheduler unreachable.
    """
    paths = [Path(p) for p in path] if isinstance(path, (list, tuple)) else [Path(path)]
    unreadable: list[tuple[str, str]] = []
    if len(paths) == 1:
        runs = discover(paths[0], unreadable)
        scanned = paths[0].is_dir()
        base = paths[0] if scanned else paths[0].parent
    else:
        runs, base = _discover_all(paths, unreadable)
        scanned = True
    runs = [r for r in runs if only is None or r.name in only]
    manifests = [Manifest.from_dict(r.manifest) if r.manifest else None for r in runs]
    # Collect rows in lists first, then turn them into tables.
    result = Analysis(runs=[], tables={}, root=base,
                      errors=[(str(p), why, int(ExitCode.NOT_FOUND)) for p, why in unreadable])
    for run, manifest, files in zip(runs, manifests, _analyze_files(runs, manifests, options or AnalysisOptions(),
                                                                    dask)):
        _collect(run, manifest, base, files, result, scanned)
    import pandas as pd

    from tracekit.analysis.comparison import trust
    from tracekit.analysis.comparison.launch_removal import launch_vs_fusion
    from tracekit.analysis.critical_path.job_figures import all_jobs
    from tracekit.analysis.distributed import job
    from tracekit.analysis.trace_analysis import Sections

    result.runs = _ordered(pd.DataFrame(result.runs))
    if len(result.runs):
        result.runs["timer_gap"] = trust.timer_gap(result.runs)
    result.tables = {name: _front(pd.concat(parts, ignore_index=True)) for name, parts in result.tables.items()}
    across = Sections()  # the analyses across runs, isolated as each trace's are
    if len(control := across.run("launch_vs_fusion", lambda: launch_vs_fusion(result.runs), [])):
        result.tables["launch_vs_fusion"] = control
    by_job, opts = {r.name: m for r, m in zip(runs, manifests) if m is not None}, options or AnalysisOptions()
    predicted, split = across.run("job_critical_path", lambda: all_jobs(result.runs, base, by_job, opts.annotation),
                                  ({}, pd.DataFrame())) if opts.critical_path else ({}, pd.DataFrame())
    if len(split):
        result.tables["job_critical_path"] = split
    result.tables.update(across.run("jobs", lambda: job.analyze_jobs(
        result.runs, result.table("collectives"), result.table("collective_idle"), by_job, predicted), {}))
    if across.failed("jobs"):
        failed = {"code": job.FAILED, "reason": across.reason("jobs")}
        result.tables["jobs"] = pd.DataFrame([{"job": "", "finding": failed}])
    result.failures += [("", f["analysis"], f["reason"], f["traceback"]) for f in across.failures]
    return result


def _discover_all(paths: list[Path], unreadable: list) -> tuple[list[Run], Path]:
    """The runs under several paths, named by their place under the folder that holds them all
    (that folder is returned too); a path that is missing or cannot be followed goes to
    ``unreadable`` with its reason, as a file of a folder would (the other paths are analyzed)."""
    found = []
    for p in paths:
        try:
            runs = discover(p, unreadable)
        except TraceError as exc:
            unreadable.append((str(p), exc.problem))
            continue
        for r in runs:
            # a folder that is itself a run is named by its own name in discover()
            own = p.is_dir() and r.name == p.name and (p / "run.json").is_file()
            found.append((r, (p if own or not p.is_dir() else p / r.name).absolute()))
    base = Path(os.path.commonpath([loc.parent for _, loc in found])) if found else Path(".").absolute()
    return [replace(r, name=str(loc.relative_to(base))) for r, loc in found], base


def _front(df: pd.DataFrame) -> pd.DataFrame:
    """run, trace and rank as the first columns."""
    return df[["run", "trace", "rank"] + [c for c in df.columns if c not in ("run", "trace", "rank")]]

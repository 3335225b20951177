"""`tracekit analyze` and `tracekit compare`: analyze traces, compare modes, write the report."""

from __future__ import annotations

import json
from pathlib import Path

import click

from tracekit.cli.group import (OutFolder, UserError, exit_if_partial, main, report_options, show_tracebacks,
                                wide_option)
from tracekit.errors import ExitCode


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--out", type=OutFolder(), default=Path("reports"),
              show_default=True, help="Where summary.md, runs.csv and runs.json go.")
@click.option("--json", "as_json", is_flag=True, help="Print every table as JSON on stdout instead of "
              "the terminal table.")
@click.option("--iterations", type=click.IntRange(min=1), default=None,
              help="Iterations each trace holds, for traces without ProfilerStep markers or run.json.")
@click.option("--baseline", default="eager", show_default=True,
              help="The mode every other mode of a workload is compared with.")
@click.option("--dask", "dask_address", default=None, metavar="ADDRESS",
              help="Analyze the files on a Dask cluster, one task per file: a scheduler address "
                   "(tcp://host:8786; the files must be readable by its workers at the same paths), or "
                   "'local' for a LocalCluster of one worker per core here. Same results as without it.")
@click.option("--annotate", is_flag=True, help="Also write beside each trace a copy with tracekit's tracks "
              "(critical path, GPU idle by cause, module of each GPU op) for Perfetto, TensorBoard and HTA: "
              "<name>.annotated.pt.trace.json.gz, which analyze skips as a run.")
@click.option("--critical-path", "critical_path", is_flag=True,
              help="Also the critical path of every iteration: the longest chain of dependent host and GPU work, "
                   "split into host CPU time, launch calls, launch latency, GPU gaps, kernels by class, "
                   "transfers, communication, syncs and waits, with what is on it most; calibrated to the "
                   "unprofiled latency in run.json (say so where uncalibrated). In every report and --json.")
@report_options
@wide_option
def analyze(path, out, as_json, iterations, baseline, dask_address, annotate, critical_path, html_plots, link_traces,
            wide) -> None:
    """Analyze the traces under PATH (a folder, searched recursively, or one file).

    Per run: kernels executed, host launches (distinct correlation ids: one
    cudaGraphLaunch is one launch however many kernels it replays), GPU busy
    time (union of kernel/memcpy/memset intervals across streams), active span,
    utilization = busy/span; GPU idle time by cause (host wait, launch latency,
    sync, other), launch-to-start latency, and a verdict: launch-bound,
    gpu-bound or mixed, with the evidence; per iteration where markers exist.
    Runs of one workload (model, batch, seq, dtype, phase, device) are compared with
    the BASELINE mode: speedup, and its split into Δ GPU busy and Δ idle.
    Per-rank traces of a distributed run (rank from distributedInfo or the file
    name) are one job: per rank computation, communication, their overlap and
    exposed communication, collectives matched across ranks, stragglers, and a
    verdict per rank and per job.
    Writes OUT/summary.md, OUT/index.html, OUT/plots/*.png, OUT/runs.csv,
    OUT/comparison.csv, OUT/runs.json (--json: every table on stdout).
    """
    result = _analyze(path, baseline, iterations, dask_address, as_json, critical_path)   # first: see _analyze
    from tracekit.io import jsonable
    from tracekit.report import print_reports, write_reports

    written = write_reports(result, out, source=str(path), html_plots=html_plots, link_traces=link_traces)
    if as_json:
        click.echo(json.dumps(jsonable(result.analysis.to_dict()), default=str))
    else:
        print_reports(result, wide=wide)
        click.echo(f"wrote {out}/: " + ", ".join(p.name for p in written if p.suffix != ".png")
                   + f"; plots/: {sum(p.suffix == '.png' for p in written)} PNG", err=True)
    failed = 0
    if annotate:
        from tracekit.api import annotate as annotate_traces

        for r in annotate_traces(path).itertuples():
            click.echo((f"annotated {r.annotated}" if r.annotated else f"{r.trace}: no annotated copy")
                       + "".join(f"; {n}" for n in r.notes), err=True)
            failed += r.failed
    exit_if_partial([result], failed)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--baseline", default="eager", show_default=True,
              help="The mode every other mode of a workload is compared with.")
@click.option("--out", type=OutFolder(), default=None,
              help="Also write the full report (summary.md, index.html, plots...) here.")
@report_options
@wide_option
def compare(paths, baseline, out, html_plots, link_traces, wide) -> None:
    """Compare runs: PATHS are run folders, trace folders or trace files.

    Runs are grouped by workload (model, batch, seq, dtype, phase, device, from each
    run.json, never from file names); each mode is compared with the BASELINE
    run of its workload: unprofiled speedup with its p10-p90 range, Δ GPU busy
    and Δ idle per iteration (which dominates), kernels and launches ratios,
    and the same split inside the profiled window by idle cause. A run that ran
    on another device than its baseline is flagged.

    \b
    Example: tracekit compare traces/vit16x6x384/eager traces/vit16x6x384/reduce-overhead
    """
    result = _analyze(list(paths), baseline)
    from tracekit.report import print_reports, write_reports

    print_reports(result, runs=False, detail=True, wide=wide)
    if out is not None:
        write_reports(result, out, source=" ".join(str(p) for p in paths), html_plots=html_plots,
                      link_traces=link_traces)
        click.echo(f"report in {out}/", err=True)
    exit_if_partial([result])


def _analyze(path, baseline: str, iterations=None, dask=None, as_json: bool = False, critical_path: bool = False):
    """:func:`tracekit.analyze` for analyze/compare; bad input becomes a UserError (with ``as_json``,
    the errors are also printed as JSON on stdout: ``{"runs": [], "errors": [...]}``; under
    ``--debug``, the tracebacks of the analyses that raised on files none of which could be read)."""
    from tracekit import api  # it starts reading the traces before pandas (and the report) are imported
    from tracekit.analysis.dask_cluster import ClusterError
    from tracekit.analysis.runs import NothingAnalyzed
    from tracekit.trace import TraceError

    def fail(problems: list[tuple[str, str, int]]) -> None:
        if as_json:
            errors = [{"path": p, "problem": e, "code": c} for p, e, c in problems]
            click.echo(json.dumps({"runs": [], "errors": errors}))

    try:
        return api.analyze(path, baseline, iterations, dask=dask, critical_path=critical_path)
    except NothingAnalyzed as exc:   # nothing analyzed: no report written over an old one
        fail(exc.errors)
        show_tracebacks(exc.failures)
        raise UserError(str(exc), exc.code) from None
    except TraceError as exc:
        fail([(str(exc.path), exc.problem, int(exc.code))])
        raise UserError(str(exc), exc.code) from None
    except ClusterError as exc:
        fail([(str(path), str(exc), int(ExitCode.USAGE))])
        raise UserError(str(exc), ExitCode.USAGE) from None

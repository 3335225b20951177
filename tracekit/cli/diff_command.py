"""`tracekit diff`: where GPU time and launches went between two runs, module by module."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from tracekit.cli.group import OutFolder, UserError, main, show_tracebacks, wide_option
from tracekit.errors import ExitCode


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--depth", type=click.IntRange(min=1), default=3, show_default=True,
              help="Module paths are cut to this many parts (blocks.3.mlp.fc1 at 3 is blocks.3.mlp).")
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True,
              help="Rows shown on the terminal and in diff.md (CSV and JSON hold all).")
@click.option("--out", type=OutFolder(), default=None,
              help="Also write diff.md, diff_modules.csv, diff_ops.csv and diff.json here (one folder per pair "
                   "and diffs.md for a FOLDER).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole diff as JSON instead of the table.")
@click.option("--iterations", type=click.IntRange(min=1), default=None,
              help="Iterations each trace holds, for traces without ProfilerStep markers or run.json.")
@click.option("--min-coverage", type=click.FloatRange(0, 1), default=0.95, show_default=True,
              help="With a FOLDER: the attributed share of GPU busy time each run should reach (flagged below).")
@wide_option
def diff(paths, depth, top, out, as_json, iterations, min_coverage, wide) -> None:
    """Where GPU time and launches went between two runs, module by module.

    PATHS: RUN_A RUN_B, two run folders (run.json beside one trace) or trace
    files; or one FOLDER of runs: every pair of modes of each workload in it.
    Every GPU op is attributed to the module and aten op that launched it
    (module scopes in eager runs, Inductor's provenance in compiled ones, the
    recorded capture for CUDA-graph replays; what cannot be attributed is its
    own row). Runs are aligned by module path and op, not by kernel name, and
    each module row gives, per iteration, Δ GPU busy, Δ kernels, Δ launches,
    Δ idle before its kernels, and which kernels appeared, vanished or were
    fused; the rows sum exactly to the runs' Δ busy and Δ launches.

    \b
    Examples: tracekit diff traces/vit16x6x384/eager traces/vit16x6x384/default
              tracekit diff traces/ --out reports/diff
    """
    from tracekit.analysis.attribution.run_diff import DiffSet, diff_pairs, diff_runs
    from tracekit.analysis.metrics.integrity import damaged
    from tracekit.io import jsonable
    from tracekit.report import print_reports, write_reports
    from tracekit.report.formats.diff import diff_dict
    from tracekit.trace import TraceError

    if len(paths) > 2:
        raise UserError(f"give two runs or one folder, not {len(paths)} paths")
    try:
        result = (diff_runs(*paths, depth, iterations) if len(paths) == 2 else
                  diff_pairs(paths[0], depth, iterations, min_coverage=min_coverage))
    except TraceError as exc:
        raise UserError(str(exc), exc.code) from None
    if isinstance(result, DiffSet) and not result.diffs:
        raise UserError(f"{paths[0]}: no workload with two ok runs to diff" + "".join(
            f"; {p}: {problem}" for p, problem, _ in result.errors), ExitCode.NO_TRACES)
    if as_json:
        data = diff_dict(result) if len(paths) == 2 else jsonable([diff_dict(d) for d in result.diffs])
        click.echo(json.dumps(data))
    else:
        print_reports(result, top=top, wide=wide)
    if out is not None:
        written = write_reports(result, out, top=top)
        click.echo(f"wrote {len(written)} files under {out}/", err=True)
    diffs = result.diffs if isinstance(result, DiffSet) else [result]
    failures = result.failures
    show_tracebacks(failures)
    errors = result.errors if isinstance(result, DiffSet) else []
    if as_json:   # stdout holds the JSON: what else went wrong is said on stderr
        for path, problem, _ in errors:
            click.echo(f"tracekit diff: unreadable: {path}: {problem}", err=True)
    if failures or errors or any(damaged(d.integrity) for d in diffs):
        sys.exit(ExitCode.PARTIAL)

"""`tracekit bench`: run the cells of study suites, then report."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracekit.cli.group import OutFolder, UserError, exit_if_partial, main, report_options, wide_option


@main.command()
@click.argument("suite_files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--traces", type=OutFolder(), default=Path("traces"),
              show_default=True, help="Traces root; a suite's runs go to TRACES/<suite name>/<model>/<mode>/.")
@click.option("--reports", type=OutFolder(), default=Path("reports"),
              show_default=True, help="Reports root; a suite's report goes to REPORTS/<suite name>/.")
@click.option("--only", multiple=True, metavar="PATTERN",
              help="Run only cells whose run name (<model>/<mode>, e.g. 'vit16*/eager') matches; repeatable.")
@click.option("--force", is_flag=True, help="Redo cells already done.")
@click.option("--timeout", "timeout_s", type=float, default=None, metavar="SECONDS",
              help="Limit of one cell; past it the cell is a 'timeout' row [default: the suite's timeout_s, "
                   "else none].")
@click.option("--max-minutes", type=float, default=None,
              help="Limit of the whole run; cells past it are 'skipped: time limit' rows (run on the next call), and "
                   "so is a cell when less time is left than the last cell of its kind (its settings but the "
                   "model) took. "
                   "A suite's own max_minutes also applies.")
@click.option("--set", "settings", multiple=True, metavar="FIELD=VALUE",
              help="Set a RunSpec field in every cell, over the suite file's (nproc=4: the grid on 4 ranks; "
                   "its runs are other folders, -np4); repeatable; give it to --report-only too.")
@click.option("--dry-run", is_flag=True, help="Print the grid and each cell's state; run nothing.")
@click.option("--report-only", is_flag=True,
              help="Write each suite's report from the runs already under --traces (made here or copied from "
                   "another machine, e.g. a GPU box); run nothing.")
@report_options
@wide_option
def bench(suite_files, traces, reports, only, force, timeout_s, max_minutes, settings, dry_run, report_only,
          html_plots, link_traces, wide) -> None:
    """Run every cell of each SUITE_FILE (a workloads/*.toml grid), then report.

    Each cell runs in its own process and writes its trace and run.json as soon
    as it finishes. A re-run skips cells already done (--force redoes them), so
    an interrupted bench (Ctrl-C, kill) goes on where it stopped. A cell that
    fails (out of memory, compile error, unavailable backend, timeout) is a row
    with its status and reason, and the suite goes on. Each suite's report
    (report.md, summary.md, runs.csv, runs.json) goes to REPORTS/<suite name>/.
    """
    from rich.console import Console

    from tracekit import bench as bench_lib
    from tracekit.manifest.suite_toml import SuiteError, load_suite, parse_setting
    from tracekit.report import print_reports

    console = Console(stderr=True)
    try:
        overrides = dict(parse_setting(text) for text in settings)
        suites = [load_suite(path, overrides) for path in suite_files]
        if dry_run:
            for suite, planned in zip(suites, bench_lib.plan_all(suites, traces, only, force)):
                console.print(bench_lib.grid_table(suite, planned))
            return
        command = " ".join(["tracekit", *sys.argv[1:]])
        options = {"html_plots": html_plots, "link_traces": link_traces}
        if report_only:
            results = bench_lib.report_only(suites, traces, reports, command=command, report_options=options)
        else:
            results = bench_lib.bench(suites, traces, reports, only=only, force=force, timeout_s=timeout_s,
                                      max_minutes=max_minutes, command=command, console=console,
                                      report_options=options)
    except SuiteError as exc:
        raise UserError(str(exc)) from None
    for result in results:
        print_reports(result.tables, wide=wide)
        click.echo(f"{result.suite.name}: {len(result.ran)} cells run in {result.elapsed_s:.0f} s; "
                   f"report in {result.report_dir}/report.md", err=True)
    exit_if_partial([result.tables for result in results])

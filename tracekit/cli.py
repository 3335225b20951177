"""The ``tracekit`` command line (click). Each command parses options, calls one
library function and prints; everything here is callable from Python too."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from tracekit import __version__
from tracekit.errors import ExitCode
from tracekit.spec import DTYPES, PHASES


class UserError(click.ClickException):
    """A problem with the user's input: one line on stderr, no traceback, and the
    exit code of its kind (:class:`tracekit.errors.ExitCode`)."""

    def __init__(self, message: str, code: int = ExitCode.USAGE):
        super().__init__(message)
        self.exit_code = int(code)


class _Main(click.Group):
    """The command group; an unexpected exception becomes one line and exit code
    INTERNAL (70), with the traceback only under ``--debug``."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"tracekit: internal error: {type(exc).__name__}: {exc} "
                       "(rerun with --debug for the traceback)", err=True)
            ctx.exit(ExitCode.INTERNAL)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
@click.option("--debug", is_flag=True, help="Show Python tracebacks of internal errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Profiler-driven analysis of PyTorch performance.

    \b
    Run a workload under torch.profiler and write its trace:
      tracekit trace --model vit16x6x384 --mode reduce-overhead
    Measure kernels, launches, GPU busy and idle time from the traces, compare
    the modes of each workload, write reports/ (summary.md, index.html, plots):
      tracekit analyze traces/
    Compare chosen runs:
      tracekit compare traces/vit16x6x384/eager traces/vit16x6x384/reduce-overhead

    \b
    Exit codes: 0 ok; 1 a run failed (see its run.json); 2 usage; 3 path not
    found; 4 no traces; 5 corrupt gzip; 6 truncated JSON; 7 not JSON; 8 not a
    PyTorch profiler trace; 9 bad trace content; 10 analyzed, but some files or
    events were bad (listed); 11 ncu missing or unable to profile; 70 internal error;
    130 a bench interrupted (Ctrl-C, SIGTERM; run it again to go on).
    """
    ctx.obj = {"debug": debug}


@main.command()
@click.option("--model", "-m", required=True, help="Workload, e.g. vit16x6x384, mlp, conv, transformer "
              "(`tracekit models` lists them).")
@click.option("--mode", default="eager", show_default=True,
              help="Backend mode: eager, default, reduce-overhead, max-autotune, ... (`tracekit modes`).")
@click.option("--batch", "-b", type=int, default=None, help="Batch size [default: the model's].")
@click.option("--dtype", type=click.Choice(DTYPES), default="fp32", show_default=True)
@click.option("--device", default=None, help="cpu, cuda or cuda:N [default: cuda if visible, else cpu].")
@click.option("--phase", type=click.Choice(PHASES),
              default="inference", show_default=True,
              help="What one iteration does: no-grad forward, forward with autograd, + backward, + AdamW step.")
@click.option("--compile-only", default="", help="mode=surgical: comma-separated name patterns of the "
              "submodules to compile, e.g. '*.rope,*.qkv_reshape' [default: the model's].")
@click.option("--warmup", type=int, default=None, help="Warm-up calls after the first (compile) call "
              "[default: 5].")
@click.option("--iters", type=int, default=None, help="Unprofiled timed iterations [default: 50].")
@click.option("--profile-iters", type=int, default=None, help="Iterations in the profiled window "
              "[default: 10].")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("traces"),
              show_default=True, help="Traces root; the run goes to OUT/<model>/<mode>/.")
def trace(model, mode, batch, dtype, device, phase, compile_only, warmup, iters, profile_iters, out) -> None:
    """Run one workload on one mode: compile, time, profile; write trace + run.json.

    The trace lands in OUT/<model>/<mode>/<worker>.<ts>.pt.trace.json.gz (the
    layout TensorBoard's profiler plugin reads) beside run.json, the run's
    manifest. A run that fails (OOM, compile error) or cannot run here (backend
    not installed, needs CUDA) still writes run.json with its status and
    reason; the exit code is then 1.
    """
    from tracekit import backends, models, runner
    from tracekit.spec import RunSpec

    given = {k: v for k, v in dict(warmup=warmup, iters=iters, profile_iters=profile_iters).items()
             if v is not None}
    spec = RunSpec(model=model, mode=mode, batch=batch, dtype=dtype, device=device, phase=phase,
                   compile_only=compile_only, **given)
    try:
        manifest = runner.run(spec, out)
    except (models.UnknownModel, backends.UnknownMode, ValueError) as exc:
        raise UserError(str(exc), ExitCode.USAGE) from None
    click.echo(f"{manifest.label}/{mode}: {manifest.status}"
               + (f", latency p50 {manifest.latency('median'):.3f} ms, first call {manifest.compile_s:.2f} s"
                  if manifest.status == "ok" else f": {manifest.reason[:500]}"))
    if manifest.note:
        click.echo(f"note: {manifest.note}")
    if manifest.status != "ok":
        sys.exit(ExitCode.RUN_FAILED)


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("reports"),
              show_default=True, help="Where summary.md, runs.csv and runs.json go.")
@click.option("--json", "as_json", is_flag=True, help="Print every table as JSON on stdout instead of "
              "the terminal table.")
@click.option("--iterations", type=click.IntRange(min=1), default=None,
              help="Iterations each trace holds, for traces without ProfilerStep markers or run.json.")
@click.option("--baseline", default="eager", show_default=True,
              help="The mode every other mode of a workload is compared with.")
def analyze(path, out, as_json, iterations, baseline) -> None:
    """Analyze the traces under PATH (a folder, searched recursively, or one file).

    Per run: kernels executed, host launches (distinct correlation ids: one
    cudaGraphLaunch is one launch however many kernels it replays), GPU busy
    time (union of kernel/memcpy/memset intervals across streams), active span,
    utilization = busy/span; GPU idle time by cause (host wait, launch latency,
    sync, other), launch-to-start latency, and a verdict: launch-bound,
    gpu-bound or mixed, with the evidence; per iteration where markers exist.
    Runs of one workload (model, batch, dtype, phase, device) are compared with
    the BASELINE mode: speedup, and its split into Δ GPU busy and Δ idle.
    Writes OUT/summary.md, OUT/index.html, OUT/plots/*.png, OUT/runs.csv,
    OUT/comparison.csv, OUT/runs.json (--json: every table on stdout).
    """
    from tracekit.analysis.compare import Tables
    from tracekit.io import jsonable
    from tracekit.report import print_reports, write_reports

    result = _analysis(path, iterations)
    tables = Tables.of(result, baseline)
    written = write_reports(tables, out, source=str(path))
    if as_json:
        click.echo(json.dumps(jsonable(result.to_dict()), default=str))
    else:
        print_reports(tables)
        click.echo(f"wrote {out}/: " + ", ".join(p.name for p in written if p.suffix != ".png")
                   + f"; plots/: {sum(p.suffix == '.png' for p in written)} PNG", err=True)
    _exit_if_partial(result)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--baseline", default="eager", show_default=True,
              help="The mode every other mode of a workload is compared with.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write the full report (summary.md, index.html, plots...) here.")
def compare(paths, baseline, out) -> None:
    """Compare runs: PATHS are run folders, trace folders or trace files.

    Runs are grouped by workload (model, batch, dtype, phase, device, from each
    run.json, never from file names); each mode is compared with the BASELINE
    run of its workload: unprofiled speedup with its p10-p90 range, Δ GPU busy
    and Δ idle per iteration (which dominates), kernels and launches ratios,
    and the same split inside the profiled window by idle cause. A run that ran
    on another device than its baseline is flagged.

    \b
    Example: tracekit compare traces/vit16x6x384/eager traces/vit16x6x384/reduce-overhead
    """
    from tracekit.analysis.compare import Tables
    from tracekit.report import print_reports, write_reports

    tables = Tables.of(_analysis(list(paths), None), baseline)
    print_reports(tables, runs=False, detail=True)
    if out is not None:
        write_reports(tables, out, source=" ".join(str(p) for p in paths))
        click.echo(f"report in {out}/", err=True)
    _exit_if_partial(tables.analysis)


def _analysis(path, iterations):
    """Analyze PATH (or several) for analyze/compare; bad input becomes a UserError."""
    from tracekit.analysis.runs import analyze as run_analysis
    from tracekit.trace import TraceError

    try:
        result = run_analysis(path, iterations=iterations)
    except TraceError as exc:
        raise UserError(str(exc), exc.code) from None
    if result.runs.empty:
        if not result.errors:
            raise UserError(f"{path}: no traces found (looked for *.json and *.json.gz)", ExitCode.NO_TRACES)
        for p, problem, _ in result.errors[1:]:
            click.echo(f"Error: {p}: {problem}", err=True)
        p, problem, code = result.errors[0]
        raise UserError(f"{p}: {problem}", code)  # nothing analyzed: no report written over an old one
    return result


def _exit_if_partial(result) -> None:
    import pandas as pd

    damaged = result.runs.get("trace_problems", pd.Series(dtype=float)).fillna(0).sum()
    if result.errors or damaged:
        click.echo(f"warning: {len(result.errors)} unreadable file(s), {int(damaged)} damaged trace(s) "
                   "(listed above and in the report)", err=True)
        sys.exit(ExitCode.PARTIAL)


@main.command()
@click.argument("suite_files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--traces", type=click.Path(file_okay=False, path_type=Path), default=Path("traces"),
              show_default=True, help="Traces root; a suite's runs go to TRACES/<suite name>/<model>/<mode>/.")
@click.option("--reports", type=click.Path(file_okay=False, path_type=Path), default=Path("reports"),
              show_default=True, help="Reports root; a suite's report goes to REPORTS/<suite name>/.")
@click.option("--only", multiple=True, metavar="PATTERN",
              help="Run only cells whose run name (<model>/<mode>, e.g. 'vit16*/eager') matches; repeatable.")
@click.option("--force", is_flag=True, help="Redo cells already done.")
@click.option("--timeout", "timeout_s", type=float, default=None, metavar="SECONDS",
              help="Limit of one cell; past it the cell is a 'timeout' row [default: the suite's timeout_s, "
                   "else none].")
@click.option("--max-minutes", type=float, default=None,
              help="Limit of the whole run; cells past it are 'skipped: time limit' rows (run on the next call). "
                   "A suite's own max_minutes also applies.")
@click.option("--dry-run", is_flag=True, help="Print the grid and each cell's state; run nothing.")
@click.option("--report-only", is_flag=True,
              help="Write each suite's report from the runs already under --traces (made here or copied from "
                   "another machine, e.g. a GPU box); run nothing.")
def bench(suite_files, traces, reports, only, force, timeout_s, max_minutes, dry_run, report_only) -> None:
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
    from tracekit.report import print_reports
    from tracekit.suite import SuiteError, load_suite

    console = Console(stderr=True)
    try:
        suites = [load_suite(path) for path in suite_files]
        if dry_run:
            for suite in suites:
                console.print(bench_lib.grid_table(suite, bench_lib.plan(suite, traces, only, force)))
            return
        command = " ".join(["tracekit", *sys.argv[1:]])
        if report_only:
            results = bench_lib.report_only(suites, traces, reports, command=command)
        else:
            results = bench_lib.bench(suites, traces, reports, only=only, force=force, timeout_s=timeout_s,
                                      max_minutes=max_minutes, command=command, console=console)
    except SuiteError as exc:
        raise UserError(str(exc)) from None
    except bench_lib.Interrupted as exc:
        click.echo(f"tracekit bench: {exc}", err=True)
        sys.exit(130)
    for result in results:
        print_reports(result.tables, comparison=False)
        click.echo(f"{result.suite.name}: {len(result.ran)} cells run in {result.elapsed_s:.0f} s; "
                   f"report in {result.report_dir}/report.md", err=True)


@main.command()
@click.option("--model", "-m", default=None, help="Workload to profile, e.g. mul1024, gemm8192x8192x8192, "
              "vit16x6x384 (`tracekit models`). Not needed with --csv.")
@click.option("--mode", default="eager", show_default=True, help="Backend mode (`tracekit modes`).")
@click.option("--batch", "-b", type=int, default=None, help="Batch size [default: the model's].")
@click.option("--dtype", type=click.Choice(DTYPES), default="fp32", show_default=True)
@click.option("--device", default=None, help="cuda or cuda:N [default: cuda if visible].")
@click.option("--phase", type=click.Choice(PHASES),
              default="inference", show_default=True, help="What one iteration does (as for `tracekit trace`).")
@click.option("--warmup", type=int, default=None, help="Warm-up calls before the profiled ones [default: 5].")
@click.option("--kernels", type=click.IntRange(min=1), default=100, show_default=True,
              help="Profile at most this many kernels (ncu --launch-count), from the first measured "
              "iteration on; ncu replays each one several times.")
@click.option("--iters", type=click.IntRange(min=1), default=2, show_default=True,
              help="Measured iterations the workload runs inside the profiled NVTX range.")
@click.option("--traces", type=click.Path(file_okay=False, path_type=Path), default=Path("traces"),
              show_default=True, help="Traces root: the run's trace from `tracekit trace` (same options) is "
              "joined to the counters when present.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("reports/counters"),
              show_default=True, help="Reports go to OUT/<model>/<mode>/ (OUT itself with --csv).")
@click.option("--csv", "csv_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Analyze this ncu CSV (--csv --page raw) instead of running ncu; no GPU needed.")
@click.option("--trace", "trace_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="With --csv: the trace to join the counters to.")
@click.option("--device-name", default=None, help="With --csv: the GPU's name for the peak table "
              "[default: the trace's].")
def counters(model, mode, batch, dtype, device, phase, warmup, kernels, iters, traces, out, csv_file, trace_file,
             device_name) -> None:
    """Hardware counters (Nsight Compute): per-kernel DRAM bytes, GB/s, TFLOP/s, % of peak, bound.

    Runs the workload under ncu, skipping its first call and warm-up (NVTX
    range), profiles up to --kernels kernels, joins them by name and order to
    the run's trace when `tracekit trace` made one, and reports each kernel's
    DRAM traffic, achieved bandwidth and FLOP/s, arithmetic intensity and
    percent of the device's peaks, and the share of time in memory-bound,
    compute-bound and neither kernels, by kernel class, with a roofline plot.
    Writes summary.md, kernels.csv, classes.csv, counters.json, roofline.png.
    Needs ncu and a GPU, except with --csv.
    """
    from tracekit import counters as hw
    from tracekit.analysis.counters import analyze as analyze_counters
    from tracekit.report import print_reports, write_reports
    from tracekit.spec import RunSpec
    from tracekit.trace import TraceError

    try:
        if csv_file is not None:
            result, folder, title = analyze_counters(csv_file, trace_file, device_name), out, csv_file.name
        elif model is None:
            raise UserError("give --model (to profile a workload) or --csv (to analyze an ncu CSV)")
        else:
            given = {"warmup": warmup} if warmup is not None else {}
            spec = RunSpec(model=model, mode=mode, batch=batch, dtype=dtype, device=device, phase=phase, **given)
            result, folder = hw.run(spec, out, traces, kernels, iters, log=lambda m: click.echo(m, err=True))
            title = f"{folder.parent.name}/{mode}"
    except hw.ProfilerError as exc:
        raise UserError(str(exc), ExitCode.PROFILER) from None
    except ValueError as exc:  # unreadable CSV, unknown model or mode
        raise UserError(str(exc), ExitCode.USAGE) from None
    except TraceError as exc:
        raise UserError(str(exc), exc.code) from None
    written = write_reports(result, folder, source=title)
    print_reports(result, source=title)
    click.echo("wrote " + ", ".join(str(p) for p in written), err=True)


@main.command("models")
def list_models() -> None:
    """List the workload families and their name patterns."""
    from tracekit import models

    for key, fam in models.FAMILIES.items():
        click.echo(f"{fam.example:<14} batch {fam.default_batch:<3} {fam.description}")


@main.command("backends")
def list_backends() -> None:
    """List backend modes, whether each can run here (and why not), and their phases."""
    from tracekit import backends
    from tracekit.environment import default_device
    from tracekit.spec import RunSpec

    spec = RunSpec(model="mlp", device=default_device())
    for name, b in backends.BACKENDS.items():
        reason = backends.why_not(b, spec)
        click.echo(f"{name:<27} {'available' if not reason else 'unavailable'}  {b.description}")
        click.echo(f"{'':<27} phases: {', '.join(p for p in PHASES if p in b.phases)}"
                   + (f"; {reason}" if reason else ""))


main.add_command(list_backends, "modes")

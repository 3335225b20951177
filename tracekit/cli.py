"""The ``tracekit`` command line (click). Each command parses options, calls one
library function and prints; everything here is callable from Python too."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from tracekit import __version__
from tracekit.errors import ExitCode


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
    Where the time went between two runs, module by module:
      tracekit diff traces/vit16x6x384/eager traces/vit16x6x384/default

    \b
    Exit codes: 0 ok; 1 a run failed (see its run.json); 2 usage; 3 path not
    found; 4 no traces; 5 corrupt gzip; 6 truncated JSON; 7 not JSON; 8 not a
    PyTorch profiler trace; 9 bad trace content; 10 analyzed, but some files or
    events were bad (listed); 11 ncu missing or unable to profile; 70 internal error;
    130 a bench interrupted (Ctrl-C, SIGTERM; run it again to go on).
    """
    ctx.obj = {"debug": debug}


@main.command()
@click.option("--model", "-m", required=True, help="Workload: a built-in (vit16x6x384, mlp...), a library model "
              "(hf:gpt2, hf:llama?layers=16&hidden=2048, timm:resnet50, torchvision:resnet50), your own function "
              "(path/to/file.py:fn, package.module:fn, or its name when workloads/*.py defines it); "
              "`tracekit models` lists them.")
@click.option("--mode", default="eager", show_default=True,
              help="Backend mode: eager, default, reduce-overhead, max-autotune, ... (`tracekit backends`).")
@click.option("--batch", "-b", type=click.IntRange(min=1), default=None, help="Batch size [default: the model's].")
@click.option("--seq", type=click.IntRange(min=1), default=None,
              help="Sequence length of token inputs (hf: text models, workload functions with a seq "
              "parameter) [default: the model's, 128 for hf:].")
@click.option("--dtype", type=click.Choice(["fp32", "bf16", "fp16"]), default="fp32", show_default=True)
@click.option("--device", default=None, help="cpu, cuda or cuda:N [default: cuda if visible, else cpu].")
@click.option("--phase", type=click.Choice(["inference", "forward", "forward-backward", "train-step"]),
              default="inference", show_default=True,
              help="What one iteration does: no-grad forward, forward with autograd, + backward (the model's "
              "own loss where it has one, as hf: models given labels), + AdamW step.")
@click.option("--compile-only", default="", help="mode=surgical: comma-separated name patterns of the "
              "submodules to compile, e.g. '*.rope,*.qkv_reshape' [default: the model's].")
@click.option("--warmup", type=click.IntRange(min=0), default=None, help="Warm-up calls after the first "
              "(compile) call [default: 5].")
@click.option("--iters", type=click.IntRange(min=1), default=None, help="Unprofiled timed iterations "
              "[default: 50].")
@click.option("--profile-iters", type=click.IntRange(min=1), default=None, help="Iterations in the profiled "
              "window [default: 10].")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="torch's intra-op CPU threads (torch.set_num_threads) [default: torch's]; the count used is "
              "recorded either way, and a set count is added to the folder name (-t1).")
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run in this many processes, one after the other, and report the median process with the "
              "spread across them (host speed varies between processes).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("traces"),
              show_default=True, help="Traces root; the run goes to OUT/<model>/<mode>/.")
@click.option("--nproc", type=click.IntRange(min=1), default=1, show_default=True,
              help="Ranks: with N > 1 PyTorch's launcher (torch.distributed.run, as torchrun) starts N processes "
                   "on this machine, NCCL when each has a GPU of its own, else gloo; a trace per rank.")
@click.option("--parallel", type=click.Choice(["ddp", "fsdp"]), default="ddp", show_default=True,
              help="With --nproc > 1: DistributedDataParallel, or FSDP2 (fully_shard on each block of the "
                   "model's ModuleLists and on the whole). Gradients are reduced in the forward-backward and "
                   "train-step phases.")
def trace(model, mode, batch, seq, dtype, device, phase, compile_only, warmup, iters, profile_iters, threads,
          repeats, out, nproc, parallel) -> None:
    """Run one workload on one mode: compile, time, profile; write trace + run.json.

    The trace lands in OUT/<model>/<mode>/<worker>.<ts>.pt.trace.json.gz (the
    layout TensorBoard's profiler plugin reads) beside run.json, the run's
    manifest; a model name that is not a plain word gets a readable folder
    name (hf:llama?layers=16 -> hf-llama-layers16, path/to/net.py:fn -> net-fn).
    The latency is timed twice: per call (CUDA events on a GPU, perf_counter on
    the CPU) and as a synchronised wall clock per call
    (torch.utils.benchmark.Timer); timers more than 5% apart, or a host busier
    than its CPUs at the start or end, are warned about.
    A run that fails (OOM, compile error) or cannot run here (backend or
    library not installed, needs CUDA) still writes run.json with its status
    and reason; the exit code is then 1. A workload file that cannot be
    imported, lacks the function, or whose function fails or returns something
    else than (nn.Module, tuple of tensors) is one line, exit code 2, and no
    run folder.

    \b
    Your own model: a file with
      def my_model(batch, dtype, device):
          return MyNet().to(device, dtype), (torch.randn(batch, 64, device=device, dtype=dtype),)
    runs with: tracekit trace --model my_file.py:my_model --mode default

    With --nproc N the folder (OUT/<model>-<phase>-<parallel>-npN/<mode>/) holds
    a trace per rank and one run.json: world size, backend, each rank's
    latencies, and the job's latency (the slowest rank of each iteration).
    `tracekit analyze` reads it as one job.
    """
    from tracekit import backends, models, runner, timing
    from tracekit.spec import RunSpec

    given = {k: v for k, v in dict(warmup=warmup, iters=iters, profile_iters=profile_iters).items()
             if v is not None}
    spec = RunSpec(model=model, mode=mode, batch=batch, dtype=dtype, device=device, phase=phase,
                   compile_only=compile_only, seq=seq, threads=threads, repeats=repeats, nproc=nproc,
                   parallel=parallel, **given)
    try:
        manifest = runner.run(spec, out)
    except (models.UnknownModel, backends.UnknownMode, ValueError) as exc:
        raise UserError(str(exc), ExitCode.USAGE) from None
    if manifest.status == "ok":
        wall = (manifest.wall_ms or {}).get("median", float("nan"))
        spread = (manifest.repeats or {}).get("spread")
        click.echo(f"{manifest.label}/{mode}: ok, latency p50 {manifest.latency('median'):.3f} ms "
                   f"(synchronised wall clock {wall:.3f} ms)"
                   + (f", median of {repeats} processes (spread {spread:.0%})" if spread is not None else "")
                   + f", first call {manifest.compile_s:.2f} s")
        for problem in timing.problems(manifest.latency("median"), wall, manifest.latency_ms.get("timer"),
                                       manifest.host_load):
            click.echo(f"warning: {problem}")
    else:
        click.echo(f"{manifest.label}/{mode}: {manifest.status}: {manifest.reason[:500]}")
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
@click.option("--dask", "dask_address", default=None, metavar="ADDRESS",
              help="Analyze the files on a Dask cluster, one task per file: a scheduler address "
                   "(tcp://host:8786; the files must be readable by its workers at the same paths), or "
                   "'local' for a LocalCluster of one worker per core here. Same results as without it.")
def analyze(path, out, as_json, iterations, baseline, dask_address) -> None:
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
    from tracekit.analysis.compare import Tables
    from tracekit.io import jsonable
    from tracekit.report import print_reports, write_reports

    result = _analysis(path, iterations, dask_address)
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

    Runs are grouped by workload (model, batch, seq, dtype, phase, device, from each
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


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--depth", type=click.IntRange(min=1), default=3, show_default=True,
              help="Module paths are cut to this many parts (blocks.3.mlp.fc1 at 3 is blocks.3.mlp).")
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True,
              help="Rows shown on the terminal and in diff.md (CSV and JSON hold all).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write diff.md, diff_modules.csv, diff_ops.csv and diff.json here (one folder per pair "
                   "and diffs.md for a FOLDER).")
@click.option("--json", "as_json", is_flag=True, help="Print the whole diff as JSON instead of the table.")
@click.option("--iterations", type=click.IntRange(min=1), default=None,
              help="Iterations each trace holds, for traces without ProfilerStep markers or run.json.")
@click.option("--min-coverage", type=click.FloatRange(0, 1), default=0.95, show_default=True,
              help="With a FOLDER: the attributed share of GPU busy time each run should reach (flagged below).")
def diff(paths, depth, top, out, as_json, iterations, min_coverage) -> None:
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
    from tracekit.analysis.rundiff import DiffSet, diff_pairs, diff_runs
    from tracekit.io import jsonable
    from tracekit.report import print_reports, write_reports
    from tracekit.report.formats.diff import diff_dict
    from tracekit.trace import TraceError

    if len(paths) > 2:
        raise UserError(f"give two runs or one folder, not {len(paths)} paths")
    try:
        result = (diff_runs(*paths, depth, iterations) if len(paths) == 2 else
                  DiffSet(diff_pairs(paths[0], depth, iterations), min_coverage))
    except TraceError as exc:
        raise UserError(str(exc), exc.code) from None
    except ValueError as exc:
        raise UserError(str(exc), ExitCode.USAGE) from None
    if isinstance(result, DiffSet) and not result.diffs:
        raise UserError(f"{paths[0]}: no workload with two ok runs to diff", ExitCode.NO_TRACES)
    if as_json:
        data = diff_dict(result) if len(paths) == 2 else jsonable([diff_dict(d) for d in result.diffs])
        click.echo(json.dumps(data))
    else:
        print_reports(result, top=top)
    if out is not None:
        written = write_reports(result, out, top=top)
        click.echo(f"wrote {len(written)} files under {out}/", err=True)


def _analysis(path, iterations, dask=None):
    """Analyze PATH (or several) for analyze/compare; bad input becomes a UserError."""
    from tracekit.analysis.cluster import ClusterError
    from tracekit.analysis.runs import analyze as run_analysis
    from tracekit.trace import TraceError

    try:
        result = run_analysis(path, iterations=iterations, dask=dask)
    except TraceError as exc:
        raise UserError(str(exc), exc.code) from None
    except ClusterError as exc:
        raise UserError(str(exc), ExitCode.USAGE) from None
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
@click.option("--mode", default="eager", show_default=True, help="Backend mode (`tracekit backends`).")
@click.option("--batch", "-b", type=click.IntRange(min=1), default=None, help="Batch size [default: the model's].")
@click.option("--dtype", type=click.Choice(["fp32", "bf16", "fp16"]), default="fp32", show_default=True)
@click.option("--device", default=None, help="cuda or cuda:N [default: cuda if visible].")
@click.option("--phase", type=click.Choice(["inference", "forward", "forward-backward", "train-step"]),
              default="inference", show_default=True, help="What one iteration does (as for `tracekit trace`).")
@click.option("--warmup", type=click.IntRange(min=0), default=None,
              help="Warm-up calls before the profiled ones [default: 5].")
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
    from tracekit.report import print_reports, write_reports
    from tracekit.spec import RunSpec
    from tracekit.trace import TraceError

    try:
        if csv_file is not None:
            result, folder, title = hw.analyze(csv_file, trace_file, device_name), out, csv_file.name
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
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_models(as_json) -> None:
    """List the models: built-in families, library prefixes (hf:, timm:,
    torchvision:, with whether each is installed), and the workload functions
    of the files in workloads/ ($TRACEKIT_WORKLOADS), each with its source."""
    from tracekit import models

    rows = models.catalog()
    if as_json:
        click.echo(json.dumps(rows, default=str))
        return
    headings = {"built-in": "built-in models:", "library": "library models (random weights, nothing downloaded):",
                "workload file": f"workload functions ({models.workloads.folder()}/*.py):"}
    for kind, heading in headings.items():
        click.echo(heading)
        for r in (r for r in rows if r["kind"] == kind):
            if "problem" in r:
                click.echo(f"  {r['name']:<20} cannot be used: {r['problem']}")
                continue
            src = r["source"]
            where = {"library": f"{src.get('library')} {src.get('version', '')}".strip(),
                     "workload file": f"{src.get('file', '')}"}.get(kind, "")
            size = f"batch {r['batch']:<4}" + (f" seq {r['seq']:<4}" if r.get("seq") else "")
            click.echo(f"  {r['name']:<20} {size} {r['description']}"
                       + (f"  [{r['missing']}]" if r.get("missing") else f"  [{where}]" if where else ""))


@main.command("backends")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_backends(as_json) -> None:
    """List the backend modes (--mode of trace and suites): what each runs, its phases,
    whether it can run on this machine (and why not, with how to install what is
    missing), and what it does differently here (no CUDA graphs on the CPU)."""
    from tracekit import backends
    from tracekit.environment import default_device

    rows = backends.listing(default_device())
    if as_json:
        click.echo(json.dumps(rows))
        return
    for r in rows:
        click.echo(f"{r['mode']:<27} {'available' if r['available'] else 'unavailable'}  {r['description']}")
        click.echo(f"{'':<27} phases: {', '.join(r['phases'])}" + (f"; {r['reason']}" if r["reason"] else ""))
        if r["note"]:
            click.echo(f"{'':<27} here: {r['note']}")

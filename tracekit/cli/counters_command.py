"""`tracekit counters`: hardware counters (Nsight Compute) of a workload, or of an ncu CSV."""

from __future__ import annotations

from pathlib import Path

import click

from tracekit.cli.group import OutFolder, UserError, main, seq_option
from tracekit.errors import ExitCode
from tracekit.manifest.spec import DTYPES, PHASES


@main.command()
@click.option("--model", "-m", default=None, help="Workload to profile, e.g. mul1024, gemm8192x8192x8192, "
              "vit16x6x384 (`tracekit models`). Not needed with --csv.")
@click.option("--mode", default="eager", show_default=True, help="Backend mode (`tracekit backends`).")
@click.option("--batch", "-b", type=click.IntRange(min=1), default=None, help="Batch size [default: the model's].")
@seq_option
@click.option("--dtype", type=click.Choice(DTYPES), default="fp32", show_default=True)
@click.option("--device", default=None, help="cuda or cuda:N [default: cuda if visible].")
@click.option("--phase", type=click.Choice(PHASES),
              default="inference", show_default=True, help="What one iteration does (as for `tracekit trace`).")
@click.option("--warmup", type=click.IntRange(min=0), default=None,
              help="Warm-up calls before the profiled ones [default: 5].")
@click.option("--kernels", type=click.IntRange(min=1), default=100, show_default=True,
              help="Profile at most this many kernels (ncu --launch-count), from the first measured "
              "iteration on; ncu replays each one several times.")
@click.option("--iters", type=click.IntRange(min=1), default=2, show_default=True,
              help="Measured iterations the workload runs inside the profiled NVTX range.")
@click.option("--traces", type=OutFolder(), default=Path("traces"),
              show_default=True, help="Traces root: the run's trace from `tracekit trace` (same options) is "
              "joined to the counters when present.")
@click.option("--out", type=OutFolder(), default=Path("reports/counters"),
              show_default=True, help="Reports go to OUT/<model>/<mode>/ (OUT itself with --csv).")
@click.option("--csv", "csv_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Analyze this ncu CSV (--csv --page raw) instead of running ncu; no GPU needed.")
@click.option("--trace", "trace_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="With --csv: the trace to join the counters to.")
@click.option("--device-name", default=None, help="With --csv: the GPU's name for the peak table "
              "[default: the trace's].")
def counters(model, mode, batch, seq, dtype, device, phase, warmup, kernels, iters, traces, out, csv_file, trace_file,
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
    from tracekit.manifest.spec import RunSpec
    from tracekit.report import print_reports, write_reports
    from tracekit.trace import TraceError

    try:
        if csv_file is not None:
            result, folder, title = analyze_counters(csv_file, trace_file, device_name), out, csv_file.name
        elif model is None:
            raise UserError("give --model (to profile a workload) or --csv (to analyze an ncu CSV)")
        else:
            given = {"warmup": warmup} if warmup is not None else {}
            spec = RunSpec(model=model, mode=mode, batch=batch, seq=seq, dtype=dtype, device=device, phase=phase, **given)
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

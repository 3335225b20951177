"""`tracekit trace`: run one workload on one mode under the profiler."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracekit.cli import UserError, main
from tracekit.errors import ExitCode
from tracekit.spec import DTYPES, PHASES


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

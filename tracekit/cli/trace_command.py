"""`tracekit trace`: run one workload on one mode under the profiler (:func:`tracekit.capture.runner.run`;
the run's status printed by :mod:`tracekit.report.formats.run_status`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracekit.cli.group import OutFolder, UserError, main, seq_option
from tracekit.errors import ExitCode
from tracekit.manifest.spec import DTYPES, PARALLEL, PHASES


@main.command()
@click.option("--model", "-m", required=True, help="Workload: a built-in (vit16x6x384, mlp...), a library model "
              "(hf:gpt2, hf:llama?layers=16&hidden=2048, timm:resnet50, torchvision:resnet50), your own function "
              "(path/to/file.py:fn, package.module:fn, or its name when workloads/*.py defines it); "
              "`tracekit models` lists them.")
@click.option("--mode", default="eager", show_default=True,
              help="Backend mode: eager, default, reduce-overhead, max-autotune, ... (`tracekit backends`).")
@click.option("--batch", "-b", type=click.IntRange(min=1), default=None, help="Batch size [default: the model's].")
@seq_option
@click.option("--dtype", type=click.Choice(DTYPES), default="fp32", show_default=True)
@click.option("--device", default=None, help="cpu, cuda or cuda:N [default: cuda if visible, else cpu].")
@click.option("--phase", type=click.Choice(PHASES),
              default="inference", show_default=True,
              help="What one iteration does: no-grad forward, forward with autograd, + backward (the model's "
              "own loss where it has one, as hf: models given labels), + AdamW step; decode (causal LMs: hf: "
              "decoders, lm-*): one token per sequence over a static KV cache, after a prefill of --seq tokens.")
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
@click.option("--out", type=OutFolder(), default=Path("traces"),
              show_default=True, help="Traces root; the run goes to OUT/<model>/<mode>/.")
@click.option("--nproc", type=click.IntRange(min=1), default=1, show_default=True,
              help="Ranks: with N > 1 PyTorch's launcher (torch.distributed.run, as torchrun) starts N processes "
                   "on this machine, NCCL when each has a GPU of its own, else gloo; a trace per rank.")
@click.option("--parallel", type=click.Choice(PARALLEL), default="ddp", show_default=True,
              help="With --nproc > 1: ddp, DistributedDataParallel (gradients all-reduced in buckets during "
                   "backward); fsdp, FSDP2 (fully_shard on each of the model's blocks, the modules of a ModuleList "
                   "or a Sequential of one class, and on the whole); "
                   "ddp-no-overlap, fsdp-no-overlap, the same collectives with the computation waiting for each "
                   "(the twin that whatif --overlap-comm predicts from). Gradients are reduced in the "
                   "forward-backward and train-step phases.")
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
    and reason; the exit code is then 1. Ctrl-C or SIGTERM stops it with
    status "interrupted" in run.json (and the stage it stopped in), its
    temporary files removed, and exit code 130. A workload file that cannot be
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
    from tracekit import backends, models
    from tracekit.capture import runner
    from tracekit.manifest.spec import RunSpec
    from tracekit.report import print_reports

    given = {k: v for k, v in dict(warmup=warmup, iters=iters, profile_iters=profile_iters).items()
             if v is not None}
    spec = RunSpec(model=model, mode=mode, batch=batch, dtype=dtype, device=device, phase=phase,
                   compile_only=compile_only, seq=seq, threads=threads, repeats=repeats, nproc=nproc,
                   parallel=parallel, **given)
    try:
        manifest = runner.run(spec, out)
    except (models.UnknownModel, backends.UnknownMode, ValueError) as exc:
        raise UserError(str(exc), ExitCode.USAGE) from None
    print_reports(manifest)
    if manifest.status != "ok":
        sys.exit(ExitCode.RUN_FAILED)

"""The workload ncu runs: build, prepare, first call and warm-up outside NVTX, then measured iterations inside.

``python -m tracekit.counters.workload --model M --mode X [--batch --dtype --device --phase --warmup --iters --info F]``

Each measured iteration runs inside an NVTX push/pop range named
:data:`tracekit.counters.ncu.RANGE` (on CUDA), the range ncu's
``--nvtx-include`` selects; the first call (compilation in compiled modes) and
``--warmup`` more calls run outside it. ``--info`` writes a JSON with the spec
and the device (name, versions) for the report's peak table.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import torch

from tracekit import backends, models
from tracekit.counters.ncu import RANGE
from tracekit.environment import default_device, describe
from tracekit.io import write_json
from tracekit.phases import make_step
from tracekit.spec import PHASES, RunSpec


def run(spec: RunSpec, iters: int) -> None:
    """Run ``spec``'s workload as the runner does (same backend, same phase step): 1 + warmup
    calls, then ``iters`` calls each in an NVTX range (on CUDA).

    Raises:
        models.UnknownModel, backends.UnknownMode, ValueError: invalid spec.
        RuntimeError: the backend cannot run this spec here.
    """
    backend = backends.get(spec.mode)
    if reason := backends.why_not(backend, spec):
        raise RuntimeError(f"mode {spec.mode} unavailable: {reason}")
    build_on = backend.device(spec)
    module, inputs = models.build(spec.model, spec.batch, spec.dtype, build_on, spec.seed, spec.seq, spec.phase)
    prepared = backend.prepare(module, inputs, spec)
    step = ((prepared.step if isinstance(prepared, backends.Prepared) else None)
            or make_step(prepared.fn if isinstance(prepared, backends.Prepared) else prepared, module, spec.phase))
    cuda = build_on.startswith("cuda")
    for _ in range(1 + spec.warmup):
        step(inputs)
    if cuda:
        torch.cuda.synchronize()
    for _ in range(iters):
        if cuda:
            torch.cuda.nvtx.range_push(RANGE)
        step(inputs)
        if cuda:
            torch.cuda.nvtx.range_pop()
    if cuda:
        torch.cuda.synchronize()


@click.command()
@click.option("--model", required=True)
@click.option("--mode", default="eager")
@click.option("--batch", type=int, default=None)
@click.option("--dtype", default="fp32")
@click.option("--device", default=None)
@click.option("--phase", type=click.Choice(PHASES), default="inference")
@click.option("--warmup", type=int, default=RunSpec.warmup)
@click.option("--iters", type=int, default=2)
@click.option("--info", type=click.Path(dir_okay=False, path_type=Path), default=None)
def main(model, mode, batch, dtype, device, phase, warmup, iters, info) -> None:
    try:
        spec = models.resolved(RunSpec(model=model, mode=mode, batch=batch, dtype=dtype, device=device,
                                       phase=phase, warmup=warmup), default_device())[1]
        run(spec, iters)
    except (ValueError, RuntimeError) as exc:
        sys.exit(f"tracekit.counters.workload: {exc}")
    if info:
        write_json(info, {"spec": spec.to_dict(), "profiled_iterations": iters,
                          "environment": describe(spec.device)})


if __name__ == "__main__":
    main()

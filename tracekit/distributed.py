"""``tracekit trace --nproc N``: one workload on N ranks, started by PyTorch's own launcher.

The run's process (:func:`launch`) starts ``python -m torch.distributed.run --standalone
--nproc-per-node N`` (the engine behind ``torchrun``) with this module as each rank's
program (:func:`main`). Each rank joins the process group, builds the model, wraps it
(``--parallel ddp``: DistributedDataParallel; ``fsdp``: FSDP2's ``fully_shard`` on each
block of a ``ModuleList`` and on the whole model), and runs the runner's stages
(each rank builds the model, then :func:`tracekit.measure.measure`: every backend mode
applies per rank): first call,
warm-up, timed iterations, the profiled window, its trace written as
``<host>_rank<r>.<ts>.pt.trace.json.gz`` into the one run folder, and its results into
``.rank<r>.result`` there. The launching process gathers them into the one ``run.json``:
rank 0's stages, ``latency_ms`` over the slowest rank of each timed iteration (the step
time of the job), and ``distributed``: world size, backend, parallel, launcher and each
rank's latencies.

Backend: NCCL on GPUs when each rank has its own, gloo otherwise (on CPUs; and where ranks
share a GPU, which NCCL cannot do). The launcher's environment turns NVLink multicast off
(:data:`tracekit.environment.NO_MULTICAST`). With DDP the inference phase communicates
nothing (DDP reduces gradients); the manifest notes it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections import deque
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch

from tracekit.environment import child_env
from tracekit.manifest import Manifest
from tracekit.quiet import from_environment, is_kineto_line
from tracekit.spec import RunSpec

WORKER = ["-m", "tracekit.distributed"]   # each rank's program
RANK_FILE = ".rank{}.result"  # not *.json: never taken for a trace
# Copied from rank 0's results into the run's manifest: the stages every rank measured.
_RANK0_FIELDS = ("device_type", "device_name", "build_s", "parameters", "prepare_s", "backend", "first_call_s",
                 "loss", "compile_s", "max_abs_diff", "diff_tolerance", "diff_ok", "warmup_s", "flop_per_iter",
                 "bytes_per_iter", "op", "peak_memory_MB", "memory_source", "attribution", "wall_ms",
                 "timer_agreement", "interleaving")
PROCESS_GROUP_TIMEOUT = timedelta(minutes=10)


def backend_for(device_type: str, nproc: int) -> tuple[str, str]:
    """(process-group backend, note): NCCL when every rank has a GPU of its own, else gloo."""
    if device_type != "cuda":
        return "gloo", ""
    gpus = torch.cuda.device_count()
    if gpus >= nproc:
        return "nccl", ""
    return "gloo", (f"{nproc} ranks share {gpus} GPU{'s' if gpus != 1 else ''}: gloo (NCCL cannot put two ranks "
                    "on one GPU); its collectives run on the host, with device copies")


def _stream(proc: subprocess.Popen, log) -> list[str]:
    """Pass the ranks' output lines to ``log`` as they come; return the last ones."""
    tail: deque[str] = deque(maxlen=30)
    for line in proc.stdout:
        line = line.rstrip()
        if line and not is_kineto_line(line):   # a rank's profiler lines, should any escape its own filter
            tail.append(line)
            log(line)
    proc.wait()
    return list(tail)


def launch(spec: RunSpec, directory: Path, manifest: Manifest, stage, log) -> None:
    """Run ``spec`` on ``spec.nproc`` ranks and fill ``manifest`` from their results.

    Raises:
        models.Unavailable: a rank found the workload cannot run here.
        RuntimeError: the launcher or a rank failed (the rank's reason, else the output's end).
    """
    from tracekit import models
    from tracekit.timing import latency_stats

    backend, note = backend_for(spec.device.split(":")[0], spec.nproc)
    manifest.add_note(note)
    if spec.phase == "inference" and spec.parallel == "ddp":
        manifest.add_note("DDP in the inference phase communicates nothing (it reduces gradients)")
    manifest.distributed = {"world_size": spec.nproc, "backend": backend, "parallel": spec.parallel,
                            "launcher": "torch.distributed.run"}
    for old in directory.glob(RANK_FILE.format("*")):
        old.unlink()
    stage(f"launching {spec.nproc} ranks (torch.distributed.run, {backend}, {spec.parallel})")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
           "--nproc-per-node", str(spec.nproc), *WORKER, "--spec", json.dumps(spec.to_dict()),
           "--dir", str(directory), "--backend", backend]
    # OMP_NUM_THREADS: torchrun sets 1 where it is unset, and says so in a banner of warnings; set here
    # (the user's own setting is kept), the ranks get the same and the banner is not printed.
    env = child_env(PYTHONUNBUFFERED="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                          env=env) as proc:
        try:
            tail = _stream(proc, log)
        except BaseException:  # Ctrl-C or SIGTERM (as the CLI takes it): the launcher stops its ranks
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    ranks = [json.loads(p.read_text()) for p in sorted(directory.glob(RANK_FILE.format("*")),
                                                       key=lambda p: int(p.name.split(".")[1][4:]))]
    for p in directory.glob(RANK_FILE.format("*")):
        p.unlink()
    # the rank that failed first is the cause; the others lost their peer after it
    bad = sorted((r for r in ranks if r.get("status") != "ok"), key=lambda r: r.get("failed_at", 0))
    if bad and bad[0]["status"] == "skipped":
        raise models.Unavailable(bad[0]["reason"])
    if bad or proc.returncode != 0 or len(ranks) != spec.nproc:
        why = (f"rank {bad[0]['rank']}: {bad[0]['reason']}" if bad else
               f"torch.distributed.run exited {proc.returncode}: " + " | ".join(tail[-8:]))
        raise RuntimeError(why)
    first = Manifest.from_dict(ranks[0]["manifest"])
    for name in _RANK0_FIELDS:
        setattr(manifest, name, getattr(first, name))
    manifest.add_note(first.note or "")
    slowest = np.max([r["samples_ms"] for r in ranks], axis=0)
    manifest.latency_ms = {**latency_stats(list(slowest)), "timer": first.latency_ms["timer"],
                           "over_ranks": "the slowest rank of each iteration"}
    manifest.distributed["ranks"] = [
        {"rank": r["rank"], "device": r["device"], "latency_ms": latency_stats(r["samples_ms"]),
         "peak_memory_MB": r["manifest"].get("peak_memory_MB"), "compile_s": r["manifest"].get("compile_s")}
        for r in ranks]
    traces = {t for r in ranks for t in r["manifest"]["profile"]["traces"]}
    manifest.profile = {"iterations": spec.profile_iters, "traces": sorted(traces)}


def wrap(module: torch.nn.Module, parallel: str, device: str) -> torch.nn.Module:
    """``module`` under DDP, or sharded by FSDP2 (each block of a ModuleList, then the whole)."""
    if parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(module, device_ids=[torch.device(device).index]
                                       if device.startswith("cuda") else None)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.split(":")[0], (torch.distributed.get_world_size(),))
    for blocks in [m for m in module.modules() if isinstance(m, torch.nn.ModuleList)]:
        for block in blocks:
            fully_shard(block, mesh=mesh)
    return fully_shard(module, mesh=mesh)


def main(argv: list[str] | None = None) -> int:
    """One rank (run by torch.distributed.run, which sets RANK, LOCAL_RANK, WORLD_SIZE):
    measure, write ``.rank<r>.result``; exit 0 if ok, 1 if not (the launcher then stops the others)."""
    from tracekit import attribution_record, backends, measure, models, runner
    from tracekit.bench.cells import _set_parent_death_signal

    # torch.distributed.run starts each rank in a session of its own: a rank must not outlive
    # its launcher (a bench that kills a cell on timeout kills the launcher's process group).
    _set_parent_death_signal(os.getppid())
    from_environment()
    parser = argparse.ArgumentParser(prog="python -m tracekit.distributed")
    parser.add_argument("--spec", required=True, help="the resolved RunSpec as JSON")
    parser.add_argument("--dir", required=True, type=Path, help="the run folder")
    parser.add_argument("--backend", required=True, choices=["gloo", "nccl"])
    args = parser.parse_args(argv)
    spec = RunSpec.from_dict(json.loads(args.spec))
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    device = spec.device
    if device.startswith("cuda"):
        device = f"cuda:{local % torch.cuda.device_count()}"
        torch.cuda.set_device(device)
    spec = RunSpec.from_dict({**spec.to_dict(), "device": device})
    torch.distributed.init_process_group(args.backend, timeout=PROCESS_GROUP_TIMEOUT)
    manifest, samples = Manifest(status="running", stage="start", note=""), []

    def stage(name: str) -> None:
        manifest.stage = name
        sys.stderr.write(f"[{args.dir} rank {rank}] {name}\n")   # one write: ranks share the pipe
        sys.stderr.flush()

    backend = backends.get(spec.mode)
    try:
        stage("build")
        t0 = time.perf_counter()
        built = models.build(spec.model, spec.batch, spec.dtype, backend.device(spec), spec.seed, spec.seq, spec.phase)
        manifest.build_s = time.perf_counter() - t0
        with attribution_record.Recorder(backend) as recorder:
            samples = measure.measure(spec, backend, args.dir, manifest, stage, recorder, *built,
                                      wrap=lambda m: wrap(m, spec.parallel, device),
                                      worker=f"{socket.gethostname()}_rank{rank}")
        manifest.attribution = recorder.result()
        manifest.status, reason, failed_at = "ok", "", None
    except Exception as exc:  # noqa: BLE001 - recorded for the launching process
        failed_at = time.time()
        manifest.status, reason = runner._classify(exc), f"{type(exc).__name__}: {str(exc).strip()[:2000]}"
        stage(f"{manifest.status}: {reason[:300]}")
    (args.dir / RANK_FILE.format(rank)).write_text(json.dumps(
        {"rank": rank, "device": device, "status": manifest.status, "reason": reason, "failed_at": failed_at,
         "samples_ms": samples,
         "manifest": manifest.to_dict()}, default=str))
    if manifest.status != "ok":
        return 1   # the launcher stops the other ranks (a collective may be waiting for this one)
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``tracekit trace --nproc N``: one workload on N ranks, started by PyTorch's own launcher.

The run's capture (:class:`~tracekit.capture.capture_run.Capture`, whose stages run
``elsewhere``: :func:`launch`) starts ``python -m torch.distributed.run --standalone
--nproc-per-node N`` (the engine behind ``torchrun``) with tracekit's child entry point as
each rank's program (a :class:`~tracekit.capture.child.ChildJob` of task "rank", which runs
:func:`rank`). Each rank joins the process group and runs the one capture with its rank, the
world size and how the model is shared (``--parallel ddp``: DistributedDataParallel; ``fsdp``:
FSDP2's ``fully_shard`` on each block of a ``ModuleList`` and on the whole model: :func:`wrap`):
build, reference output, prepare (every backend mode applies per rank), first call, warm-up,
timing (the same calls on every rank, host time between barriers), the profiled window, its
trace written as ``<host>_rank<r>.<ts>.pt.trace.json.gz`` into the one run folder, and its
results into ``.rank<r>.result`` there. The launching process gathers them into the one
``run.json``: rank 0's stages (its ``host_ms`` too), ``latency_ms`` over the slowest rank of each
timed iteration (the step time of the job), and ``distributed``: world size, backend, parallel,
launcher and each rank's latencies, host time, peak memory and compile time.

Backend: NCCL on GPUs when each rank has its own, gloo otherwise (on CPUs; and where ranks
share a GPU, which NCCL cannot do). The launcher's environment turns NVLink multicast off
(:data:`tracekit.capture.environment.NO_MULTICAST`). With DDP the inference phase communicates
nothing (DDP reduces gradients); the manifest notes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import msgspec
import numpy as np
import torch

from tracekit import models
from tracekit.capture.capture_run import Capture
from tracekit.capture.child import ChildJob, die_with_parent
from tracekit.capture.environment import child_env
from tracekit.capture.quiet import is_kineto_line
from tracekit.capture.resolved import resolve
from tracekit.capture.timers import latency_stats
from tracekit.io import write_json
from tracekit.manifest import Distributed, Manifest, Profile, RankSummary, Timer

RANK_FILE = ".rank{}.result"  # not *.json: never taken for a trace
# Copied from rank 0's results into the run's manifest: the stages every rank measured.
_RANK0_FIELDS = ("device_type", "device_name", "build_s", "parameters", "prepare_s", "backend", "first_call_s",
                 "loss", "compile_s", "max_abs_diff", "diff_tolerance", "diff_ok", "warmup_s", "flop_per_iter",
                 "bytes_per_iter", "op", "peak_memory_MB", "memory_source", "attribution", "wall_ms",
                 "timer_agreement", "interleaving", "host_ms")
PROCESS_GROUP_TIMEOUT = timedelta(minutes=10)


@dataclass
class RankResult:
    """What a rank hands the launching process (``.rank<r>.result`` in the run folder): its
    device, its timed latencies (ms, in call order), its manifest (status, reason, the stages it
    measured), and when it failed (``time.time()``; None if it did not)."""

    rank: int
    device: str
    samples_ms: list[float]
    manifest: Manifest
    failed_at: float | None = None

    def write(self, path: Path) -> None:
        """Write the result as one JSON object at ``path`` (the manifest as run.json holds it)."""
        write_json(path, {**vars(self), "manifest": self.manifest.to_dict()})

    @classmethod
    def read(cls, path: Path) -> "RankResult":
        """The result :meth:`write` wrote at ``path`` (raises OSError, ValueError where it cannot)."""
        data = json.loads(path.read_text())
        return cls(**{**data, "manifest": Manifest.from_dict(data["manifest"])})


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


def launch(capture: Capture) -> None:
    """Run the capture's spec on ``spec.nproc`` ranks and fill its manifest from their results
    (the run folder: ``capture.out``).

    Raises:
        models.Unavailable: a rank found the workload cannot run here.
        RuntimeError: the launcher or a rank failed (the rank's reason, else the output's end).
    """
    spec, manifest, directory = capture.spec, capture.manifest, capture.out
    backend, note = backend_for(spec.device.split(":")[0], spec.nproc)
    manifest.add_note(note)
    if spec.phase == "inference" and spec.parallel == "ddp":
        manifest.add_note("DDP in the inference phase communicates nothing (it reduces gradients)")
    manifest.distributed = Distributed(world_size=spec.nproc, backend=backend, parallel=spec.parallel,
                                       launcher="torch.distributed.run")
    for old in directory.glob(RANK_FILE.format("*")):
        old.unlink()
    capture.stage(f"launching {spec.nproc} ranks (torch.distributed.run, {backend}, {spec.parallel})")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                "--nproc-per-node", str(spec.nproc)]
    cmd = ChildJob("rank", spec, str(directory), backend=backend).command(launcher)
    # OMP_NUM_THREADS: torchrun sets 1 where it is unset, and says so in a banner of warnings; set here
    # (the user's own setting is kept), the ranks get the same and the banner is not printed.
    env = child_env(PYTHONUNBUFFERED="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                          env=env) as proc:
        try:
            tail = _stream(proc, capture.emit)
        except BaseException:  # Ctrl-C or SIGTERM (as the CLI takes it): the launcher stops its ranks
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    ranks = sorted((RankResult.read(p) for p in directory.glob(RANK_FILE.format("*"))), key=lambda r: r.rank)
    for p in directory.glob(RANK_FILE.format("*")):
        p.unlink()
    # the rank that failed first is the cause; the others lost their peer after it
    bad = sorted((r for r in ranks if r.manifest.status != "ok"), key=lambda r: r.failed_at or 0)
    if bad and bad[0].manifest.status == "skipped":
        raise models.Unavailable(bad[0].manifest.reason)
    if bad or proc.returncode != 0 or len(ranks) != spec.nproc:
        why = (f"rank {bad[0].rank}: {bad[0].manifest.reason}" if bad else
               f"torch.distributed.run exited {proc.returncode}: " + " | ".join(tail[-8:]))
        raise RuntimeError(why)
    first = ranks[0].manifest
    for name in _RANK0_FIELDS:
        setattr(manifest, name, getattr(first, name))
    for note in (first.note or "").split("; "):   # rank 0's own notes (the backend's, the launcher has)
        if note not in (manifest.note or "").split("; "):
            manifest.add_note(note)
    slowest = np.max([r.samples_ms for r in ranks], axis=0)
    manifest.latency_ms = Timer.of({**latency_stats(list(slowest)), "timer": first.latency_ms.timer,
                                    "over_ranks": "the slowest rank of each iteration"})
    manifest.distributed = msgspec.structs.replace(manifest.distributed, ranks=[
        RankSummary(rank=r.rank, device=r.device, latency_ms=Timer.of(latency_stats(r.samples_ms)),
                    host_ms=r.manifest.host_ms, peak_memory_MB=r.manifest.peak_memory_MB,
                    compile_s=r.manifest.compile_s) for r in ranks])
    traces = {t for r in ranks for t in r.manifest.profile.traces}
    manifest.profile = Profile(iterations=spec.profile_iters, traces=sorted(traces))


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


def rank(job: ChildJob) -> int:
    """One rank of a job (run by torch.distributed.run, which sets RANK, LOCAL_RANK, WORLD_SIZE):
    the one capture on the rank's device (:class:`~tracekit.capture.capture_run.Capture` with its
    rank, the world size and :func:`wrap`), its results written to ``.rank<r>.result`` in the run
    folder ``job.out``; returns 0 if ok, 1 if not (the launcher then stops the others)."""
    # torch.distributed.run starts each rank in a session of its own: a rank must not outlive
    # its launcher (a bench that kills a cell on timeout kills the launcher's process group).
    die_with_parent(os.getppid())
    folder, spec = Path(job.out), job.spec
    rank_id, local, world = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    device = spec.device
    if device.startswith("cuda"):
        device = f"cuda:{local % torch.cuda.device_count()}"
        torch.cuda.set_device(device)
    torch.distributed.init_process_group(job.backend, timeout=PROCESS_GROUP_TIMEOUT)
    capture = Capture.of(resolve(replace(spec, device=device)), None, trace_dir=folder,
                         where=f"{folder} rank {rank_id}", rank=rank_id, world_size=world,
                         wrap=lambda m: wrap(m, spec.parallel, device))
    manifest = capture.run()
    failed_at = time.time() if manifest.status != "ok" else None
    samples = manifest.latency_ms.samples if manifest.latency_ms else []
    RankResult(rank_id, device, samples, manifest, failed_at).write(folder / RANK_FILE.format(rank_id))
    if manifest.status != "ok":
        return 1   # the launcher stops the other ranks (a collective may be waiting for this one)
    torch.distributed.destroy_process_group()
    return 0

"""The launching side of a job (``tracekit trace --nproc N``): :func:`launch`, the run's capture's
``elsewhere`` (:class:`~tracekit.capture.capture_run.Capture`), starts ``python -m
torch.distributed.run --standalone --nproc-per-node N`` (the engine behind ``torchrun``) with
tracekit's child entry point as each rank's program (a :class:`~tracekit.capture.child.ChildJob` of
task "rank": :func:`tracekit.capture.ranks.rank`), then gathers the ranks' results into the one
``run.json``: rank 0's stages (its ``host_ms`` too), ``latency_ms`` over the slowest rank of each
timed iteration (the step time of the job), ``twin`` the same way (:mod:`tracekit.capture.twins`),
and ``distributed``: world size, backend, parallel, launcher, its log, and each rank's latencies,
host time, peak memory, compile time and parameter checksum (a note where the checksums differ:
replicas out of step).

What reaches the terminal: the ranks' stage lines while they run. Everything else the launcher
and the ranks print (torch.distributed.run's ChildFailedError and its traceback, a rank's
failure, other packages' warnings, Kineto's lines) goes to ``launcher.log`` in the run folder
(named in run.json), and a failure is the run's one line: the rank that failed first, its stage
and its reason. The launcher is killed past the ranks' time limits
(:func:`tracekit.capture.ranks.time_limit_s`, :data:`~tracekit.capture.ranks.TEARDOWN_S`).

The process group's backend is NCCL when every rank has a GPU of its own, else gloo
(:func:`tracekit.capture.environment.process_group_backend`); the launcher's environment turns
NVLink multicast off (:data:`tracekit.capture.environment.NO_MULTICAST`), and NCCL's asynchronous
error handling where a CUDA graph captures the step's collectives.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import numpy as np

from tracekit import models
from tracekit.capture import twins
from tracekit.capture.capture_run import Capture
from tracekit.capture.child import ChildJob
from tracekit.capture.environment import child_env, process_group_backend
from tracekit.capture.ranks import RANK_FILE, TEARDOWN_S, RankResult, time_limit_s
from tracekit.capture.timers import latency_stats
from tracekit.manifest import Distributed, Manifest, Profile, RankSummary, Timer

LAUNCHER_LOG = "launcher.log"  # the launcher's and the ranks' output, in the run folder
# Copied from rank 0's results into the run's manifest: the stages every rank measured.
_RANK0_FIELDS = ("device_type", "device_name", "build_s", "parameters", "prepare_s", "backend", "first_call_s",
                 "loss", "compile_s", "max_abs_diff", "diff_tolerance", "diff_ok", "warmup_s", "flop_per_iter",
                 "bytes_per_iter", "op", "peak_memory_MB", "memory_source", "attribution", "wall_ms",
                 "timer_agreement", "interleaving", "host_ms")
GRACE_S = 60.0   # the launcher is killed this long after every rank's limits have passed


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def _run_launcher(cmd: list[str], env: dict, log_path: Path, emit, limit_s: float) -> tuple[int, bool]:
    """Run the launcher: its output (and its ranks') into ``log_path``, the ranks' stage lines
    (their stdout) to ``emit`` too; killed past ``limit_s``. Returns (exit status, whether killed)."""
    killed = threading.Event()
    with open(log_path, "w") as log, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                                       text=True, env=env) as proc:
        def kill() -> None:
            killed.set()
            proc.kill()   # its ranks die with it (die_with_parent)
        killer = threading.Timer(limit_s, kill)
        killer.daemon = True
        killer.start()
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if line.strip():
                    emit(line.rstrip())
            proc.wait()
        except BaseException:  # Ctrl-C or SIGTERM (as the CLI takes it): the launcher stops its ranks
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
        finally:
            killer.cancel()
    return proc.returncode, killed.is_set()


def launch(capture: Capture) -> None:
    """Run the capture's spec on ``spec.nproc`` ranks and fill its manifest from their results
    (the run folder: ``capture.out``; the launcher's output: its ``launcher.log``).

    Raises:
        models.Unavailable: a rank found the workload cannot run here.
        RuntimeError: a rank failed (the first to fail: its rank and reason; the run's stage
            becomes that rank's), or the launcher did (its exit status and the end of its log).
        ValueError: a time limit that is not a number (:func:`time_limit_s`).
    """
    spec, manifest, directory = capture.spec, capture.manifest, capture.out
    backend, note = process_group_backend(spec.device.split(":")[0], spec.nproc)
    manifest.add_note(note)
    if spec.phase == "inference" and spec.parallel.startswith("ddp"):
        manifest.add_note("DDP in the inference phase communicates nothing (it reduces gradients)")
    manifest.distributed = Distributed(world_size=spec.nproc, backend=backend, parallel=spec.parallel,
                                       launcher="torch.distributed.run", launcher_log=LAUNCHER_LOG)
    for old in directory.glob(RANK_FILE.format("*")):
        old.unlink()
    capture.stage(f"launching {spec.nproc} ranks (torch.distributed.run, {backend}, {spec.parallel})")
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                "--nproc-per-node", str(spec.nproc)]
    cmd = ChildJob("rank", spec, str(directory), backend=backend).command(launcher)
    # OMP_NUM_THREADS: torchrun sets 1 where it is unset, and says so in a banner of warnings; set here
    # (the user's own setting is kept), the ranks get the same and the banner is not printed.
    env = child_env(PYTHONUNBUFFERED="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    if capture.resolved.backend.graph_capture == "prepare" and backend == "nccl":
        # The CUDA graph holds the step's collectives: NCCL's asynchronous error handling off, as PyTorch's
        # CUDA semantics notes ask ("Usage with DistributedDataParallel"); each rank's time limit stands in.
        env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
    limit_s = time_limit_s() + TEARDOWN_S + GRACE_S
    returncode, killed = _run_launcher(cmd, env, directory / LAUNCHER_LOG, capture.emit, limit_s)
    ranks = sorted((RankResult.read(p) for p in directory.glob(RANK_FILE.format("*"))), key=lambda r: r.rank)
    for p in directory.glob(RANK_FILE.format("*")):
        p.unlink()
    # the rank that failed first is the cause; the others lost their peer after it
    bad = sorted((r for r in ranks if r.manifest.status != "ok"), key=lambda r: r.failed_at or 0)
    if bad and bad[0].manifest.status == "skipped":
        raise models.Unavailable(bad[0].manifest.reason)
    if bad:
        manifest.stage = bad[0].manifest.stage
        raise RuntimeError(f"rank {bad[0].rank}: {bad[0].manifest.reason}")
    if returncode != 0 or len(ranks) != spec.nproc:
        how = f"killed after {limit_s:.0f} s" if killed else f"exited {returncode}"
        raise RuntimeError(f"torch.distributed.run {how} with {len(ranks)} of {spec.nproc} rank results; the end "
                           f"of {LAUNCHER_LOG}: {_tail(directory / LAUNCHER_LOG)}")
    _gather(manifest, ranks, spec.profile_iters)


def _gather(manifest: Manifest, ranks: list[RankResult], profile_iters: int) -> None:
    """Fill the job's manifest from its ranks' results (see the module docstring); a note where
    the ranks' parameter checksums differ."""
    first = ranks[0].manifest
    for name in _RANK0_FIELDS:
        setattr(manifest, name, getattr(first, name))
    for note in (first.note or "").split("; "):   # rank 0's own notes (the backend's, the launcher has)
        if note not in (manifest.note or "").split("; "):
            manifest.add_note(note)
    sums = [r.parameter_checksum for r in ranks]
    if len(set(sums)) > 1:
        manifest.add_note("the ranks' parameters differ after the run (sum of |w| per rank: "
                          + ", ".join(f"{s:.9g}" for s in sums) + "): their replicas went out of step")
    slowest = np.max([r.samples_ms for r in ranks], axis=0)
    manifest.latency_ms = Timer.of({**latency_stats(list(slowest)), "timer": first.latency_ms.timer,
                                    "over_ranks": "the slowest rank of each iteration"})
    manifest.distributed = msgspec.structs.replace(manifest.distributed, ranks=[
        RankSummary(rank=r.rank, device=r.device, latency_ms=Timer.of(latency_stats(r.samples_ms)),
                    host_ms=r.manifest.host_ms, peak_memory_MB=r.manifest.peak_memory_MB,
                    compile_s=r.manifest.compile_s, parameter_checksum=r.parameter_checksum) for r in ranks])
    manifest.twin = twins.slowest_over_ranks([r.manifest.twin for r in ranks])
    traces = {t for r in ranks for t in r.manifest.profile.traces}
    manifest.profile = Profile(iterations=profile_iters, traces=sorted(traces))

"""Each rank of a job (``tracekit trace --nproc N``): what torch.distributed.run starts N of
(:mod:`tracekit.capture.launcher` starts it, then gathers their results).

:func:`rank` joins the process group and runs the one capture
(:class:`~tracekit.capture.capture_run.Capture`) with its rank, the world size and how the model is
shared (``--parallel``: :func:`wrap`): build, reference output, prepare (every backend mode applies
per rank), first call, warm-up, timing (the same calls on every rank, host time between
barriers), the profiled window, its trace written as ``<host>_rank<r>.<ts>.pt.trace.json.gz`` into
the one run folder, and its results (:class:`RankResult`) into ``.rank<r>.result`` there. Its
stage lines go to stdout while it runs (the launcher shows them), its failure to stderr (the
launcher's log). Each rank has a time limit (:func:`time_limit_s`; past it the rank records
"timed out after N s in stage X" and ends), and its teardown too (:data:`TEARDOWN_S`): the
prepared step, with any CUDA graph holding NCCL work, is released before the process group is
destroyed, and the process ends without the interpreter's shutdown. With DDP the inference
phase communicates nothing (DDP reduces gradients); the launcher notes it.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import NoReturn

import torch

from tracekit.capture.capture_run import Capture
from tracekit.capture.child import ChildJob, die_with_parent
from tracekit.capture.environment import CPU_BINDING_ENV, bind_rank_cpus
from tracekit.capture.resolved import resolve
from tracekit.capture.sharding import wrap
from tracekit.io import write_json
from tracekit.manifest import Manifest

RANK_FILE = ".rank{}.result"  # not *.json: never taken for a trace
PROCESS_GROUP_TIMEOUT = timedelta(minutes=10)
TIME_LIMIT_ENV = "TRACEKIT_RANK_TIMEOUT_S"   # each rank's time limit in seconds (default below)
DEFAULT_TIME_LIMIT_S = 1200.0
TEARDOWN_S = 60.0      # a rank's teardown (process group destroyed) after its results are written


@dataclass
class RankResult:
    """What a rank hands the launching process (``.rank<r>.result`` in the run folder): its
    device, its timed latencies (ms, in call order), its manifest (status, reason, the stages it
    measured), when it failed (``time.time()``; None if it did not), and its parameter checksum
    (:func:`parameter_checksum`)."""

    rank: int
    device: str
    samples_ms: list[float]
    manifest: Manifest
    failed_at: float | None = None
    parameter_checksum: float | None = None

    def write(self, path: Path) -> None:
        """Write the result as one JSON object at ``path`` (the manifest as run.json holds it)."""
        write_json(path, {**vars(self), "manifest": self.manifest.to_dict()})

    @classmethod
    def read(cls, path: Path) -> "RankResult":
        """The result :meth:`write` wrote at ``path`` (raises OSError, ValueError where it cannot)."""
        data = json.loads(path.read_text())
        return cls(**{**data, "manifest": Manifest.from_dict(data["manifest"])})


def time_limit_s() -> float:
    """Each rank's time limit in seconds: ``$TRACEKIT_RANK_TIMEOUT_S``, else
    :data:`DEFAULT_TIME_LIMIT_S` (a bench cell's own ``timeout_s`` stops the whole cell first
    where it is shorter).

    Raises:
        ValueError: the variable is set to something else than a positive number.
    """
    raw = os.environ.get(TIME_LIMIT_ENV, "")
    try:
        limit = float(raw) if raw else DEFAULT_TIME_LIMIT_S
    except ValueError:
        limit = -1.0
    if not limit > 0:
        raise ValueError(f"{TIME_LIMIT_ENV} must be a positive number of seconds, got {raw!r}")
    return limit


def parameter_checksum(module: torch.nn.Module | None, parallel: str) -> float | None:
    """The sum of |w| over the module's parameters, in float64: the same on every rank of a DDP
    job whose replicas stayed in step (bit-equal weights sum alike); None without a module or
    under FSDP (each rank holds a shard)."""
    if module is None or not parallel.startswith("ddp"):
        return None
    with torch.no_grad():
        return float(sum(p.detach().double().abs().sum() for p in module.parameters()))


def _say(line: str, running: bool) -> None:
    """A rank's line: to stdout while its capture runs (the launcher shows it), else to stderr
    (its failure: the launcher's log only, the launcher says it once for the job)."""
    print(line, file=sys.stdout if running else sys.stderr, flush=True)


def _exit(code: int) -> NoReturn:
    """End the process now, its output flushed: the interpreter's own shutdown, where a CUDA graph
    holding NCCL work and the communicator it uses may be destroyed in any order, is skipped."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def rank(job: ChildJob) -> NoReturn:
    """One rank of a job (run by torch.distributed.run, which sets RANK, LOCAL_RANK, WORLD_SIZE):
    the one capture on the rank's device (:class:`~tracekit.capture.capture_run.Capture` with its
    rank, the world size and :func:`wrap`), its results written to ``.rank<r>.result`` in the run
    folder ``job.out``. Ends the process (:func:`_exit`): 0 if ok, 1 if not (the launcher then stops
    the others), 1 too past the rank's time limit (:func:`time_limit_s`; its result then says
    "timed out after N s in stage X"), once the process group is destroyed (after the prepared
    step, and any CUDA graph in it, is released) or :data:`TEARDOWN_S` has passed."""
    # torch.distributed.run starts each rank in a session of its own: a rank must not outlive
    # its launcher (a bench that kills a cell on timeout kills the launcher's process group).
    die_with_parent(os.getppid())
    folder, spec = Path(job.out), job.spec
    rank_id, local, world = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    device = spec.device
    if device.startswith("cuda"):
        device = f"cuda:{local % torch.cuda.device_count()}"
        torch.cuda.set_device(device)
    cpus = bind_rank_cpus(local, int(os.environ.get("LOCAL_WORLD_SIZE", world)))
    shared: dict[str, torch.nn.Module] = {}   # the wrapped model, for its checksum once the capture is done
    capture = Capture.of(resolve(replace(spec, device=device)), None, trace_dir=folder,
                         where=f"{folder} rank {rank_id}", rank=rank_id, world_size=world,
                         wrap=lambda m: shared.setdefault("module", wrap(m, spec.parallel, device)),
                         log=lambda line: _say(line, capture.manifest.status == "running"))
    written = threading.Lock()   # held by whoever writes the result: the rank, or its time limit

    def write(manifest: Manifest, checksum: float | None = None) -> None:
        failed_at = time.time() if manifest.status != "ok" else None
        samples = manifest.latency_ms.samples if manifest.latency_ms else []
        RankResult(rank_id, device, samples, manifest, failed_at, checksum).write(folder / RANK_FILE.format(rank_id))

    def time_out(limit_s: float) -> None:
        if written.acquire(blocking=False):
            capture.fail(TimeoutError(f"timed out after {limit_s:.0f} s in stage {capture.manifest.stage}"))
            write(capture.manifest)
            _exit(1)

    limit_s = time_limit_s()
    watchdog = threading.Timer(limit_s, time_out, (limit_s,))
    watchdog.daemon = True
    watchdog.start()
    if cpus:
        capture.manifest.add_note(f"each rank bound to CPUs of its own ({CPU_BINDING_ENV}=exclusive): "
                                  f"{len(cpus)} CPUs a rank")
    capture.stage("joining the process group")
    torch.distributed.init_process_group(job.backend, timeout=PROCESS_GROUP_TIMEOUT)
    manifest = capture.run()
    ok = manifest.status == "ok"
    checksum = parameter_checksum(shared.pop("module", None), spec.parallel) if ok else None
    written.acquire()   # (held already if the time limit came first: it writes the result and ends the process)
    watchdog.cancel()
    write(manifest, checksum)
    if not ok:
        _exit(1)   # the launcher stops the other ranks (a collective may be waiting for this one)
    teardown = threading.Timer(TEARDOWN_S, _exit, (0,))
    teardown.daemon = True
    teardown.start()
    gc.collect()   # the prepared step and its CUDA graph, whose NCCL work must go before the communicator
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    torch.distributed.destroy_process_group()
    _exit(0)

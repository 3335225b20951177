"""One run made in several processes: the median process, and the spread across them.

Host speed varies between processes (up to 1.6x on the lent H100), more than
within one: the p10-p90 range of one process's timed iterations does not show
it. ``repeats = N`` (``--repeats N``, ``REPEATS=N``, a suite's ``repeats``)
runs the spec in N fresh processes, one after the other (a
:class:`~tracekit.capture.child.ChildJob` of task "repeat": :func:`process`, the one capture in
that process), each a whole run with its own compile, timing and profiled window.
:func:`combine` makes the run's manifest from theirs:

* ``latency_ms``: median = the median of the processes' medians; p10, p90,
  mean, std, min, max over all their timed iterations pooled, so the range a
  speedup is given with holds the noise between processes too;
* ``wall_ms``: the median process's synchronised wall clock, with the median
  of the processes' wall-clock medians as its median and, where the processes
  kept their blocks (``samples``), p10, p90... over them all pooled;
  ``timer_agreement`` from the two medians;
* ``repeats``: n, each process's status, latency and wall-clock medians and
  host load, ``median_process`` (the process whose median is the median; its
  trace is the run's trace, its other fields the run's) and ``spread`` =
  (max - min) / median of the processes' latency medians;
* ``host_load``: the first process's start and the last one's end;
* a job (``nproc`` > 1): each process launches the job's ranks (:mod:`tracekit.capture.launcher`);
  the median process's ranks (``distributed``), traces and ``launcher.log`` are the run's;
* a decode run's ``decode``: the median process's, its ms per token and tokens/s from the pooled
  ``latency_ms`` (:func:`tracekit.capture.timers.token_rates`).

A process that does not end ok makes the run end as it did (its status and
reason, naming the process). The other processes' traces are not kept: a
folder holds one run and its trace (see :func:`tracekit.trace.discover`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np
from msgspec.structs import replace as struct_replace

from tracekit.capture import launcher, timers
from tracekit.capture.capture_run import Capture
from tracekit.capture.child import ChildJob
from tracekit.capture.environment import child_env
from tracekit.capture.resolved import ResolvedRun, resolve
from tracekit.errors import Interrupted
from tracekit.manifest import HostLoad, Manifest, ProcessSummary, Repeats, Timer
from tracekit.manifest.spec import RunSpec
from tracekit.trace.reader import trace_files


def _pooled(parts: list[Timer], timer: str) -> dict:
    """Median of the parts' medians (their ``latency_ms`` or ``wall_ms``); the other figures over
    their pooled samples (none where no part kept any), as :func:`tracekit.capture.timers.latency_stats`."""
    samples = np.concatenate([np.asarray(p.samples or [], dtype=np.float64) for p in parts])
    pooled = timers.latency_stats(samples) if samples.size else {}
    return {**pooled, "timer": timer, "median": float(np.median([p.median for p in parts]))}


def combine(spec: RunSpec, processes: list[Manifest]) -> tuple[Manifest, int]:
    """The manifest of a run made in ``processes`` (their manifests, in order), and the
    index of the median process (see the module docstring)."""
    ok = [i for i, m in enumerate(processes) if m.status == "ok"]
    medians = [m.latency("median") for m in processes]
    order = sorted(ok, key=lambda i: medians[i])
    pick = order[(len(order) - 1) // 2] if order else len(processes) - 1
    run = Manifest.from_dict(processes[pick].to_dict())
    run.spec = spec
    each = [ProcessSummary(status=m.status, reason=m.reason or "", latency_median_ms=m.latency("median"),
                           wall_median_ms=m.wall_ms.median if m.wall_ms else None, host_load=m.host_load)
            for m in processes]
    run.repeats = Repeats(n=len(processes), median_process=pick, processes=each)
    failed = [(i, m) for i, m in enumerate(processes) if m.status != "ok"]
    if failed:
        i, m = failed[0]
        run.status, run.reason = m.status, f"process {i + 1} of {len(processes)}: {m.reason}"
        return run, pick
    run.latency_ms = Timer.of(_pooled([m.latency_ms for m in processes], processes[pick].latency_ms.timer))
    if all(m.wall_ms for m in processes):
        walls = [m.wall_ms for m in processes]
        run.wall_ms = Timer.of({**walls[pick].to_dict(), **_pooled(walls, walls[pick].timer),
                                "processes": len(processes)})
        run.timer_agreement = timers.agreement(run.latency_ms.median, run.wall_ms.median)
    run.repeats = Repeats(n=len(processes), median_process=pick, processes=each,
                          spread=(max(medians) - min(medians)) / run.latency_ms.median)
    if run.decode and run.decode.tokens_per_step:
        ms, rate = timers.token_rates(run.latency_ms.to_dict(), run.decode.tokens_per_step)
        run.decode = struct_replace(run.decode, ms_per_token=Timer.of(ms), tokens_per_s=Timer.of(rate))
    first, last = processes[0].host_load, processes[-1].host_load
    run.host_load = HostLoad(start=first.start if first else None, end=last.end if last else None)
    return run, pick


def run(resolved: ResolvedRun, out: Path | str, log: Callable[[str], None]) -> Manifest:
    """Run the spec in ``spec.repeats`` processes and write the run's folder (run.json and
    the median process's trace) where a single run would go; return its manifest."""
    spec, directory = resolved.spec, resolved.directory(out)   # the spec as a single run records it
    directory.mkdir(parents=True, exist_ok=True)
    one = replace(spec, repeats=1)
    processes = []
    # tmp holds the processes' run folders; scratch their temporary files, removed even when one is killed
    with tempfile.TemporaryDirectory(dir=directory.parent, prefix=f".{spec.mode}.repeats-") as tmp, \
            tempfile.TemporaryDirectory(prefix="tracekit-repeats-", ignore_cleanup_errors=True) as scratch:
        folders = []
        for i in range(spec.repeats):
            log(f"[{directory}] process {i + 1} of {spec.repeats}")
            folder = resolved.directory(Path(tmp) / str(i))
            try:
                subprocess.run(ChildJob("repeat", one, str(folder), parent=os.getpid()).command(),
                               stdin=subprocess.DEVNULL, check=False, env=child_env(TMPDIR=scratch))
            except KeyboardInterrupt:
                for old in trace_files(directory):
                    old.unlink()
                reason = f"interrupted (Ctrl-C or SIGTERM) during process {i + 1} of {spec.repeats}"
                Manifest(spec=spec, label=directory.parent.name, model=spec.model, mode=spec.mode,
                         status="interrupted", reason=reason).write(directory)
                raise Interrupted(f"{directory}: {reason}; run.json says so") from None
            folders.append(folder)
            processes.append(Manifest.read(folder) or Manifest(
                spec=one, model=spec.model, mode=spec.mode, status="failed",
                reason="the process ended without writing run.json"))
        manifest, pick = combine(spec, processes)
        for old in trace_files(directory):
            old.unlink()
        if folders[pick].is_dir():   # its traces, and a job's launcher.log
            for kept in [*trace_files(folders[pick]), *folders[pick].glob("launcher.log")]:
                shutil.move(kept, directory / kept.name)
    manifest.label = directory.parent.name
    manifest.write(directory)
    return manifest


def process(job: ChildJob) -> Manifest:
    """One of the processes (a :class:`~tracekit.capture.child.ChildJob` of task "repeat"): the one
    capture of ``job.spec`` (one process's spec) in this process, written to the run folder
    ``job.out``; returns its manifest.

    Raises:
        models.UnknownModel, backends.UnknownMode, ValueError: what
        :meth:`tracekit.capture.capture_run.Capture.run` raises (nothing written).
    """
    return Capture.of(resolve(job.spec), Path(job.out),
                      elsewhere=launcher.launch if job.spec.nproc > 1 else None).run()

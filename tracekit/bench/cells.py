"""Running one cell in its own process: the child (a :class:`~tracekit.capture.child.ChildJob`
of task "run") runs the spec and writes its trace and run.json; the parent watches it,
enforces the cell's timeout and the suite's deadline, and records what the child could not
(a timeout, a crash, the time limit) as a status row."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tracekit import __version__
from tracekit.bench.plan import FINAL, Planned
from tracekit.capture.child import ChildJob
from tracekit.capture.environment import child_env, default_device
from tracekit.manifest import Manifest
from tracekit.trace.reader import trace_files

CELL_LOG = "cell.log"


def write_status(folder: Path, p: Planned, status: str, reason: str) -> Manifest:
    """Record a status the bench decided (not the run): keeps what the run wrote for this
    spec (environment, start time), drops any trace file (partial or stale)."""
    manifest = Manifest.read(folder)
    if manifest is None or manifest.spec != p.spec:
        device = str(p.spec.device or default_device())
        manifest = Manifest(tracekit=__version__, spec=p.spec, label=p.name.rsplit("/", 1)[0], model=p.spec.model,
                            mode=p.spec.mode, device_type=device.split(":")[0], stage="not started")
    manifest.status, manifest.reason = status, reason
    folder.mkdir(parents=True, exist_ok=True)
    for old in trace_files(folder):
        old.unlink()
    manifest.write(folder)
    return manifest


def _last_stage(log: Path) -> str:
    """The runner's last ``[folder] stage`` line in a cell's log, or ""."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if line.startswith("[") and "] " in line:
            return line.split("] ", 1)[1].strip()
    return ""


def _log_tail(log: Path, chars: int = 1500) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    return " ".join(text.strip()[-chars:].split())


def _written_since(path: Path, since: float) -> bool:
    """Whether ``path`` was written at or after ``since`` (a ``time.time()`` value)."""
    try:
        return path.stat().st_mtime >= since
    except OSError:
        return False


def _kill(proc: subprocess.Popen) -> None:
    """Kill the cell's whole process group (its compile workers too) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _exit_text(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exited {rc}"


def run_cell(p: Planned, root: Path, timeout_s: float | None = None, deadline: float | None = None,
             on_stage=lambda stage: None) -> Manifest:
    """Run one cell in a child process; return its final manifest (also on disk).

    The child (``python -m tracekit.capture``, :class:`~tracekit.capture.child.ChildJob`) writes the trace and
    run.json; its output goes to ``cell.log``. Past ``timeout_s`` seconds the
    cell is killed and recorded as "timeout"; past ``deadline`` (a
    ``time.monotonic()`` value) as "skipped" (time limit, redone next time).
    A child that ends without a final run.json is recorded as "failed" with its
    exit status and the end of its log; one that wrote "skipped" itself (the run
    found it cannot apply here) keeps that status.

    Raises:
        KeyboardInterrupt: on Ctrl-C (or SIGTERM, as the CLI takes it), after
            killing the child; its run.json says "interrupted", so the cell is not done.
    """
    folder = root / p.name
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / CELL_LOG
    cmd = ChildJob("run", p.spec, str(root), parent=os.getpid()).command()
    t0, started = time.monotonic(), time.time()
    stopped = None
    # The child's temporary files (its run's scratch folder: Inductor's cache, an ONNX export) go to a
    # folder removed here, however the child ends: a timeout or an interrupted bench kills it unwarned.
    with open(log, "w") as logf, tempfile.TemporaryDirectory(prefix="tracekit-cell-",
                                                             ignore_cleanup_errors=True) as scratch:
        # Its own session: a timeout can kill the child's whole group (Inductor's compile workers).
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=child_env(PYTHONUNBUFFERED="1", TMPDIR=scratch))
        try:
            while True:
                try:
                    rc = proc.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    on_stage(_last_stage(log))
                    now = time.monotonic()
                    if timeout_s is not None and now - t0 > timeout_s:
                        stopped = "timeout"
                    elif deadline is not None and now > deadline:
                        stopped = "time limit"
                    if stopped:
                        _kill(proc)
                        rc = proc.returncode
                        break
        except BaseException as exc:
            _kill(proc)
            done = Manifest.read(folder)
            if isinstance(exc, KeyboardInterrupt) and not (done and done.spec == p.spec and done.status in FINAL):
                write_status(folder, p, "interrupted", f"the bench was interrupted (Ctrl-C or SIGTERM) during "
                                                       f"{_last_stage(log) or 'start-up'}")
            raise
    elapsed = time.monotonic() - t0
    manifest = Manifest.read(folder)
    if manifest is not None and manifest.spec == p.spec and (manifest.status in FINAL or (
            manifest.status == "skipped" and _written_since(folder / "run.json", started))):
        return manifest  # a result, or the run's own "cannot run here" (FP8 on a model without eligible linears)
    stage = _last_stage(log) or "start-up"
    if stopped == "timeout":
        return write_status(folder, p, "timeout", f"no result within the {timeout_s:g} s limit of one cell "
                                                   f"(--timeout); stopped during: {stage}")
    if stopped == "time limit":
        return write_status(folder, p, "skipped", f"time limit: the suite's time ran out {elapsed:.0f} s into "
                                                   f"this cell, during: {stage}")
    return write_status(folder, p, "failed", f"process {_exit_text(rc)} during {stage}: {_log_tail(log)}")

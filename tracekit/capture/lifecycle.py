"""One run's lifecycle around its stages: the manifest it starts with, the stage it is in,
how it ends (a failure's status and reason, Ctrl-C), and the process settings it runs
under (torch's threads, a scratch folder). :func:`tracekit.capture.runner.run`, each rank of a job
(:mod:`tracekit.capture.ranks`), a recorded loop (:mod:`tracekit.capture.loop`) and the counters'
workload (:mod:`tracekit.counters.workload`) all run inside one :class:`Lifecycle`."""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch
from msgspec.structs import replace

from tracekit import __version__, models
from tracekit.capture import timers
from tracekit.capture.environment import describe
from tracekit.errors import Interrupted
from tracekit.manifest import Environment, HostLoad, LoadReading, Manifest, Source
from tracekit.manifest.spec import RunSpec
from tracekit.trace.reader import trace_files

Log = Callable[[str], None]
REASON_CHARS = 2000   # a failure's message is cut to this many characters in run.json


def stderr_log(line: str) -> None:
    """A progress line to stderr, in one write (the ranks of a job share one pipe)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def failure(exc: BaseException, where: str = "") -> tuple[str, str]:
    """(status, reason) of a run stopped by ``exc``: "skipped" for a workload that cannot run
    here (:class:`tracekit.models.Unavailable`), "oom" for an out-of-memory error (torch's, or
    any whose message says "out of memory"), else "failed"; the reason is
    ``"<exception type><where>: <message>"``, the message cut to :data:`REASON_CHARS`."""
    if isinstance(exc, models.Unavailable):
        status = "skipped"
    elif isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower():
        status = "oom"
    else:
        status = "failed"
    return status, f"{type(exc).__name__}{where}: {str(exc).strip()[:REASON_CHARS]}"


def now() -> str:
    """The time now, ISO 8601 in UTC to the second (run.json's ``started_at``, ``finished_at``)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_manifest(spec: RunSpec, label: str, source: dict, note: str = "") -> Manifest:
    """The manifest a run starts with (status "running"): what defines it (the resolved ``spec``,
    the model's source), where it runs, the environment, the host's load and the start time."""
    return Manifest(tracekit=__version__, spec=spec, label=label, model=spec.model, mode=spec.mode,
                    device_type=spec.device.split(":")[0], source=Source.of(source), status="running", reason="",
                    stage="start", note=note, environment=Environment.of(describe(spec.device)), started_at=now(),
                    host_load=HostLoad(start=LoadReading.of(timers.host_load())))


class Lifecycle:
    """The manifest of one run as its stages go, and how the run ends.

    Args:
        manifest: the run's manifest (:func:`new_manifest`).
        folder: the run folder its run.json is written to; None where the caller keeps the
            manifest (a rank of a job hands it to the launching process).
        log: where stage lines go (``[where] stage``), and the lines of the processes the run
            starts (:attr:`emit`); None: nowhere.
        where: what the lines name (the run folder, a rank).

    Used as a context manager around the stages: an Exception ends the run with its
    :func:`failure` status (not raised on); Ctrl-C (KeyboardInterrupt, or SIGTERM as the CLI
    takes it) with status "interrupted" and the stage, raised as
    :class:`tracekit.errors.Interrupted`; either way ``finished_at``, the host's load at the end
    and run.json are written.
    """

    def __init__(self, manifest: Manifest, folder: Path | None, log: Log | None = stderr_log, where: str = ""):
        self.manifest, self.folder = manifest, folder
        self.emit: Log = log or (lambda line: None)
        self.where = where or str(folder)

    def start(self) -> None:
        """Make the run folder, remove the traces of an earlier run there, write run.json."""
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            for old in trace_files(self.folder):
                old.unlink()
        self.write()

    def write(self) -> None:
        """Write run.json (nothing without a folder)."""
        if self.folder is not None:
            self.manifest.write(self.folder)

    def log(self, text: str) -> None:
        """A line about this run: ``[where] text``."""
        self.emit(f"[{self.where}] {text}")

    def stage(self, name: str, shown: str | None = None) -> None:
        """Enter stage ``name`` (recorded as the run's stage; logged as ``shown`` when given)."""
        self.manifest.stage = name
        self.log(shown or name)

    def end(self, status: str, reason: str = "") -> None:
        """The run ended with ``status`` ("ok": its stage becomes "done")."""
        self.manifest.status, self.manifest.reason = status, reason
        if status == "ok":
            self.manifest.stage = "done"

    def fail(self, exc: BaseException, where: str = "") -> None:
        """End the run with ``exc``'s :func:`failure` status and reason, and say so."""
        self.end(*failure(exc, where))
        self.log(f"{self.manifest.status} during {self.manifest.stage}: {self.manifest.reason[:300]}")

    def finish(self) -> None:
        """Record the end time and the host's load, write run.json."""
        self.manifest.finished_at = now()
        self.manifest.host_load = replace(self.manifest.host_load or HostLoad(), end=LoadReading.of(timers.host_load()))
        self.write()

    def __enter__(self) -> "Lifecycle":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if isinstance(exc, Exception):
                self.fail(exc)
            elif isinstance(exc, KeyboardInterrupt):
                self.end("interrupted", f"interrupted (Ctrl-C or SIGTERM) during {self.manifest.stage}")
        finally:
            self.finish()
        if isinstance(exc, KeyboardInterrupt):
            raise Interrupted(f"{self.where}: {self.manifest.reason}; run.json says so") from None
        return isinstance(exc, Exception)


@contextmanager
def torch_threads(threads: int | None):
    """torch's intra-op threads set to ``threads`` inside the context (unchanged for None),
    restored after it."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def scratch():
    """One temporary folder for the run, removed when the run ends however it ends (an error,
    Ctrl-C, SIGTERM taken as Ctrl-C by the CLI): whatever the run writes to temporary files goes
    there (``tempfile.tempdir``, and ``TMPDIR`` for the processes it starts: the ONNX export and
    ORT's profile, the ranks of a distributed run), and so does Inductor's cache
    (``TORCHINDUCTOR_CACHE_DIR``), so ``compile_s`` is a cold compile, unless the user set
    TORCHINDUCTOR_CACHE_DIR (then theirs is used).

    Yields "cold" or the user's cache folder, recorded in the manifest.
    Inductor reads TORCHINDUCTOR_CACHE_DIR at each use and keeps Triton's cache
    under it (torch/_inductor/runtime/cache_dir_utils.py). One folder it fixes once, when
    ``torch._inductor.codecache`` is imported: its precompiled C++ headers', under the temporary
    folder of that moment. It is imported here first, before the run's folder is the temporary
    one: imported inside, the folder would be gone after the run, and a later C++ compile in the
    process (the API's next run, the user's own) fails for a missing header (seen with torch 2.11).
    """
    import torch._inductor.codecache  # noqa: F401 - see above; a one-process run imports it anyway (provenance)
    saved = {name: os.environ.get(name) for name in ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR")}
    before = tempfile.tempdir
    with tempfile.TemporaryDirectory(prefix="tracekit-run-", ignore_cleanup_errors=True) as tmp:
        tempfile.tempdir = os.environ["TMPDIR"] = tmp
        cache = saved["TORCHINDUCTOR_CACHE_DIR"]
        if cache is None:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
        try:
            yield cache or "cold"
        finally:
            tempfile.tempdir = before
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

"""Run the cells of suites, each in its own process: resumable, with progress, failures as rows.

A cell in a fresh process gets a clean CUDA context and allocator, its own
compile (no in-memory cache from an earlier cell), and a crash of one cell
(a segfault in a backend) cannot take the others with it.

Layout: a suite's runs go to ``<traces>/<suite name>/<label>/<mode>/`` (trace,
``run.json``, and ``cell.log``, the cell's own output), its report to
``<reports>/<suite name>/``.

Resuming: a cell is *done* when its ``run.json`` holds a final status
(:data:`FINAL`) written for the very same spec. The runner writes ``run.json``
atomically, "running" first and the final status last, after the trace; so a
cell killed at any point is simply not done, and the next run redoes it, and
only it. A "skipped" cell is not done either: it could not run here (an unknown
model, mode or field, a backend, phase or GPU missing: checked before each run,
without a process) or the time limit came first.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Table

from tracekit import __version__, backends, models
from tracekit.analysis.compare import Tables
from tracekit.analysis.runs import Analysis
from tracekit.analysis.runs import analyze as run_analysis
from tracekit.analysis.suite import SuiteTables
from tracekit.environment import default_device
from tracekit.manifest import Manifest
from tracekit.report import write_reports
from tracekit.runner import run_dir
from tracekit.spec import RunSpec, resolve
from tracekit.suite import SPEC_FIELDS, Cell, Suite, SuiteError
from tracekit.trace.reader import is_trace_file

FINAL = ("ok", "oom", "failed", "timeout")  # statuses of a finished cell ("skipped" is not one)
CELL_LOG = "cell.log"


@dataclass
class Planned:
    """One cell of a suite, as it stands before a run.

    name: the run's folder under the suite's traces, ``<label>/<mode>``.
    spec: what run.json records as ``spec`` (resolved RunSpec fields; the raw
        settings for a cell that has no RunSpec here).
    problem: why it cannot run here, or None.
    selected: matched by ``--only`` (every cell when no pattern is given).
    done: a final run.json for this spec exists (and ``--force`` was not given).
    """

    cell: Cell
    name: str
    spec: dict
    problem: str | None
    selected: bool
    done: bool

    @property
    def to_run(self) -> bool:
        return self.selected and not self.done and self.problem is None


@dataclass
class SuiteResult:
    """A suite after a bench run: its plan, the cells' final manifests and the analysis
    of its runs with their comparison."""

    suite: Suite
    planned: list[Planned]
    manifests: dict[str, Manifest]
    tables: Tables
    report_dir: Path
    elapsed_s: float = 0.0
    ran: list[str] = field(default_factory=list)

    @property
    def analysis(self) -> Analysis:
        return self.tables.analysis


class Interrupted(Exception):
    """Ctrl-C or SIGTERM during a bench run; finished cells are kept, the running one is redone next time."""


def suite_traces(traces: Path | str, suite: Suite) -> Path:
    """The folder a suite's runs go to: ``traces/<suite name>``."""
    return Path(traces) / suite.name


def _identify(cell: Cell, device: str) -> tuple[str, dict, str | None]:
    """(run name, spec as recorded, problem or None) of a cell, without running it."""
    values = cell.values
    mode = str(values.get("mode", "eager"))
    try:
        spec = cell.spec()
    except SuiteError as exc:
        known = RunSpec(**{k: v for k, v in values.items() if k in SPEC_FIELDS})
        label = known.label(-1, device) + "".join(f"-{values[k]}" for k in cell.unknown)
        return f"{label}/{mode}", values, str(exc)
    try:
        family = models.lookup(spec.model)[0]
        models.check_seq(family, spec.model, spec.seq)
    except ValueError as exc:  # an unknown model, a workload file that cannot be used, a bad seq
        return f"{spec.label(-1, device)}/{mode}", spec.to_dict(), str(exc)
    resolved = resolve(spec, family.default_batch, device, family.default_seq)
    return run_dir(spec, Path(), device).as_posix(), resolved.to_dict(), _problem(resolved) or family.missing


def _problem(spec: RunSpec) -> str | None:
    try:
        backend = backends.get(spec.mode)
    except backends.UnknownMode as exc:
        return str(exc)
    if spec.device.startswith("cuda") and not torch.cuda.is_available():
        return "needs a CUDA GPU; torch sees none here"
    return backends.why_not(backend, spec)


def plan(suite: Suite, traces: Path | str, only: tuple[str, ...] = (), force: bool = False,
         device: str | None = None) -> list[Planned]:
    """Each distinct cell of ``suite`` with its run name and state (see :class:`Planned`).

    ``only``: shell-style patterns matched against run names (``vit16*/eager``).
    ``device``: the default device of the machine that runs the suite ("cuda" or
    "cpu"; this machine's when None), which names and resolves the cells.

    Raises:
        SuiteError: two different cells would write the same folder.
    """
    root, device = suite_traces(traces, suite), device or default_device()
    out: list[Planned] = []
    seen: dict[str, dict] = {}
    for cell in suite.cells:
        name, spec, problem = _identify(cell, device)
        if name in seen:
            if seen[name] == spec:
                continue  # the same run, named twice (e.g. a default spelled out)
            raise SuiteError(f"{suite.path or suite.name}: two different cells write {name}: {seen[name]} "
                             f"and {spec}")
        seen[name] = spec
        manifest = Manifest.read(root / name)
        done = (not force and problem is None and manifest is not None and manifest.status in FINAL
                and manifest.spec == spec)
        selected = not only or any(fnmatch(name, p) for p in only)
        out.append(Planned(cell, name, spec, problem, selected, done))
    return out


def _write_status(folder: Path, p: Planned, status: str, reason: str) -> Manifest:
    """Record a status the bench decided (not the run): keeps what the run wrote for this
    spec (environment, start time), drops any trace file (partial or stale)."""
    manifest = Manifest.read(folder)
    if manifest is None or manifest.spec != p.spec:
        values = p.cell.values
        device = str(p.spec.get("device") or default_device())
        manifest = Manifest(tracekit=__version__, spec=p.spec, label=p.name.rsplit("/", 1)[0], model=values["model"],
                            mode=values.get("mode", "eager"), device_type=device.split(":")[0], stage="not started")
    manifest.status, manifest.reason = status, reason
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        if old.is_file() and is_trace_file(old):
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

    The child (``python -m tracekit.bench --cell ...``) writes the trace and
    run.json; its output goes to ``cell.log``. Past ``timeout_s`` seconds the
    cell is killed and recorded as "timeout"; past ``deadline`` (a
    ``time.monotonic()`` value) as "skipped" (time limit, redone next time).
    A child that ends without a final run.json is recorded as "failed" with its
    exit status and the end of its log; one that wrote "skipped" itself (the run
    found it cannot apply here) keeps that status.

    Raises:
        KeyboardInterrupt: on Ctrl-C (or SIGTERM, see :func:`bench`), after
            killing the child; its run.json stays "running", so the cell is not done.
    """
    folder = root / p.name
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / CELL_LOG
    cmd = [sys.executable, "-m", "tracekit.bench", "--cell", json.dumps(p.spec), "--out", str(root),
           "--parent", str(os.getpid())]
    t0, started = time.monotonic(), time.time()
    stopped = None
    with open(log, "w") as logf:
        # Its own session: a timeout can kill the child's whole group (Inductor's compile workers).
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
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
        except BaseException:
            _kill(proc)
            raise
    elapsed = time.monotonic() - t0
    manifest = Manifest.read(folder)
    if manifest is not None and manifest.spec == p.spec and (manifest.status in FINAL or (
            manifest.status == "skipped" and _written_since(folder / "run.json", started))):
        return manifest  # a result, or the run's own "cannot run here" (FP8 on a model without eligible linears)
    stage = _last_stage(log) or "start-up"
    if stopped == "timeout":
        return _write_status(folder, p, "timeout", f"no result within the {timeout_s:g} s limit of one cell "
                                                   f"(--timeout); stopped during: {stage}")
    if stopped == "time limit":
        return _write_status(folder, p, "skipped", f"time limit: the suite's time ran out {elapsed:.0f} s into "
                                                   f"this cell, during: {stage}")
    return _write_status(folder, p, "failed", f"process {_exit_text(rc)} during {stage}: {_log_tail(log)}")


@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (kill, a job scheduler) takes the same path as Ctrl-C."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _outcome(manifest: Manifest) -> str:
    if manifest.status == "ok":
        return f"ok  p50 {manifest.latency('median'):.3f} ms, first call {manifest.compile_s or 0:.1f} s"
    return f"{manifest.status or '?'}: {str(manifest.reason or '')[:200]}"


def run_planned(suite: Suite, planned: list[Planned], traces: Path | str, timeout_s: float | None = None,
                deadline: float | None = None, console: Console | None = None) -> tuple[dict[str, Manifest], list[str]]:
    """Run the cells of ``planned`` that are to run, with a progress bar; record the others' states.

    Cells that cannot run here and cells left when ``deadline`` passes get a
    "skipped" run.json with the reason. Returns (run name ->
    manifest for every cell with a run.json, names of the cells run now).

    Raises:
        Interrupted: Ctrl-C or SIGTERM; every cell finished before it is kept.
    """
    root = suite_traces(traces, suite)
    console = console or Console(stderr=True)
    manifests: dict[str, Manifest] = {}
    for p in planned:
        if p.selected and p.problem is not None:
            manifests[p.name] = _write_status(root / p.name, p, "skipped", p.problem)
    todo = [p for p in planned if p.to_run]
    ran: list[str] = []
    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[limit]}")]
    with _sigterm_as_interrupt(), Progress(*columns, console=console) as progress:
        task = progress.add_task(suite.name, total=len(todo), limit="")

        def show(p: Planned, stage: str = "") -> None:
            limit = "" if deadline is None else f"(time limit in {max(0, deadline - time.monotonic()) / 60:.1f} min)"
            progress.update(task, description=f"{suite.name}: {p.name}" + (f" · {stage}" if stage else ""),
                            limit=limit)

        current = ""
        try:
            for p in todo:
                if deadline is not None and time.monotonic() >= deadline:
                    manifests[p.name] = _write_status(root / p.name, p, "skipped",
                                                      "time limit: the suite's time ran out before this cell started")
                    progress.advance(task)
                    continue
                current = p.name
                show(p)
                t0 = time.monotonic()
                manifests[p.name] = run_cell(p, root, timeout_s, deadline, on_stage=lambda stage, p=p: show(p, stage))
                ran.append(p.name)
                progress.console.print(f"  {p.name}: {_outcome(manifests[p.name])} ({time.monotonic() - t0:.0f} s)",
                                       highlight=False, markup=False)
                progress.advance(task)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted during {current or suite.name}; the {len(ran)} cells finished in this "
                              "run are kept: run the same command again to go on") from None
    for p in planned:
        if p.name not in manifests and (manifest := Manifest.read(root / p.name)):
            manifests[p.name] = manifest
    return manifests, ran


def bench(suites: list[Suite], traces: Path | str = "traces", reports: Path | str = "reports",
          only: tuple[str, ...] = (), force: bool = False, timeout_s: float | None = None,
          max_minutes: float | None = None, command: str = "", console: Console | None = None) -> list[SuiteResult]:
    """Run suites one after the other, then analyze each and write its report.

    Time: ``max_minutes`` bounds the whole call; a suite's own ``max_minutes``
    bounds that suite, plus whatever earlier suites with a budget left unused.
    Cells past a limit become "skipped" rows (and run on the next call). Each
    suite's report is written as soon as its cells are done, to
    ``reports/<suite name>/``: summary.md, runs.csv, runs.json and report.md.
    ``timeout_s`` (else the suite's ``timeout_s``) limits one cell.

    Raises:
        SuiteError: a suite whose cells collide (see :func:`plan`), before anything runs.
        Interrupted: Ctrl-C or SIGTERM (finished cells are kept).
    """
    start = time.monotonic()
    total_deadline = None if max_minutes is None else start + 60 * max_minutes
    plans = [plan(s, traces, only, force) for s in suites]
    results, saved = [], 0.0
    for suite, planned in zip(suites, plans):
        t0 = time.monotonic()
        own = None if suite.max_minutes is None else t0 + 60 * suite.max_minutes + saved
        deadline = min((d for d in (total_deadline, own) if d is not None), default=None)
        manifests, ran = run_planned(suite, planned, traces, timeout_s or suite.timeout_s, deadline, console)
        if own is not None:
            saved = max(0.0, own - time.monotonic())
        results.append(write_suite_report(suite, planned, manifests, traces, reports, command,
                                          time.monotonic() - t0, ran))
    return results


def write_suite_report(suite: Suite, planned: list[Planned], manifests: dict[str, Manifest], traces: Path | str,
                       reports: Path | str, command: str = "", elapsed_s: float = 0.0,
                       ran: list[str] | None = None, rewritten_by: str = "") -> SuiteResult:
    """Analyze the suite's runs and write its report folder; return the :class:`SuiteResult`.
    (``command``, ``rewritten_by``: see :class:`tracekit.analysis.suite.SuiteTables`.)"""
    root = suite_traces(traces, suite)
    root.mkdir(parents=True, exist_ok=True)
    tables = Tables.of(run_analysis(root, only={p.name for p in planned if p.name in manifests}))
    out = Path(reports) / suite.name
    write_reports(tables, out, source=str(root))
    write_reports(SuiteTables.of(suite, [p.name for p in planned], manifests, tables.analysis.runs, command,
                                 rewritten_by), out)
    return SuiteResult(suite, planned, manifests, tables, out, elapsed_s, ran or [])


def recorded_device(traces: Path | str, suite: Suite) -> str | None:
    """The default device of the machine that ran the suite's cells, from their run.json
    files: "cuda" if it had a CUDA driver, else "cpu"; None before any cell ran."""
    found = None
    for path in sorted(suite_traces(traces, suite).glob("**/run.json")):
        env = (Manifest.read(path) or Manifest()).environment
        if env:
            if env.get("cuda_driver"):
                return "cuda"
            found = "cpu"
    return found


def report_only(suites: list[Suite], traces: Path | str = "traces", reports: Path | str = "reports",
                command: str = "") -> list[SuiteResult]:
    """Write each suite's report from the runs already under ``traces``; run nothing.

    For results copied from another machine (the GPU box's suite folder on a
    laptop) or re-analyzed after a change: cells are named as on the machine
    that ran them (:func:`recorded_device`), and a cell without a run.json is
    "not run" in the report.
    """
    results = []
    for suite in suites:
        planned = plan(suite, traces, device=recorded_device(traces, suite))
        root = suite_traces(traces, suite)
        manifests = {p.name: m for p in planned if (m := Manifest.read(root / p.name))}
        results.append(write_suite_report(suite, planned, manifests, traces, reports, rewritten_by=command))
    return results


def grid_table(suite: Suite, planned: list[Planned]) -> Table:
    """The grid as a rich table (``--dry-run``): each cell's run name, settings and state."""
    table = Table(title=f"{suite.name}: {len(planned)} cells", show_lines=False)
    for h in ("#", "run", "settings", "state"):
        table.add_column(h, overflow="fold")
    for i, p in enumerate(planned, 1):
        settings = ", ".join(f"{k}={v}" for k, v in p.cell.settings if k not in ("model", "mode"))
        state = ("not selected" if not p.selected else f"cannot run here: {p.problem}" if p.problem
                 else "done (kept)" if p.done else "to run")
        table.add_row(str(i), p.name, settings, state)
    return table


def _set_parent_death_signal(parent: int) -> None:
    """Die with the bench: ask Linux to SIGKILL this process when its parent exits
    (prctl PR_SET_PDEATHSIG), so a killed bench leaves no cell running behind it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _cell_main(argv: list[str] | None = None) -> int:
    """Entry point of a cell's process: run one spec given as JSON; exit 0 if ok, 1 if not, 2 on bad input."""
    from tracekit import runner

    parser = argparse.ArgumentParser(prog="python -m tracekit.bench")
    parser.add_argument("--cell", required=True, help="the RunSpec as JSON")
    parser.add_argument("--out", required=True, help="traces root of the suite")
    parser.add_argument("--parent", type=int, default=None, help="pid of the bench, to die with it")
    args = parser.parse_args(argv)
    if args.parent is not None:
        _set_parent_death_signal(args.parent)
    try:
        manifest = runner.run(RunSpec(**json.loads(args.cell)), args.out)
    except (models.UnknownModel, backends.UnknownMode, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if manifest.status == "ok" else 1


if __name__ == "__main__":
    sys.exit(_cell_main())

"""Running a suite's planned cells one after another with a progress bar (rich): the
cell, its stage and the time left; Ctrl-C (the CLI takes SIGTERM as one) stops it, keeping every
finished cell."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from tracekit.bench.cells import run_cell, write_status
from tracekit.bench.plan import Planned, suite_traces
from tracekit.errors import Interrupted
from tracekit.manifest import Manifest
from tracekit.manifest.suite_toml import Suite


def _kind(p: Planned) -> tuple:
    """A cell's settings but its model: in a grid of growing models, the cell of the same kind
    run last (same mode, phase, dtype...) is the best guess of how long this one takes."""
    return tuple((k, str(v)) for k, v in p.cell.settings if k != "model")


def _no_time(left_s: float, expected_s: float | None) -> str | None:
    """Why a cell is not started with ``left_s`` seconds of the suite's time left, or None: the time is
    out, or less is left than the last cell of its kind took (it would be stopped unfinished: its time
    is better spent on shorter cells, and it runs on the next call)."""
    if left_s <= 0:
        return "time limit: the suite's time ran out before this cell started"
    if expected_s is not None and expected_s > left_s:
        return (f"time limit: {left_s:.0f} s of the suite's time left, less than the {expected_s:.0f} s "
                "the last cell of its kind took")
    return None


def _outcome(manifest: Manifest) -> str:
    if manifest.status == "ok":
        return f"ok  p50 {manifest.latency('median'):.3f} ms, first call {manifest.compile_s or 0:.1f} s"
    return f"{manifest.status or '?'}: {str(manifest.reason or '')[:200]}"


def run_planned(suite: Suite, planned: list[Planned], traces: Path | str, timeout_s: float | None = None,
                deadline: float | None = None, console: Console | None = None) -> tuple[dict[str, Manifest], list[str]]:
    """Run the cells of ``planned`` that are to run, with a progress bar; record the others' states.

    Cells that cannot run here, cells left when ``deadline`` passes, and cells not started
    because less time is left than the last cell of their kind took (:func:`_no_time`) get a
    "skipped" run.json with the reason. Returns (run name ->
    manifest for every cell with a run.json, names of the cells run now).

    Raises:
        Interrupted: Ctrl-C (or SIGTERM, as the CLI takes it); every cell finished before it is kept.
    """
    root = suite_traces(traces, suite)
    console = console or Console(stderr=True)
    manifests: dict[str, Manifest] = {}
    for p in planned:
        if p.selected and p.problem is not None:
            manifests[p.name] = write_status(root / p.name, p, "skipped", p.problem)
    todo = [p for p in planned if p.to_run]
    ran: list[str] = []
    columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[limit]}")]
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(suite.name, total=len(todo), limit="")

        def show(p: Planned, stage: str = "") -> None:
            limit = "" if deadline is None else f"(time limit in {max(0, deadline - time.monotonic()) / 60:.1f} min)"
            progress.update(task, description=escape(f"{suite.name}: {p.name}" + (f" · {stage}" if stage else "")),
                            limit=limit)

        current = ""
        took: dict[tuple, float] = {}  # _kind(cell) -> seconds the last such cell took in this run
        try:
            for p in todo:
                if deadline is not None and (why := _no_time(deadline - time.monotonic(), took.get(_kind(p)))):
                    manifests[p.name] = write_status(root / p.name, p, "skipped", why)
                    progress.advance(task)
                    continue
                current = p.name
                show(p)
                t0 = time.monotonic()
                manifests[p.name] = run_cell(p, root, timeout_s, deadline, on_stage=lambda stage, p=p: show(p, stage))
                took[_kind(p)] = time.monotonic() - t0
                ran.append(p.name)
                progress.console.print(f"  {p.name}: {_outcome(manifests[p.name])} ({took[_kind(p)]:.0f} s)",
                                       highlight=False, markup=False)
                progress.advance(task)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted during {current or suite.name}; the {len(ran)} cells finished in this "
                              "run are kept: run the same command again to go on") from None
    for p in planned:
        if p.name not in manifests and (manifest := Manifest.read(root / p.name)):
            manifests[p.name] = manifest
    return manifests, ran

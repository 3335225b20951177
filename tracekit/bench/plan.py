"""Planning a suite: each cell's run name, recorded spec, whether it can run here, and
whether it is done (a final run.json for the very same spec), with no process started."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import torch
from rich.table import Table

from tracekit import backends
from tracekit.capture.environment import default_device
from tracekit.capture.resolved import resolve
from tracekit.manifest import Manifest
from tracekit.manifest.spec import RunSpec, validate
from tracekit.manifest.suite_toml import SPEC_FIELDS, Cell, Suite, SuiteError

FINAL = ("ok", "oom", "failed", "timeout")  # statuses of a finished cell ("skipped" is not one)


@dataclass
class Planned:
    """One cell of a suite, as it stands before a run.

    name: the run's folder under the suite's traces, ``<label>/<mode>``.
    spec: what run.json records as ``spec``: the resolved RunSpec (for a cell with fields
        this RunSpec does not have, the fields it has).
    problem: why it cannot run here, or None.
    selected: matched by ``--only`` (every cell when no pattern is given).
    done: a final run.json for this spec exists (and ``--force`` was not given).
    """

    cell: Cell
    name: str
    spec: RunSpec
    problem: str | None
    selected: bool
    done: bool

    @property
    def to_run(self) -> bool:
        return self.selected and not self.done and self.problem is None


def suite_traces(traces: Path | str, suite: Suite) -> Path:
    """The folder a suite's runs go to: ``traces/<suite name>``."""
    return Path(traces) / suite.name


def _identify(cell: Cell, device: str) -> tuple[str, RunSpec, str | None]:
    """(run name, spec as recorded, problem or None) of a cell, without running it."""
    values = cell.values
    mode = str(values.get("mode", "eager"))
    try:
        spec = cell.spec()
    except SuiteError as exc:
        known = RunSpec(**{k: v for k, v in values.items() if k in SPEC_FIELDS})
        label = known.label(-1, device) + "".join(f"-{values[k]}" for k in cell.unknown)
        return f"{label}/{mode}", known, str(exc)
    try:
        validate(spec)
        run = resolve(spec, device)
    except ValueError as exc:  # an unknown model, a workload file that cannot be used, a bad seq or count
        return f"{spec.label(-1, device)}/{mode}", spec, str(exc)
    return run.directory(Path()).as_posix(), run.spec, _problem(run.spec) or run.family.missing


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
    seen: dict[str, RunSpec] = {}
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


def plan_all(suites: list[Suite], traces: Path | str, only: tuple[str, ...] = (),
             force: bool = False) -> list[list[Planned]]:
    """:func:`plan` of each suite, checking ``only``.

    Raises:
        SuiteError: a pattern of ``only`` that matches no cell of any suite (a typo would
            otherwise run nothing and write an empty report), or cells that collide.
    """
    plans = [plan(s, traces, only, force) for s in suites]
    names = [p.name for planned in plans for p in planned]
    for pattern in only:
        if not any(fnmatch(name, pattern) for name in names):
            shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
            raise SuiteError(f"--only {pattern!r} matches no cell of {', '.join(s.name for s in suites)} "
                             f"(its cells: {shown})")
    return plans


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

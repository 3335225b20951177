"""Experiment definitions: a TOML file in workloads/ that expands to a grid of cells.

Format::

    name = "vit-study"
    description = "..."
    max_minutes = 2.5        # optional: time budget of the whole suite (cells past it are skipped)
    timeout_s = 300          # optional: limit of one cell
    variant_of = "lm"        # optional: this file trims the suite workloads/lm.toml (same folder),
    trimmed = "..."          # says what was left out and why, and checks lm's claims unless it has its own
    [defaults]               # any RunSpec field, applied to every cell
    iters = 50
    [[grid]]                 # each grid block: the product of its lists
    model = ["vit16x6x384", "vit32x12x768"]
    mode = ["eager", "default", "reduce-overhead"]
    batch = [8]
    [[claims]]               # optional: published claims the report checks
    text = "..."             # (see tracekit.analysis.comparison.suite_comparison)

Loading checks the file's structure only. Model and mode names, and keys that
are not (yet) fields of :class:`RunSpec`, are checked when the suite runs: such a
cell becomes a "skipped" row with the reason, so a suite can name a backend
or a field that this installation lacks. ``tracekit bench --set FIELD=VALUE`` sets a
field in every cell over the file's (:func:`load_suite`'s ``settings``).
"""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from tracekit.manifest.spec import RunSpec

SPEC_FIELDS = tuple(f.name for f in fields(RunSpec))
_SUITE_KEYS = {"name", "description", "max_minutes", "timeout_s", "variant_of", "trimmed", "defaults", "grid",
               "claims"}


class SuiteError(ValueError):
    """A suite file that cannot be read or is malformed."""


@dataclass(frozen=True)
class Cell:
    """One point of a suite's grid: its settings (RunSpec fields in their order, then any others)."""

    settings: tuple[tuple[str, object], ...]

    @property
    def values(self) -> dict:
        return dict(self.settings)

    @property
    def unknown(self) -> list[str]:
        """Settings that are not RunSpec fields in this installation."""
        return [k for k, _ in self.settings if k not in SPEC_FIELDS]

    def spec(self) -> RunSpec:
        """The RunSpec of this cell.

        Raises:
            SuiteError: a setting is not a RunSpec field here.
        """
        if self.unknown:
            raise SuiteError(f"unknown field(s) {', '.join(self.unknown)} (this tracekit's RunSpec fields: "
                             f"{', '.join(SPEC_FIELDS)})")
        return RunSpec(**self.values)


def _field_order(item: tuple[str, object]) -> tuple[int, str]:
    key = item[0]
    return (SPEC_FIELDS.index(key), key) if key in SPEC_FIELDS else (len(SPEC_FIELDS), key)


@dataclass
class Suite:
    name: str
    description: str
    cells: list[Cell]
    path: Path | None = None
    max_minutes: float | None = None
    timeout_s: float | None = None
    variant_of: str | None = None
    trimmed: str = ""
    claims: list[dict] = field(default_factory=list)
    variant_cells: int | None = None  # the cells of the suite this one trims (None: unknown or unreadable)


def parse_setting(text: str) -> tuple[str, object]:
    """``FIELD=VALUE`` (``tracekit bench --set``) as (field, value): the value read as a TOML
    value (``nproc=4`` an integer, ``parallel="fsdp"`` a string), else as the string written
    (``parallel=fsdp``).

    Raises:
        SuiteError: no ``=``, or a field that is not a :class:`RunSpec` field.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or key not in SPEC_FIELDS:
        raise SuiteError(f"--set {text!r}: give FIELD=VALUE with a RunSpec field ({', '.join(SPEC_FIELDS)})")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key, value


def load_suite(path: Path | str, settings: dict | None = None) -> Suite:
    """Read a suite file and expand its grid, in file order, without duplicates; ``settings``
    (field -> value, ``tracekit bench --set``) override the file's in every cell (``nproc=4``: the
    same grid on 4 ranks).

    Raises:
        SuiteError: unreadable TOML, an unknown top-level key, no [[grid]], a
            cell without ``model``, or a setting whose value is not a scalar or list.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read suite ({exc})") from None
    if unknown := set(data) - _SUITE_KEYS:
        raise SuiteError(f"{path}: unknown top-level keys {sorted(unknown)}; valid: {sorted(_SUITE_KEYS)}")
    defaults = data.get("defaults", {})
    grids = data.get("grid", [])
    if not grids:
        raise SuiteError(f"{path}: no [[grid]] blocks")
    cells: list[Cell] = []
    for block in grids:
        merged = {**defaults, **block, **(settings or {})}
        if "model" not in merged:
            raise SuiteError(f"{path}: a [[grid]] block without model")
        if bad := [k for k, v in merged.items() if isinstance(v, dict)]:
            raise SuiteError(f"{path}: {bad} must be a value or a list of values")
        values = [v if isinstance(v, list) else [v] for v in merged.values()]
        for combo in itertools.product(*values):
            cell = Cell(tuple(sorted(zip(merged, combo), key=_field_order)))
            if cell not in cells:
                cells.append(cell)
    claims, full = data.get("claims"), None
    if data.get("variant_of"):
        try:
            full = load_suite(path.parent / f"{data['variant_of']}.toml")
        except SuiteError:
            if claims is None:  # a variant tests the full suite's claims: they must be readable
                raise
        claims = full.claims if claims is None else claims
    return Suite(name=data.get("name", path.stem), description=data.get("description", ""), cells=cells,
                 path=path, max_minutes=data.get("max_minutes"), timeout_s=data.get("timeout_s"),
                 variant_of=data.get("variant_of"), trimmed=data.get("trimmed", ""), claims=claims or [],
                 variant_cells=len(full.cells) if full else None)

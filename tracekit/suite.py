"""Experiment definitions: a TOML file in workloads/ that expands to a grid of RunSpecs.

Format::

    name = "vit-study"
    description = "..."
    [defaults]            # any RunSpec field, applied to every cell
    iters = 50
    [[grid]]              # each grid block: the product of its lists
    model = ["vit16x6x384", "vit32x12x768"]
    mode = ["eager", "default", "reduce-overhead"]
    batch = [8]
"""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from tracekit.spec import RunSpec

_SPEC_FIELDS = {f.name for f in fields(RunSpec)}


class SuiteError(ValueError):
    """A suite file that cannot be read or names unknown fields."""


@dataclass
class Suite:
    name: str
    description: str
    cells: list[RunSpec]


def load_suite(path: Path | str) -> Suite:
    """Read a suite file and expand its grid, in file order, without duplicates.

    Raises:
        SuiteError: unreadable TOML, no [[grid]], or a key that is not a RunSpec field.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read suite ({exc})") from None
    defaults = data.get("defaults", {})
    grids = data.get("grid", [])
    if not grids:
        raise SuiteError(f"{path}: no [[grid]] blocks")
    cells: list[RunSpec] = []
    for block in grids:
        merged = {**defaults, **block}
        unknown = set(merged) - _SPEC_FIELDS
        if unknown:
            raise SuiteError(f"{path}: unknown keys {sorted(unknown)}; valid: {sorted(_SPEC_FIELDS)}")
        keys = list(merged)
        values = [v if isinstance(v, list) else [v] for v in merged.values()]
        for combo in itertools.product(*values):
            spec = RunSpec(**dict(zip(keys, combo)))
            if spec not in cells:
                cells.append(spec)
    return Suite(name=data.get("name", path.stem), description=data.get("description", ""), cells=cells)

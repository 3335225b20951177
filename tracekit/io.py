"""Atomic file output (a crash never leaves a half-written file over a good one), and tables
made JSON-ready."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is not imported at start-up
    import pandas as pd


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path | str, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename.

    The file gets the permissions ``open(path, "w")`` would give it: an existing
    file's mode is kept, a new file gets 0666 less the umask (mkstemp's own
    temporary file is 0600, which would hide reports from the rest of a team).
    """
    import tempfile  # here, not at start-up

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        permissions = path.stat().st_mode & 0o7777
    except OSError:
        permissions = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, permissions)
        with os.fdopen(fd, mode) as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def records(df: pd.DataFrame) -> list[dict]:
    """``df.to_dict("records")`` (one dict per row, column -> Python value), made a column at a
    time: pandas 3 builds it from one ``iloc`` per column and boxes each value again, 45 ms of the
    `tracekit analyze --json` of a 100 MB trace, most of it on the 150 columns of the runs table."""
    columns = list(df.columns)
    if not columns:
        return [{} for _ in range(len(df))]  # pandas 2 gives [] here, pandas 3 one {} a row
    if not df.columns.is_unique:
        return df.to_dict("records")
    return [dict(zip(columns, row)) for row in zip(*(df[c].tolist() for c in columns))]


def jsonable(value):
    """NaN/inf become null so the JSON is standard (browsers and jq reject NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return jsonable(value.item())
    return value


def write_json(path: Path | str, data) -> Path:
    """Write ``data`` as indented standard JSON (NaN -> null), atomically."""
    return write_atomic(path, json.dumps(jsonable(data), indent=1, default=str) + "\n")

"""Parse Nsight Compute's CSV output into one row per profiled kernel (no torch).

``ncu --csv --page raw`` writes a header row (identity columns such as "ID",
"Kernel Name", "Stream", "Block Size", "Grid Size", "Device", "CC", then one
column per metric), a row of units (empty under the identity columns), then
one row per profiled kernel launch, in launch order. Lines of the tool's own
log (``==PROF==``, ``==WARNING==``) may come before and after. Values may carry
thousands separators ("1,073,741,824") and "n/a". The details page
(``--page details``: one row per metric, "Metric Name", "Metric Unit",
"Metric Value") is read too. Reference: Nsight Compute CLI documentation,
"Output options" (--csv, --page, --print-units).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pandas as pd

IDENTITY = {"ID": "id", "Process ID": "pid", "Process Name": "process", "Kernel Name": "kernel",
            "Context": "context", "Stream": "stream", "Block Size": "block", "Grid Size": "grid",
            "Device": "device", "CC": "cc"}
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME_NS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "ns": 1.0, "us": 1e3, "ms": 1e6,
            "s": 1e9}


class CountersError(ValueError):
    """An ncu output that cannot be read; the message says why in one line."""


def to_base(unit: str) -> tuple[str, float]:
    """The base unit of an ncu unit and the factor to it: times to ns, ``Mbyte`` to byte (1e6), ...

    Units not listed (``%``, ``inst`` without prefix, ...) are kept with factor 1.
    """
    unit = unit.strip()
    if unit in _TIME_NS:
        return "ns", _TIME_NS[unit]
    for base in ("byte", "inst", "cycle"):
        if unit.endswith(base) and unit[: -len(base)] in _PREFIX:
            return base, _PREFIX[unit[: -len(base)]]
    return unit, 1.0


def _column(texts: list[str], factor: float) -> list:
    """A metric's values as floats in base units; n/a and empty as NaN. A column with
    other text (``device__attribute_display_name``, ``launch__kernel_name``) stays text."""
    out = []
    for text in texts:
        text = (text or "").strip()
        if not text or text.lower() in ("n/a", "nan"):
            out.append(math.nan)
            continue
        try:
            out.append(float(text.replace(",", "")) * factor)
        except ValueError:
            return [(t or "").strip() for t in texts]
    return out


def _csv_lines(text: str) -> list[str]:
    """The CSV block: from the header row on, without the tool's ``==...==`` log lines."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise CountersError("no ncu CSV header (a line starting with \"ID\") found: was it written by "
                            "ncu --csv --page raw?")
    return [line for line in lines[start:] if line.startswith('"')]


def _details_to_raw(rows: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """Details-page rows (one per metric) to raw-page rows (one per kernel) and units."""
    kernels: dict[str, dict] = {}
    units: dict[str, str] = {}
    for r in rows:
        k = kernels.setdefault(r["ID"], {c: r.get(c, "") for c in IDENTITY})
        k[r["Metric Name"]] = r["Metric Value"]
        units[r["Metric Name"]] = r.get("Metric Unit", "")
    return list(kernels.values()), units


def parse_text(text: str) -> pd.DataFrame:
    """Parse ncu CSV text (raw or details page) into a DataFrame, one row per profiled kernel.

    Returns:
        Columns ``id`` (ncu's launch index, int), ``kernel`` (name), ``stream``,
        ``device``, ``cc``, ``block``, ``grid`` (as ncu writes them, where
        present), then one float column per metric in base units: ns for times,
        bytes for sizes, plain counts (text metrics such as the device's name
        stay text). ``df.attrs["units"]`` maps each metric to
        its base unit. Rows sorted by ``id``.

    Raises:
        CountersError: no ncu CSV header, or no kernel rows.
    """
    rows = list(csv.DictReader(io.StringIO("\n".join(_csv_lines(text)))))
    if rows and "Metric Name" in rows[0]:
        rows, units = _details_to_raw(rows)
    else:
        # The units row has an empty ID; repeated header rows (one per profiled process) have "ID".
        units = next(({k: v for k, v in r.items() if k and "__" in k} for r in rows
                      if not (r.get("ID") or "").strip()), {})
        rows = [r for r in rows if (r.get("ID") or "").strip().isdigit()]
    if not rows:
        raise CountersError("ncu CSV holds no profiled kernels (did the NVTX filter or --launch-count "
                            "select none?)")
    metrics = [c for c in rows[0] if c and "__" in c]
    out = pd.DataFrame({IDENTITY[c]: [r.get(c, "") for r in rows] for c in IDENTITY if c in rows[0]})
    out["id"] = out["id"].astype(int)
    for col in ("stream", "device", "pid", "context"):
        if col in out:
            out[col] = pd.to_numeric(out[col], errors="coerce")
    scales = {m: to_base(units.get(m, "")) for m in metrics}
    values = pd.DataFrame({m: _column([r.get(m, "") for r in rows], scales[m][1]) for m in metrics},
                          index=out.index)
    out = pd.concat([out, values], axis=1).sort_values("id", kind="stable").reset_index(drop=True)
    base_units = {m: base for m, (base, _) in scales.items()}
    out.attrs["units"] = base_units
    return out


def parse(path: Path | str) -> pd.DataFrame:
    """Parse an ncu CSV file (see :func:`parse_text`).

    Raises:
        CountersError: the file is missing or unreadable, or holds no ncu CSV.
    """
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise CountersError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return parse_text(text)
    except CountersError as exc:
        raise CountersError(f"{path}: {exc}") from None

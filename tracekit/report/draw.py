"""How a table is drawn from its spec (:mod:`tracekit.report.column_specs`: a list of
(column, header, format)): its headers and formatted cells (:func:`headline`), which the
terminal fits to its width (:mod:`tracekit.report.fit`) and the files write as markdown
(:func:`markdown_table`) or HTML."""

from __future__ import annotations

import math

import pandas as pd

from tracekit.io import records
from tracekit.report.column_specs import GPU_ONLY, HEADLINE


def _fmt(value, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if fmt == "ms":
        return f"{value / 1e3:.2f}"
    if fmt == "ms3":
        return f"{value / 1e3:.3f}"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def headline(runs: pd.DataFrame, spec: list[tuple[str, str, str]] = HEADLINE) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted cells of a table of ``runs`` (``spec``: one of tracekit.report.column_specs).

    Columns missing from ``runs`` or empty in every row are left out. In a row
    without GPU activity (``has_gpu`` False), ``GPU_ONLY`` figures read "n/a".
    """
    cols = [(c, h, f) for c, h, f in spec if c in runs.columns]
    rows = [[("n/a" if c in GPU_ONLY and r.get("has_gpu") is False else _fmt(r.get(c), f)) for c, _, f in cols]
            for r in records(runs)]
    keep = [i for i in range(len(cols)) if any(row[i] != "-" for row in rows)]
    return [cols[i][1] for i in keep], [[row[i] for i in keep] for row in rows]


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub markdown table (``|`` in cells escaped)."""
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)

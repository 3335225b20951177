"""String columns as integer codes into their few distinct values (pandas ``Categorical``).

Attribution's module, op, kernel and rule repeat a handful of strings over every GPU op
of a trace (350,000 rows at 1 GB of trace). As codes they are made, copied, changed and
grouped without hashing or checking one Python string per row; only the distinct values
are looked at. A missing value (None) has the code -1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _lookup(values) -> tuple[np.ndarray, pd.Index]:
    """(code of each of ``values`` in the distinct values, the distinct values in first-seen
    order); None gets -1, and so does an index of -1 into the codes (their last entry)."""
    codes, distinct = pd.factorize(pd.Index(values, dtype=object), use_na_sentinel=True)
    return np.append(codes, -1).astype(np.int32), pd.Index(distinct, dtype=object)


def _make(codes: np.ndarray, categories: pd.Index) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=categories, validate=False)


def constant(n: int, value: str | None) -> pd.Categorical:
    """``n`` times ``value`` (None: missing)."""
    if value is None:
        return _make(np.full(n, -1, dtype=np.int8), pd.Index([], dtype=object))
    return _make(np.zeros(n, dtype=np.int8), pd.Index([value], dtype=object))


def remap(codes: np.ndarray, values, default: str | None = None) -> pd.Categorical:
    """``values[codes]``, and ``default`` where a code is -1 (``values``: a short list or object
    array that may repeat a value or hold None, a missing value)."""
    inverse, distinct = _lookup([*values, default])
    return _make(inverse[:-1][codes], distinct)


def per_value(column: pd.Series | pd.Categorical, fn) -> pd.Categorical:
    """``fn(value)`` for each row of ``column``, computed once per distinct value (a categorical
    ``column``, as the reader's names are, is not hashed row by row)."""
    codes, distinct = pd.factorize(column)
    return remap(codes, [fn(v) for v in distinct])


def take(column: pd.Categorical, rows: np.ndarray, default: str | None) -> pd.Categorical:
    """``column[rows]``, and ``default`` where ``rows`` is -1."""
    column = _with(column, [default])
    fill = -1 if default is None else column.categories.get_loc(default)
    codes = np.where(rows >= 0, column.codes[np.maximum(rows, 0)], fill) if len(column) else np.full(len(rows), fill)
    return _make(codes.astype(column.codes.dtype, copy=False), column.categories)


def assign(column: pd.Categorical, at: np.ndarray, values) -> pd.Categorical:
    """``column`` with ``values`` put at ``at`` (a mask or positions): one value, a list or
    array (None: missing), or a Categorical; new values become categories."""
    if isinstance(values, pd.Categorical):
        column = _with(column, list(values.categories))
        new = np.append(column.categories.get_indexer(values.categories), -1)[values.codes]
    else:
        values = [values] if values is None or isinstance(values, str) else values
        inverse, distinct = _lookup(values)
        column = _with(column, list(distinct))
        new = np.append(column.categories.get_indexer(distinct), -1)[inverse[:-1]]
        new = new[0] if len(new) == 1 else new
    codes = column.codes.copy()
    codes[at] = new
    return _make(codes, column.categories)


def _with(column: pd.Categorical, values: list) -> pd.Categorical:
    """``column`` with ``values`` (None left out) among its categories, codes widened as needed."""
    new = [v for v in dict.fromkeys(values) if v is not None and v not in column.categories]
    if not new:
        return column
    categories = column.categories.append(pd.Index(new, dtype=object))
    dtype = np.min_scalar_type(-len(categories)) if len(categories) < 2**31 else np.int64
    return _make(column.codes.astype(dtype), categories)

"""Kineto's values -> numpy, leniently: numbers that may be strings ("0x1f", "12") or
missing, and string columns as codes plus their distinct values (:class:`Strings`).

Used by the reader's workers (:mod:`tracekit.trace.event_columns`): numpy only, no pandas.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count

import numpy as np


@dataclass
class Strings:
    """A string column of a chunk: ``values[codes]`` (codes int32, values the distinct strings)."""

    codes: np.ndarray
    values: list[str]


def factorize(values: list) -> tuple[np.ndarray, list]:
    """(codes, distinct values in first-seen order): ``distinct[codes] == values``; one hash per value."""
    first: dict = {}
    seen = np.fromiter(map(first.setdefault, values, count()), np.int64, len(values))  # index of first sighting
    dense = np.empty(len(values) + 1, dtype=np.int32)
    dense[np.fromiter(first.values(), np.int64, len(first))] = np.arange(len(first), dtype=np.int32)
    return dense[seen], list(first)


def strings(values: list) -> Strings:
    """A column of str; other values (int pids) are str()-ed once per distinct value."""
    codes, distinct = factorize(values)
    return Strings(codes, [v if isinstance(v, str) else str(v) for v in distinct])


def _num(value) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return np.nan
    return np.nan


def _int(value) -> float:
    if isinstance(value, str):
        try:
            return float(int(value, 0))  # ROCm writes "0x0"
        except ValueError:
            return np.nan
    return _num(value)


def floats(values: list) -> np.ndarray:
    """float64 array; None and non-numeric values become NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_num(v) for v in values], dtype=np.float64)


def ints(values: list, default: int = -1) -> np.ndarray:
    """int64 array; None, unparsable values and values past int64's range become ``default``;
    "0x1f" parses."""
    try:
        a = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        a = np.array([_int(v) for v in values], dtype=np.float64)
    a[~(np.abs(a) < 2.0 ** 63)] = default   # NaN, inf, and 1e300 (not an id: int64 would wrap it)
    return a.astype(np.int64)


def pick(items: list, rows: np.ndarray) -> list:
    """``items[rows]`` for a list (``items`` itself when every row is taken)."""
    return items if len(rows) == len(items) else list(map(items.__getitem__, rows.tolist()))

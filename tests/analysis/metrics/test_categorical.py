"""String columns as codes (tracekit.analysis.metrics.categorical): the same values as the object arrays they replace."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.metrics import categorical


def _values(column: pd.Categorical) -> list:
    return [None if pd.isna(v) else v for v in column.astype(object)]


def test_remap_takes_values_by_code_with_repeats_none_and_a_default():
    column = categorical.remap(np.array([0, 2, -1, 1, 2]), ["a", None, "a"], default="x")
    assert _values(column) == ["a", "a", "x", None, "a"]
    assert list(column.categories) == ["a", "x"]   # each distinct value once
    assert _values(categorical.remap(np.array([-1, 0]), ["b"])) == [None, "b"]


def test_per_value_calls_the_function_once_per_distinct_value():
    seen = []

    def upper(v):
        seen.append(v)
        return v.upper()
    names = pd.Series(pd.Categorical(["k1", "k2", "k1", None, "k1"]))
    assert _values(categorical.per_value(names, upper)) == ["K1", "K2", "K1", None, "K1"]
    assert sorted(seen) == ["k1", "k2"]


def test_take_and_constant():
    column = pd.Categorical(["m", None, "n"])
    assert _values(categorical.take(column, np.array([2, -1, 0, 1]), "d")) == ["n", "d", "m", None]
    assert _values(categorical.take(column, np.array([-1, 0]), None)) == [None, "m"]
    assert _values(categorical.take(categorical.constant(0, None), np.array([-1, -1]), "d")) == ["d", "d"]
    assert _values(categorical.constant(3, "c")) == ["c"] * 3 and _values(categorical.constant(2, None)) == [None, None]


def test_assign_adds_new_values_as_categories():
    column = categorical.constant(5, "a")
    column = categorical.assign(column, np.array([True, False, True, False, False]), "b")
    column = categorical.assign(column, np.array([3, 4]), ["c", None])
    assert _values(column) == ["b", "a", "b", "c", None]
    other = pd.Categorical(["z", "a"])
    assert _values(categorical.assign(column, np.array([0, 1]), other)) == ["z", "a", "b", "c", None]
    many = categorical.assign(categorical.constant(300, "a"), np.arange(300), [f"v{i}" for i in range(300)])
    assert _values(many)[-1] == "v299" and many.codes.dtype == np.int16   # codes widened past 127 values

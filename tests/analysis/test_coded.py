"""String columns as codes (tracekit.analysis.coded): the same values as the object arrays they replace."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis import coded


def _values(column: pd.Categorical) -> list:
    return [None if pd.isna(v) else v for v in column.astype(object)]


def test_remap_takes_values_by_code_with_repeats_none_and_a_default():
    column = coded.remap(np.array([0, 2, -1, 1, 2]), ["a", None, "a"], default="x")
    assert _values(column) == ["a", "a", "x", None, "a"]
    assert list(column.categories) == ["a", "x"]   # each distinct value once
    assert _values(coded.remap(np.array([-1, 0]), ["b"])) == [None, "b"]


def test_per_value_calls_the_function_once_per_distinct_value():
    seen = []

    def upper(v):
        seen.append(v)
        return v.upper()
    names = pd.Series(pd.Categorical(["k1", "k2", "k1", None, "k1"]))
    assert _values(coded.per_value(names, upper)) == ["K1", "K2", "K1", None, "K1"]
    assert sorted(seen) == ["k1", "k2"]


def test_take_and_constant():
    column = pd.Categorical(["m", None, "n"])
    assert _values(coded.take(column, np.array([2, -1, 0, 1]), "d")) == ["n", "d", "m", None]
    assert _values(coded.take(column, np.array([-1, 0]), None)) == [None, "m"]
    assert _values(coded.take(coded.constant(0, None), np.array([-1, -1]), "d")) == ["d", "d"]
    assert _values(coded.constant(3, "c")) == ["c"] * 3 and _values(coded.constant(2, None)) == [None, None]


def test_assign_adds_new_values_as_categories():
    column = coded.constant(5, "a")
    column = coded.assign(column, np.array([True, False, True, False, False]), "b")
    column = coded.assign(column, np.array([3, 4]), ["c", None])
    assert _values(column) == ["b", "a", "b", "c", None]
    other = pd.Categorical(["z", "a"])
    assert _values(coded.assign(column, np.array([0, 1]), other)) == ["z", "a", "b", "c", None]
    many = coded.assign(coded.constant(300, "a"), np.arange(300), [f"v{i}" for i in range(300)])
    assert _values(many)[-1] == "v299" and many.codes.dtype == np.int16   # codes widened past 127 values

"""tracekit.io: tables made JSON-ready."""

import math

import numpy as np
import pandas as pd
import pytest
from owndata import h100_trace

from tracekit.analysis.trace_analysis import analyze_trace
from tracekit.io import records
from tracekit.trace.reader import load


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert list(x) == list(y)
        for k in x:
            u, v = x[k], y[k]
            assert type(u) is type(v), (k, type(u), type(v))
            assert u == v or (isinstance(u, float) and math.isnan(u) and math.isnan(v)), k


def test_records_are_to_dict_records():
    """Every dtype the analyses' tables hold gives the Python values pandas' to_dict("records") gives."""
    df = pd.DataFrame({"f": [1.5, np.nan, 3.0], "i": np.array([1, 2, 3], dtype=np.int64), "b": [True, False, True],
                       "c": pd.Categorical(["x", "y", "x"]), "s": ["a", None, "c"], "o": [{"k": 1}, None, (2, 3)],
                       "i8": np.array([1, -1, 7], dtype=np.int8)})
    _same(records(df), df.to_dict("records"))
    assert records(df.iloc[:0]) == [] and records(pd.DataFrame(index=range(2))) == [{}, {}]
    twice = pd.DataFrame([[1, 2]], columns=["a", "a"])
    with pytest.warns(UserWarning, match="not unique"):  # pandas' own answer, warning included
        assert records(twice) == [{"a": 2}]


def test_records_of_a_real_analysis():
    result = analyze_trace(load(h100_trace("vit16x6x384/eager")))
    for name, table in result.tables.items():
        _same(records(table), table.to_dict("records"))

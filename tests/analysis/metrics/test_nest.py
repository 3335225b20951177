"""CPU ops as nested ranges (tracekit.analysis.metrics.nest)."""

import numpy as np
import pandas as pd

from tracekit.analysis.metrics.nest import Nest


def test_innermost_and_ancestors():
    # thread 1: a [0,100) > b [10,40) > c [20,30); a > d [50,60). thread 2: e [0,100)
    cpu = pd.DataFrame({"name": list("abcde"), "pid": "1", "tid": ["1", "1", "1", "1", "2"],
                        "ts": [0.0, 10, 20, 50, 0], "dur": [100.0, 30, 10, 10, 100], "depth": [0, 1, 2, 1, 0]})
    cpu["end"] = cpu["ts"] + cpu["dur"]
    points = pd.DataFrame({"pid": "1", "tid": ["1", "1", "1", "1", "2", "1"], "ts": [25.0, 35, 45, 55, 5, 150]})
    nest = Nest(cpu)
    inner = nest.innermost(nest.threads_of(points), points["ts"].to_numpy())
    assert [nest.names[i] if i >= 0 else None for i in inner] == ["c", "b", "a", "d", "e", None]
    is_b = np.array([n == "b" for n in nest.names])
    assert [nest.names[i] if i >= 0 else None for i in nest.ancestor(inner, is_b)] == ["b", "b", None, None, None, None]

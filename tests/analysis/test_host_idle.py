"""Idle host time (tracekit.analysis.critical_path.host_idle): the op-free stretches of an iteration, which
the calibration and --host-faster do not scale, on a hand-made trace of known answer."""

import numpy as np
import pandas as pd
import pytest
from tracebuilder import TraceBuilder

from tracekit.analysis.critical_path.graph import build
from tracekit.analysis.critical_path.host_idle import IDLE_MIN_US, idle_us
from tracekit.analysis.critical_path.kinds import CPU
from tracekit.analysis.critical_path.retime import weights
from tracekit.trace import load


def _trace(tmp_path):
    """Two iterations of 1000 µs. In each, calls at 10, 400 and 900 µs (4 µs each, an op around each);
    between the first two an op from 20 to 100 µs, then none to 398 (the next call's op): 298 µs op-free (a sleep);
    between the last two aten ops every 50 µs: no stretch long enough. Between the iterations 100 µs
    with no marker (the profiler's own step)."""
    t = TraceBuilder()
    for i, o in enumerate((0.0, 1100.0)):
        t.step(i + 1, o, 1000)
        for at in (10, 400, 900):
            t.cpu_op("aten::add", o + at - 2, 8)
            t.kernel("k", start=o + at + 5, dur=2, launch_at=o + at)
        t.cpu_op("aten::mm", o + 20, 80)
        for at in range(420, 900, 50):
            t.cpu_op("aten::relu", o + at, 30)
    return load(t.write(tmp_path / "idle.pt.trace.json.gz"))


def test_a_sleep_between_two_calls_is_idle_and_keeps_its_length_under_the_host_scale(tmp_path):
    g = build([(0, _trace(tmp_path))])
    cpu = g.edge_kind == CPU
    lags = sorted(zip(g.lag[cpu].tolist(), g.idle[cpu].tolist()))
    # per iteration: 10 -> 400 (386 µs of CPU time, 298 of them op-free), 400 -> 900 (496, none idle);
    # across the boundary 900 -> 1110 (206 µs: 6 in the window, 100 between the windows, 100 in the next)
    assert (386.0, 298.0) in lags and (496.0, 0.0) in lags and (206.0, 0.0) in lags
    assert g.idle.sum() == 2 * 298.0
    _, lag = weights(g, 0.5)
    assert sorted(lag[cpu & (g.idle > 0)].tolist()) == [298 + 88 * 0.5] * 2    # the sleep unscaled


def test_a_stretch_shorter_than_the_threshold_or_covered_by_an_op_is_not_idle():
    ops = pd.DataFrame({"cat": ["cpu_op", "user_annotation", "cpu_op"], "name": ["aten::mm", "range", "aten::mm"],
                        "pid": [1, 1, 1], "tid": [7, 7, 8], "ts": [0.0, 0.0, 0.0], "end": [50.0, 1000.0, 1000.0]})
    # thread 7: op-free from 50 (an annotation is not an op); thread 8: covered throughout
    got = idle_us(ops, np.array([1, 1, 1]), np.array([7, 7, 8]), np.array([50.0, 500.0, 100.0]),
                  np.array([50.0 + IDLE_MIN_US - 1, 900.0, 900.0]))
    assert got.tolist() == pytest.approx([0.0, 400.0, 0.0])

"""make bench-analyze's synthetic traces: copies of a real trace whose answers are known."""

import pytest

from owndata import h100_trace

from tracekit import loadbench
from tracekit.analysis.pertrace import analyze_trace
from tracekit.trace.reader import load


def test_synthetic_trace_is_copies_of_the_fixture_with_the_answers_scaled(tmp_path):
    fixture = h100_trace("vit16x6x384/eager")
    one = analyze_trace(load(fixture)).row
    info = loadbench.synthesize(fixture, 3 * 10**6, tmp_path / "synthetic.pt.trace.json")
    assert info["copies"] >= 2 and info["bytes"] >= 3 * 10**6
    row = analyze_trace(load(tmp_path / "synthetic.pt.trace.json")).row
    assert row["kernels"] == info["kernels"] == info["copies"] * one["kernels"]
    assert row["host_launches"] == info["copies"] * one["host_launches"]  # ids offset: no launch merged
    # The copies follow each other without overlap: GPU busy time adds up.
    assert row["gpu_busy_us"] == pytest.approx(info["copies"] * one["gpu_busy_us"], rel=1e-6)


def test_phases_time_the_calls_of_tracekit_analyze():
    ph = loadbench.phases(h100_trace("vit16x6x384/eager"))
    assert ph["workers"] == 1  # a 146 kB file (about 1.5 MB of JSON) is decoded in this process
    assert all(ph[k] > 0 for k in ("imports_s", "read_s", "analysis_s"))

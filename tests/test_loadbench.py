"""make bench-analyze (benchmarks/): its synthetic traces are copies of a real trace whose answers are known."""

import importlib.util
import sys
from pathlib import Path

import pytest
from owndata import h100_trace

from tracekit.analysis.trace_analysis import analyze_trace
from tracekit.trace.reader import load

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _module(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))


def test_synthetic_trace_is_copies_of_the_fixture_with_the_answers_scaled(tmp_path):
    fixture = h100_trace("vit16x6x384/eager")
    one = analyze_trace(load(fixture)).row
    info = _module("synthetic").synthesize(fixture, 3 * 10**6, tmp_path / "synthetic.pt.trace.json")
    assert info["copies"] >= 2 and info["bytes"] >= 3 * 10**6
    row = analyze_trace(load(tmp_path / "synthetic.pt.trace.json")).row
    assert row["kernels"] == info["kernels"] == info["copies"] * one["kernels"]
    assert row["host_launches"] == info["copies"] * one["host_launches"]  # ids offset: no launch merged
    # The copies follow each other without overlap: GPU busy time adds up.
    assert row["gpu_busy_us"] == pytest.approx(info["copies"] * one["gpu_busy_us"], rel=1e-6)


def test_phases_time_the_calls_of_tracekit_analyze():
    ph = _module("loadbench").phases(h100_trace("vit16x6x384/eager"), repeats=1)
    assert ph["workers"] == 1  # a 146 kB file (about 1.5 MB of JSON) is decoded in this process
    assert all(ph[k] > 0 for k in ("imports_s", "read_s", "analysis_s", "read_cpu_s"))
    assert ph["preloaded"] == []  # pandas and matplotlib are not imported before the trace is read


def test_the_probe_measures_a_process_tree():
    """A child holding 200 MB that forks a grandchild touching 100 MB more: the tree's PSS peak
    sees both (RSS sums count the pages they share twice), CPU time counts both processes."""
    code = ("import os, time; a = bytearray(200 << 20); a[::4096] = b'x' * len(a[::4096]);"
            "pid = os.fork();\n"
            "if pid == 0:\n b = bytearray(100 << 20); b[::4096] = b'y' * len(b[::4096]); time.sleep(0.5); os._exit(0)\n"
            "os.waitpid(pid, 0)")
    r = _module("loadbench").measure([sys.executable, "-c", code])
    assert r["rc"] == 0
    assert 300 < r["pss_MB"] < 420 and r["rss_MB"] >= r["pss_MB"]
    assert r["maxrss_MB"] >= 200 and r["cpu_s"] > 0


def test_times_come_from_a_run_without_the_memory_probe():
    """The probe's sampling costs CPU: a timed run has none (no memory figures), and
    timed_and_probed takes its times from such a run and its memory from a probed one."""
    lb = _module("loadbench")
    code = "a = bytearray(150 << 20); a[::4096] = b'x' * len(a[::4096]); import time; time.sleep(0.3)"
    timed = lb.measure([sys.executable, "-c", code], memory=False)
    assert timed["rc"] == 0 and timed["pss_MB"] == 0 and timed["wall_s"] >= 0.3
    both = lb.timed_and_probed([sys.executable, "-c", code])
    assert both["rc"] == both["probed_rc"] == 0 and both["wall_s"] >= 0.3
    assert 150 < both["pss_MB"] < 260 and both["maxrss_MB"] >= 150


def test_report_states_each_target_met_or_not():
    rep = _module("analyze_report")
    env = {"cores": 2, "startup_s": 0.12, "startup_imports": ""}
    rows = [{"size_MB": 1000.0, "MBps": 200.0, "cpu_s": 8.0, "analyze_s": 5.0, "hta_s": 100.0,
             "pss_over_size": 0.35, "pss_MB": 350.0},
            {"size_MB": 100.0, "MBps": 120.0, "cpu_s": 1.0, "analyze_s": 0.8}]
    lines = rep.verdicts(rows, env, None)
    assert "200 MB/s, **NOT met**" in lines[0]
    assert "20.0x, **NOT met**" in lines[1]
    assert "0.35x (350 MB PSS), met" in lines[2]
    assert "120 MB/s, met" in lines[3]
    assert "0.120 s, met" in lines[4]
    assert "not run here" in lines[5]


def test_report_sets_the_runs_of_the_earlier_commit_beside_these():
    """With BENCH_BEFORE, the earlier tracekit's end-to-end runs (interleaved with these) get their own
    table: its median, its runs, and how many times faster this one is."""
    rep = _module("analyze_report")
    env = {"cpu": "cpu", "cores": 2, "python": "3.11", "fixture": "f", "repeats": 3, "load_start": (0, 0, 0),
           "load_end": (0, 0, 0), "before": "/tmp/before-abc", "startup_s": 0.1, "startup_imports": ""}
    phases = {"workers": 2, "imports_s": 0.1, "read_s": 1.0, "read_cpu_s": 2.0, "analysis_s": 0.5,
              "analysis_cpu_s": 0.5}
    row = {"size_MB": 1000.0, "events": 10, "kernels": 1, "analyze_s": 4.0, "walls": [3.9, 4.0, 4.2],
           "MBps": 250.0, "cpu_s": 7.0, "pss_MB": 380.0, "pss_over_size": 0.38, "rss_MB": 390.0, "phases": phases,
           "before_s": 5.0, "before_walls": [4.8, 5.0, 5.5], "before_pss_MB": 390.0}
    text = rep.markdown([row], env, None)
    assert "`/tmp/before-abc`" in text
    assert "| 1000 | 5.00 | 4.80 5.00 5.50 | 4.00 | **1.25x** | 390 | 380 |" in text
    without = {k: v for k, v in row.items() if not k.startswith("before")}
    assert "End to end against the earlier commit" not in rep.markdown([without], env, None)

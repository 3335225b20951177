import gzip
import json

import pytest
from tracebuilder import TraceBuilder

from tracekit.analysis.metrics import transfers
from tracekit.analysis.runs import analyze
from tracekit.trace import load


def test_directions_bytes_and_bandwidth(tmp_path):
    t = TraceBuilder()
    t.step(1, 0, 100)
    t.memcpy(start=10, dur=20, nbytes=40_000, launch_at=5)                                # H2D, 2 GB/s
    t.memcpy(start=40, dur=10, nbytes=30_000_000, launch_at=35, kind="Memcpy DtoD (Device -> Device)")
    t.memset(start=60, dur=5, nbytes=1_000_000, launch_at=55)
    t.step(2, 100, 100)
    t.memcpy(start=110, dur=20, nbytes=20_000, launch_at=105)                             # H2D
    t.memcpy(start=150, dur=4, nbytes=8, launch_at=145, kind="Memcpy DtoH (Device -> Pinned)")
    t.kernel("k", start=170, dur=10, launch_at=165)
    tables = load(t.write(tmp_path / "t.json"))

    run = transfers.by_direction(tables, iterations=2).set_index("direction")
    assert sorted(run.index) == ["D2D", "D2H", "H2D", "memset"]
    assert run.loc["H2D", "count"] == 2 and run.loc["H2D", "bytes"] == 60_000
    assert run.loc["H2D", "dur_us"] == 40 and run.loc["H2D", "bw_GBps"] == pytest.approx(1.5)
    assert run.loc["D2D", "bw_GBps"] == pytest.approx(3000.0)   # 30 MB in 10 µs
    assert run.loc["memset", "bw_GBps"] == pytest.approx(200.0)
    assert run.loc["H2D", "bytes_per_iter"] == 30_000 and run.loc["D2H", "count_per_iter"] == 0.5

    it = transfers.per_iteration(tables).set_index(["step", "direction"])
    assert it.loc[(1, "H2D"), "bytes"] == 40_000 and it.loc[(1, "H2D"), "bw_GBps"] == pytest.approx(2.0)
    assert it.loc[(2, "H2D"), "bytes"] == 20_000 and it.loc[(2, "D2H"), "count"] == 1
    assert (1, "D2H") not in it.index and (2, "D2D") not in it.index


def test_no_transfers_no_markers(tmp_path):
    t = TraceBuilder()
    t.kernel("k", 0, 10, launch_at=-5)
    tables = load(t.write(tmp_path / "t.json"))
    assert transfers.by_direction(tables, 10).empty
    assert list(transfers.per_iteration(tables).columns) == ["step", "direction", "count", "bytes", "dur_us",
                                                             "bw_GBps"]
    t.memcpy(start=20, dur=5, launch_at=15)
    tables = load(t.write(tmp_path / "t.json"))
    assert transfers.per_iteration(tables).empty                      # no markers
    assert transfers.by_direction(tables, None)["bytes_per_iter"].isna().all()


def test_real_trace_matches_the_raw_events(fixtures):
    """HTA's sampled trace (A100, real Kineto output): our totals equal a direct sum over its events."""
    path = fixtures / "hta" / "trace_filter" / "sampled_rank-0.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    copies = [e for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    run = transfers.by_direction(load(path)).set_index("direction")
    for word, label in [("HtoD", "H2D"), ("DtoH", "D2H"), ("DtoD", "D2D"), ("Memset", "memset")]:
        mine = [e for e in copies if word in e["name"]]
        assert run.loc[label, "count"] == len(mine) > 0
        assert run.loc[label, "bytes"] == sum(e["args"]["bytes"] for e in mine)
        assert run.loc[label, "dur_us"] == pytest.approx(sum(e["dur"] for e in mine))


def test_wired_into_analyze(tmp_path):
    t = TraceBuilder()
    t.memcpy(start=10, dur=20, nbytes=40_000, launch_at=5)
    t.write(tmp_path / "x.pt.trace.json.gz")
    result = analyze(tmp_path)
    assert result.table("transfers").loc[0, "bytes"] == 40_000
    assert result.table("transfers").loc[0, "run"] == "x.pt.trace.json.gz"

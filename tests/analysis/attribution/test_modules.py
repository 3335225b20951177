"""Attribution tables (tracekit.analysis.attribution.modules): exact splits of busy time, idle time and launches."""

from __future__ import annotations

import numpy as np
import pytest

from tests.analysis.attribution.test_gpu_ops import KEY, PROVENANCE, eager_scopes, replayed
from tests.tracebuilder import TraceBuilder, add_cpu_range
from tracekit.analysis.attribution import modules
from tracekit.analysis.attribution.gpu_ops import UNATTRIBUTED
from tracekit.analysis.metrics import idle, summary
from tracekit.analysis.metrics.intervals import busy_shares
from tracekit.manifest import Attribution
from tracekit.report.module_text import module_ops_text
from tracekit.trace import load


def test_busy_shares_split_overlap_equally():
    # [0,10) and [5,15) on two streams: 5 µs alone each, 5 µs together (2.5 each); [20,21) alone.
    shares = busy_shares(np.array([0.0, 5.0, 20.0]), np.array([10.0, 15.0, 21.0]))
    assert shares.tolist() == pytest.approx([7.5, 7.5, 1.0])
    nested = busy_shares(np.array([0.0, 2.0, 2.0]), np.array([10.0, 4.0, 4.0]))   # 2 µs covered three times
    assert nested.tolist() == pytest.approx([8 + 2 / 3, 2 / 3, 2 / 3]) and nested.sum() == pytest.approx(10.0)


def _sums_match(tables, att):
    long = modules.long_table(att)
    row = summary.summarize(tables)
    assert long["busy_us"].sum() == pytest.approx(row["gpu_busy_us"], rel=1e-12)
    assert long["launches"].sum() == row["host_launches"]
    assert long["gpu_ops"].sum() == row["gpu_ops"] and long["kernels"].sum() == row["kernels"]
    br = idle.breakdown(idle.gaps(tables)).iloc[0]
    for c in idle.CAUSES:
        assert long[f"idle_{c}_us"].sum() == pytest.approx(br[f"idle_{c}_us"], rel=1e-12, abs=1e-9)
    return long


def test_eager_tables(tmp_path):
    tables = load(eager_scopes().write(tmp_path / "t.json"))
    att = modules.attributed_ops(tables)
    long = _sums_match(tables, att)
    gemm = att[att["kernel"] == "gemm"].iloc[0]
    # gemm [40,50) is the first op: no gap before it; gelu_kernel [51,54) waits 1 µs queued (launch latency)
    assert gemm["busy_us"] == 10 and gemm["idle_us"] == 0
    assert att.loc[att["kernel"] == "gelu_kernel", "idle_launch_latency_us"].item() == pytest.approx(1.0)
    by = modules.by_module(long, depth=3, iterations=1, host=modules.scope_times(tables)).set_index("module")
    assert by.loc["blocks.0.mlp", "busy_us"] == pytest.approx(15.0)     # gemm 10 + gelu 3 + add 2, depth 3
    assert by.loc["blocks.0.mlp", "kernels"] == 3 and by.loc["blocks.0.mlp", "launches"] == 3
    assert by.loc["blocks.0.mlp", "ops"] == (("addmm", 1), ("gelu", 1), ("add", 1))
    assert module_ops_text(by.loc["blocks.0.mlp", "ops"]) == "addmm, gelu, add"   # as runs.json shows it
    # host time in own scopes: mlp 60 - 25 - 10 = 25 (+ its submodules at depth 3: 25 + 10); root 90 - 60
    assert by.loc["blocks.0.mlp", "host_us"] == pytest.approx(60.0)
    assert by.loc["", "host_us"] == pytest.approx(30.0)
    assert by.loc[UNATTRIBUTED, "kernels"] == 3
    deeper = modules.by_module(long, depth=4, iterations=1).set_index("module")
    assert deeper.loc["blocks.0.mlp.0", "ops"] == (("addmm", 1),)
    assert modules.coverage(long) == pytest.approx(15 / long["busy_us"].sum())


def test_graph_launch_counts_once_for_the_common_module(tmp_path):
    tables = load(replayed().write(tmp_path / "t.json"))
    capture = [["blocks.0.mlp", "addmm+gelu", "x"], ["blocks.0.mlp.2", "addmm", "x"], ["blocks.0.mlp.2", "addmm", "x"],
               ["blocks.1.mlp", "addmm+gelu", "x"], ["blocks.1.mlp.2", "addmm", "x"], ["blocks.1.mlp.2", "addmm", "x"]]
    att = modules.attributed_ops(tables, Attribution.of({**PROVENANCE, "captures": [{"graph": KEY, "launches": capture}]}))
    long = _sums_match(tables, att)
    launch_rows = long[long["launches"] > 0]
    # blocks.0.* and blocks.1.*: the graph's one launch belongs to "blocks", which holds both
    assert len(launch_rows) == 1 and launch_rows.iloc[0][["module", "kernel"]].tolist() == ["blocks", "cudaGraphLaunch"]
    by = modules.by_module(long, depth=2, iterations=1).set_index("module")
    assert by.loc["blocks.0", "launches"] == 0 and by.loc["blocks.0", "kernels"] == 3
    assert by.loc["blocks", "launches"] == 1 and by.loc["blocks", "gpu_ops"] == 0


def test_overlapping_streams_split_busy(tmp_path):
    t = TraceBuilder()
    add_cpu_range(t, "module::a", 0, 10)
    t.kernel("ka", start=20, dur=10, stream=7, launch_at=1)
    add_cpu_range(t, "module::b", 11, 10)
    t.kernel("kb", start=25, dur=10, stream=8, launch_at=12)
    tables = load(t.write(tmp_path / "t.json"))
    by = modules.by_module(_sums_match(tables, modules.attributed_ops(tables))).set_index("module")
    assert by.loc["a", "busy_us"] == pytest.approx(7.5) and by.loc["b", "busy_us"] == pytest.approx(7.5)


@pytest.mark.parametrize("trace", [
    "own:vit16x6x384/eager", "own:vit16x6x384/default", "own:vit16x6x384/reduce-overhead",
    "hta/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "dist/hta-trace-filter-sampled-2rank/sampled_rank-0.json.gz"])
def test_real_traces_split_exactly(real_trace, trace):
    tables = load(real_trace(trace))
    att = modules.attributed_ops(tables)
    long = _sums_match(tables, att)
    assert modules.per_iteration(att)["busy_us"].sum() <= long["busy_us"].sum() + 1e-6

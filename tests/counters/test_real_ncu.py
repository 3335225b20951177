"""The counters of real H100 runs (tests/data/ncu/, see its README): parsing, joining and the figures.

The acceptance figures: a 1 GiB elementwise multiply moves its 3 GiB at 2,000 GB/s or more; an 8192^3
bf16 matmul does its 2*8192^3 FLOPs at several hundred TFLOP/s; vit16x6x384's fp32 GEMMs execute the
FLOPs the model's shapes imply.
"""

import json
from pathlib import Path

import pytest

from tracekit.counters import analyze, parse
from tracekit.models.gemm import flops

DATA = Path(__file__).resolve().parents[1] / "data" / "ncu"


def _run(label: str):
    folder = DATA / label
    csv = folder / "ncu.csv"
    if not csv.exists():
        pytest.skip(f"real ncu CSV {csv.relative_to(DATA.parents[2])} not committed yet (made on the GPU by "
                    "`make counters`; see tests/data/ncu/README.md)")
    traces = sorted(folder.glob("*.pt.trace.json.gz"))
    device = json.loads((folder / "workload.json").read_text())["environment"]["device_name"]
    return analyze(csv, traces[0] if traces else None, device), csv


def test_multiply_moves_3_gib_at_over_2000_GBps():
    r, csv = _run("mul1024")
    assert len(parse.parse(csv)) >= 1
    k = r.kernels
    mul = k[k["kernel"].str.contains("MulFunctor")]
    assert len(mul) >= 1 and mul["class"].eq("elementwise/fused").all()
    for _, row in mul.iterrows():
        assert row["dram_read_bytes"] == pytest.approx(2 * 2**30, rel=0.03)
        assert row["dram_write_bytes"] == pytest.approx(2**30, rel=0.03)
        assert row["flops_fp32"] == pytest.approx(2**28, rel=1e-3)      # one FMUL per element
        assert row["bw_GBps"] >= 2000 and row["bound"] == "memory"
    assert r.run["matched"] == len(k) and r.run["memory_share"] > 0.99


def test_bf16_matmul_does_its_flops_at_hundreds_of_TFLOPs():
    r, _ = _run("gemm8192x8192x8192-bf16")
    k = r.kernels
    gemm = k[k["class"] == "GEMM/conv"]
    per_call = flops(8192, 8192, 8192)
    # ncu profiled whole calls (one GEMM, plus any split-K reduction): tensor FLOPs are whole multiples of one call.
    tensor = k[[c for c in k if c.startswith("flops_tensor")]].sum().sum()
    calls = round(tensor / per_call)
    assert calls >= 1 and tensor == pytest.approx(calls * per_call, rel=0.03)
    main = gemm.loc[gemm["flops"].idxmax()]
    assert main["TFLOPs"] >= 300 and main["bound"] == "compute"


def test_vit_gemm_flops_match_the_model_and_every_class_is_reported():
    r, _ = _run("vit16x6x384")
    k, cls = r.kernels, r.classes.set_index("class")
    assert r.run["join"] and r.run["matched"] == len(k) >= 66
    # One iteration (the first 66 profiled kernels): fp32 GEMM FLOPs from the shapes of vit16x6x384 at batch 8.
    tokens, dim = 8 * 197, 384
    expected = (6 * flops(tokens, 3 * dim + dim + 4 * dim, dim) + 6 * flops(tokens, dim, 4 * dim)
                + flops(8 * 196, dim, 3 * 16 * 16) + flops(8, 1000, dim))
    first = k[k["id"] < 66]
    assert first.loc[first["class"] == "GEMM/conv", "flops_fp32"].sum() == pytest.approx(expected, rel=0.10)
    assert {"GEMM/conv", "attention", "elementwise/fused", "reduction/norm"} <= set(cls.index)
    assert (cls["bw_GBps"] > 0).all() and (cls["TFLOPs"] >= 0).all()
    assert cls["share"].sum() == pytest.approx(1.0)
    shares = r.run["memory_share"] + r.run["compute_share"] + r.run["neither_share"]
    assert shares == pytest.approx(1.0) and 0 <= r.run["neither_share"] <= 1

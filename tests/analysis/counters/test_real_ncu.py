"""Real Nsight Compute output from the lent H100 (tests/data/ncu/, see its README): parsing, joining, figures.

The acceptance figures: a 1 GiB elementwise multiply moves its bytes at 2,000 GB/s or more; an 8192^3
bf16 matmul does its 2*8192^3 FLOPs at several hundred TFLOP/s; vit16x6x384's fp32 GEMMs execute the
FLOPs the model's shapes imply.
"""

import json
from pathlib import Path

import pytest

from tracekit import models
from tracekit.analysis.counters import analyze, parse
from tracekit.analysis.counters.join import function_key

DATA = Path(__file__).resolve().parents[2] / "data" / "ncu"
SCRIPT = DATA / "h100_mul1GiB_bf16mm8192.csv"   # randn, x * 1.5 over 1 GiB, 8192^3 bf16 matmul, checks


def _flops(m: int, n: int, k: int) -> int:
    return 2 * m * n * k


def test_parse_a_real_raw_csv():
    df = parse.parse(SCRIPT)
    assert list(df["id"]) == list(range(9)) and df["cc"].eq("9.0").all()
    assert df.attrs["units"]["gpu__time_duration.sum"] == "ns" and df.attrs["units"]["dram__bytes_read.sum"] == "byte"
    assert df.loc[4, "kernel"] == "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"
    assert df.loc[4, "gpu__time_duration.sum"] == 1_408_000                      # "1,408,000" ns
    assert df.loc[0, "device__attribute_display_name"] == "NVIDIA H100 80GB HBM3"  # text metric stays text


def test_real_multiply_and_matmul_reach_the_acceptance_figures():
    r = analyze(SCRIPT)                                 # device from ncu's own device__attribute_display_name
    assert r.run["device"] == "NVIDIA H100 80GB HBM3" and r.peaks.dram_GBps == 3350
    k = r.kernels.set_index("id")
    mul = k.loc[1]                                      # vectorized_elementwise_kernel<..., MulFunctor>
    assert "MulFunctor" in mul["kernel"] and mul["class"] == "elementwise/fused"
    assert mul["dram_read_bytes"] == pytest.approx(2**30, rel=0.01)
    assert mul["dram_write_bytes"] == pytest.approx(2**30, rel=0.03)
    assert mul["flops_fp32"] == 2**28                   # one FMUL per element
    assert mul["bw_GBps"] == pytest.approx(3010, abs=5) and mul["bound"] == "memory"

    mm = k.loc[4]                                       # cuBLAS' Hopper GEMM (wgmma), counted by the bf16 ops path
    per_call = models.cost("matmul8192", 1, "bf16")["flop"]
    # 2*8192^3, plus the tiles' padding: 320-row tiles cover 8192 rows in 26 tiles (8320 rows).
    assert mm["flops_tensor_bf16"] == pytest.approx(per_call * 8320 / 8192, rel=1e-3)
    assert mm["TFLOPs"] == pytest.approx(793, abs=1) and mm["bound"] == "compute" and mm["class"] == "GEMM/conv"
    assert mm["compute_pct_peak"] == pytest.approx(100 * 793 / 989.5, abs=0.2)
    assert set(k.loc[[5, 8], "class"]) == {"reduction/norm"}


def test_real_ncu_names_join_kineto_names_by_function():
    """ncu writes ``at::<unnamed>::`` and ``(int, T2, T3)``, Kineto ``(anonymous namespace)`` and full types."""
    df = parse.parse(SCRIPT)
    kineto = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
              "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, "
              "at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, "
              "std::array<char*, 2ul>)")
    assert function_key(df.loc[1, "kernel"]) == function_key(kineto) == "vectorized_elementwise_kernel"
    assert function_key(df.loc[0, "kernel"]) == "distribution_elementwise_grid_stride_kernel"


def _run(label: str):
    folder = DATA / label
    csv = folder / "ncu.csv"
    traces = sorted(folder.glob("*.pt.trace.json.gz"))
    device = json.loads((folder / "workload.json").read_text())["environment"]["device_name"]
    return analyze(csv, traces[0] if traces else None, device)


def test_counters_command_on_a_1gib_multiply():
    r = _run("mul1024")
    mul = r.kernels[r.kernels["kernel"].str.contains("MulFunctor")]
    assert len(mul) >= 1 and r.run["matched"] == len(r.kernels)
    assert (mul["dram_bytes"] >= 2 * 2**30 * 0.98).all() and (mul["bw_GBps"] >= 2000).all()
    assert mul["bound"].eq("memory").all() and r.run["memory_share"] > 0.99


def test_counters_command_on_a_bf16_matmul():
    r = _run("matmul8192-bf16")
    per_call = models.cost("matmul8192", 1, "bf16")["flop"]
    tensor = r.kernels["flops_tensor_bf16"].sum()
    calls = round(tensor / per_call)
    assert calls >= 1 and tensor == pytest.approx(calls * per_call, rel=0.03)
    main = r.kernels.loc[r.kernels["flops"].idxmax()]
    assert main["TFLOPs"] >= 300 and main["bound"] == "compute"


def test_counters_command_on_vit_eager():
    r = _run("vit16x6x384")
    k, cls = r.kernels, r.classes.set_index("class")
    assert r.run["matched"] == len(k) >= 66
    # One iteration (the first 66 profiled kernels): fp32 GEMM FLOPs from vit16x6x384's shapes at batch 8,
    # within 10% (tiles padded to their size execute predicated-on FMAs too).
    tokens, dim = 8 * 197, 384
    expected = (6 * (_flops(tokens, 8 * dim, dim) + _flops(tokens, dim, 4 * dim))
                + _flops(8 * 196, dim, 3 * 16 * 16) + _flops(8, 1000, dim))
    first = k[k["id"] < 66]
    assert first.loc[first["class"] == "GEMM/conv", "flops_fp32"].sum() == pytest.approx(expected, rel=0.10)
    assert {"GEMM/conv", "attention", "elementwise/fused", "reduction/norm"} <= set(cls.index)
    assert (cls["bw_GBps"] > 0).all() and cls["share"].sum() == pytest.approx(1.0)
    shares = r.run["memory_share"] + r.run["compute_share"] + r.run["neither_share"]
    assert shares == pytest.approx(1.0)

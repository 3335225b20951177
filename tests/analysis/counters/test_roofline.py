import math

import pandas as pd
import pytest
from ncucsv import TIME_DRAM, NcuCsv
from tracebuilder import TraceBuilder

from tracekit.analysis.counters import metrics, roofline

H100 = roofline.device_peaks("NVIDIA H100 80GB HBM3")
FMUL = "sm__sass_thread_inst_executed_op_fmul_pred_on.sum"
FFMA = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"
BF16 = "sm__ops_path_tensor_src_bf16_dst_fp32.sum"
HGMMA = "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32_sparsity_off.sum"
COLS = TIME_DRAM + [(FMUL, "inst"), (FFMA, "inst"), (BF16, ""), (HGMMA, "")]


def _csv() -> NcuCsv:
    c = NcuCsv(COLS)
    # 1 GiB-per-operand multiply: 2 GiB read, 1 GiB written in 1.1 ms, one FMUL per element.
    c.kernel("void at::native::vectorized_elementwise_kernel<4, MulFunctor>(int)", 1_100_000,
             2 * 2**30, 2**30, 2**28, 0, 0, 0)
    # bf16 GEMM 8192^3 in 1.6 ms on wgmma: the aggregate counter reads 0, the hgmma one the FLOPs.
    c.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", 1_600_000,
             400_000_000, 130_000_000, 0, 0, 0, 2 * 8192**3)
    # A small fp32 layer norm: 2 MB in 5 µs, 0.1 MFLOP.
    c.kernel("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>(int)", 5_000,
             1_000_000, 1_000_000, 0, 50_000, 0, 0)
    return c


def test_per_kernel_rates_and_bounds(tmp_path):
    k = roofline.analyze(_csv().write(tmp_path / "ncu.csv"), device="NVIDIA H100 80GB HBM3").kernels
    mul, gemm, norm = (k.iloc[i] for i in range(3))
    assert mul["dram_bytes"] == 3 * 2**30
    assert mul["bw_GBps"] == pytest.approx(3 * 2**30 / 1_100_000)                 # 2928.5 GB/s
    assert mul["bw_pct_peak"] == pytest.approx(100 * mul["bw_GBps"] / 3350)
    assert mul["flops"] == 2**28 and mul["intensity_FLOP_per_B"] == pytest.approx(1 / 12)
    assert mul["bound"] == "memory" and mul["class"] == "elementwise/fused"

    assert gemm["flops_tensor_bf16"] == 2 * 8192**3                              # the larger alternative
    assert gemm["TFLOPs"] == pytest.approx(2 * 8192**3 / 1_600_000 / 1e3)       # 687 TFLOP/s
    assert gemm["compute_pct_peak"] == pytest.approx(100 * gemm["TFLOPs"] / (1979 / 2))
    assert gemm["bound"] == "compute" and gemm["class"] == "GEMM/conv"

    assert norm["flops"] == 100_000 and norm["bw_GBps"] == pytest.approx(400.0)
    assert norm["bound"] == "neither" and norm["class"] == "reduction/norm"


def test_mixed_work_adds_its_shares_of_each_roof():
    c = pd.DataFrame({"id": [0], "kernel": ["k"], metrics.TIME: [1e6], metrics.DRAM_READ: [0.0],
                      metrics.DRAM_WRITE: [0.0], FFMA: [16.75e9], BF16: [247.375e9]})
    k = roofline.kernel_table(c, H100)
    # fp32: 33.5 TFLOP/s of 67 = 50%; bf16: 247.375 of 989.5 = 25%
    assert k.loc[0, "compute_pct_peak"] == pytest.approx(75.0)
    assert k.loc[0, "bound"] == "compute"


def test_tensor_pipe_busy_counts_as_compute_bound():
    c = pd.DataFrame({"id": [0], "kernel": ["k"], metrics.TIME: [1e6], metrics.DRAM_READ: [1e6],
                      metrics.DRAM_WRITE: [0.0], "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": [80.0]})
    k = roofline.kernel_table(c, H100)
    assert math.isnan(k.loc[0, "flops"]) and k.loc[0, "tensor_pipe_pct"] == 80.0 and k.loc[0, "bound"] == "compute"


def test_unknown_device_has_no_percent_and_says_so(tmp_path):
    r = roofline.analyze(_csv().write(tmp_path / "ncu.csv"), device="NVIDIA B300")
    assert r.kernels["bound"].eq("unknown").all() and r.kernels["bw_pct_peak"].isna().all()
    assert r.peaks is None and not r.run["peaks_known"]
    from tracekit.report.formats.counters import notes  # the report says so

    assert any("no peak figures for device 'NVIDIA B300'" in n for n in notes(r))
    assert r.kernels.loc[0, "bw_GBps"] > 2900                                      # rates need no peaks
    assert math.isnan(r.run["memory_share"]) and r.classes["neither_share"].isna().all()


def test_run_and_class_shares_weight_by_trace_time(tmp_path):
    t = TraceBuilder(device_name="NVIDIA H100 80GB HBM3")
    t.step(1, 0, 10_000)
    t.kernel("void at::native::vectorized_elementwise_kernel<4, MulFunctor>(int)", 100, 1000, launch_at=90)
    t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", 1200, 1500, launch_at=1100)
    t.kernel("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>(int)", 2800, 500,
             launch_at=2700)
    r = roofline.analyze(_csv().write(tmp_path / "ncu.csv"), t.write(tmp_path / "t.json"))
    assert r.run["device"] == "NVIDIA H100 80GB HBM3" and r.run["join"] == "full name"   # device from the trace
    assert r.run["matched"] == 3 and list(r.kernels["weight_us"]) == [1000, 1500, 500]
    assert r.run["memory_share"] == pytest.approx(1000 / 3000)
    assert r.run["compute_share"] == pytest.approx(1500 / 3000)
    assert r.run["neither_share"] == pytest.approx(500 / 3000)
    cls = r.classes.set_index("class")
    assert cls["share"].sum() == pytest.approx(1.0) and cls.loc["GEMM/conv", "share"] == pytest.approx(0.5)
    assert cls.loc["reduction/norm", "neither_share"] == 1.0
    assert cls.loc["elementwise/fused", "bw_GBps"] == pytest.approx(3 * 2**30 / 1_100_000)
    assert r.run["bw_GBps"] == pytest.approx(r.kernels["dram_bytes"].sum() / (1e3 * r.kernels["time_us"].sum()))


def test_without_trace_ncu_time_weights(tmp_path):
    r = roofline.analyze(_csv().write(tmp_path / "ncu.csv"), device="NVIDIA H100 80GB HBM3")
    assert list(r.kernels["weight_us"]) == [1100, 1600, 5] and r.run["matched"] == 0
    assert r.run["memory_share"] == pytest.approx(1100 / 2705)


def test_csv_without_time_or_dram_is_an_error(tmp_path):
    c = NcuCsv([(metrics.TIME, "nsecond")]).kernel("k", 5)
    with pytest.raises(roofline.CountersError, match="lacks dram__bytes_read.sum"):
        roofline.analyze(c.write(tmp_path / "ncu.csv"))


def test_peaks_by_flop_kind_come_from_the_datasheet_table():
    assert H100.dram_GBps == 3350 and H100.TFLOPs["tensor_bf16"] == pytest.approx(989.5)
    assert H100.TFLOPs["tensor_tf32"] == pytest.approx(494.5) and H100.TFLOPs["fp32"] == 67
    assert H100.TFLOPs["tensor_fp64"] == 67 and "fp16" not in H100.TFLOPs      # no CUDA-core fp16 figure
    assert "datasheet" in H100.source and all(r["source"] == H100.source for r in H100.table())
    assert roofline.device_peaks("NVIDIA H100 PCIe").dram_GBps == 2000
    assert roofline.device_peaks("NVIDIA B300") is None and set(roofline.PEAK_KEY) == set(metrics.FLOP_KINDS) - {"fp16"}

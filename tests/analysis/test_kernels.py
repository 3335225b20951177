import pytest
from tracebuilder import TraceBuilder

from tracekit.analysis import kernels
from tracekit.trace import load


@pytest.mark.parametrize("name, cls", [
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8", "GEMM/conv"),
    ("nvjet_tst_128x64_64x6_1x1_v_bz_coopB_TNT", "GEMM/conv"),
    ("triton_tem_fused_addmm_0", "GEMM/conv"),
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80", "attention"),
    ("flash_fwd_kernel<Flash_fwd_kernel_traits<64>>", "attention"),
    ("triton_per_fused_native_layer_norm_3", "reduction/norm"),
    ("triton_red_fused_sum_1", "reduction/norm"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>", "reduction/norm"),
    ("triton_poi_fused_addmm_gelu_view_4", "elementwise/fused"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "elementwise/fused"),
    ("some_custom_kernel", "other"),
])
def test_classes(name, cls):
    assert kernels.kernel_class(name) == cls


def test_tables(tmp_path):
    t = TraceBuilder()
    for i in range(3):
        t.kernel("sm90_xmma_gemm", start=100.0 * i, dur=30, launch_at=100.0 * i - 5)
        t.kernel("triton_poi_fused_add_0", start=100.0 * i + 40, dur=10, launch_at=100.0 * i + 1)
    t.memcpy(start=400, dur=20, launch_at=390)
    tables = load(t.write(tmp_path / "t.json"))
    top = kernels.top_kernels(tables).set_index("name")
    assert top.loc["sm90_xmma_gemm", "count"] == 3 and top.loc["sm90_xmma_gemm", "total_us"] == 90
    assert top.loc["sm90_xmma_gemm", "share"] == pytest.approx(90 / 140)
    assert top.loc["sm90_xmma_gemm", "grid"] == "1,1,1"
    cls = kernels.by_class(tables).set_index("class")
    assert cls.loc["GEMM/conv", "total_us"] == 90 and cls.loc["memcpy/memset", "count"] == 1
    assert cls["share"].sum() == pytest.approx(1.0)
    assert list(kernels.durations(tables)) == [10, 10, 10, 30, 30, 30]

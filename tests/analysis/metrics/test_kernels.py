import pytest
from owndata import H100_RUNS, h100_trace
from tracebuilder import TraceBuilder

from tracekit.analysis.metrics import kernels
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
    # real names from the HTA fixtures: the class comes from the kernel's own name, not its arguments
    ("void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_hfp8_gpu(at::Tensor const&, long, "
     "long, double)::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, fbgemm_gpu::_float_to_hfp8_gpu("
     "at::Tensor const&, long, long, double)::{lambda(float)#1}, at::detail::Array<char*, 2>)", "elementwise/fused"),
    ("void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long, 2ul, 32ul>("
     "at::GenericPackedTensorAccessor<c10::Half, 1ul, at::RestrictPtrTraits, long>, fbgemm_gpu::FixedDivisor, "
     "long)", "embedding"),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, float, false, "
     "true, true, false, 7, cublasGemvParams<cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float>, float>)", "GEMM/conv"),
    ("cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", "GEMM/conv"),
    ("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*, int, "
     "float const*, int, float*, kernel_grad_params, unsigned long long, int, float, int, int, int)", "GEMM/conv"),
    ("void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>(cublasSplitKParams<float>, "
     "float const*, float const*, float*, void*, long, float*, int*)", "GEMM/conv"),
    ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1", "GEMM/conv"),
    ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float, float, float, float, "
     "cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float)", "reduction/norm"),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*, long, long, "
     "long, int, int, int, int, int, int, int, int, int, int, float*, long*)", "reduction/norm"),
    ("void permute_pooled_embs_kernel<float>(float const*, long const*, long const*, long const*, float*, long, "
     "long, long)", "embedding"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>(float*, "
     "at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>, int, unsigned int)",
     "elementwise/fused"),
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>("
     "cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)", "elementwise/fused"),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "communication"),
    # Inductor's prefix says what the kernel is, whatever ops its name lists
    ("triton_per_fused_add_cat_convolution_expand_native_layer_norm_transpose_view_1", "reduction/norm"),
    ("triton_poi_fused_add_cat_convolution_expand_native_layer_norm_transpose_view_2", "elementwise/fused"),
    ("triton_tem_fused_flex_attention_0", "attention"),
])
def test_classes(name, cls):
    assert kernels.kernel_class(name) == cls


def test_short_name():
    assert kernels.short_name("void ns::k<T, a::b<int, 4> >(float*, int)") == "ns::k"
    assert kernels.short_name("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float>(float*)") == \
        "at::native::(anonymous namespace)::CatArrayBatchedCopy"
    assert kernels.short_name("triton_poi_fused_add_0") == "triton_poi_fused_add_0"
    assert kernels.short_name("void at::<unnamed>::CatArrayBatchedCopy<at::<unnamed>::OpaqueType<4>>(int)") == \
        "at::<unnamed>::CatArrayBatchedCopy"     # Nsight Compute's anonymous namespace


@pytest.mark.parametrize("run", H100_RUNS)
def test_classes_cover_our_h100_traces(run):
    """Eager, Inductor's Triton kernels and CUDA-graph replays: 'other' keeps under 5% of the GPU time."""
    cls = kernels.by_class(load(h100_trace(run))).set_index("class")["share"]
    assert cls.get("other", 0.0) < 0.05


@pytest.mark.parametrize("name", ["hta/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
                                  "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                                  "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                                  "hta/trace_filter/sampled_rank-0.json.gz"])
def test_classes_cover_the_real_traces(fixtures, name):
    """On GPUs and libraries of several vendors and years, 'other' keeps under 5% of the GPU time."""
    cls = kernels.by_class(load(fixtures / name)).set_index("class")["share"]
    assert cls.get("other", 0.0) < 0.05


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

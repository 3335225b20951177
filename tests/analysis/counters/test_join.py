import pandas as pd
import pytest
from owndata import h100_trace
from tracebuilder import TraceBuilder

from tracekit.analysis.counters.join import full_key, function_key, join
from tracekit.trace import load

# Our H100 trace of vit16x6x384 eager, batch 8 (10 iterations of 66 kernels), in tests/data.
VIT_EAGER = h100_trace("vit16x6x384/eager")


def _counters(names: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"id": range(len(names)), "kernel": names})


@pytest.mark.parametrize("name, key", [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
     "vectorized_elementwise_kernel"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int, float)",
     "vectorized_layer_norm_kernel"),
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float>::Params)",
     "fmha_cutlassF_f32_aligned_64x64_rf_sm80"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x64x8", "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x64x8"),
    ("vectorized_elementwise_kernel", "vectorized_elementwise_kernel"),
])
def test_function_key(name, key):
    assert function_key(name) == key


def test_repeated_names_pair_up_in_order(tmp_path):
    t = TraceBuilder()
    for i, (name, dur) in enumerate([("gemm", 30), ("add", 5), ("gemm", 31), ("add", 6), ("gemm", 32)]):
        t.kernel(name, start=100.0 * i, dur=dur, launch_at=100.0 * i - 5)
    ops = load(t.write(tmp_path / "t.json")).gpu_ops
    out = join(_counters(["gemm", "add", "gemm", "ADD", "gemm", "gemm"]), ops)
    assert out.attrs["join"] == "full name"
    assert list(out["trace_dur_us"][:5]) == [30, 5, 31, 6, 32]
    assert list(out["matched"]) == [True] * 5 + [False]            # a 4th gemm the trace lacks


def test_one_real_iteration_joins_in_order():
    ops = load(VIT_EAGER).gpu_ops
    kernels = ops[ops["kind"] == "kernel"].sort_values("ts")
    first = kernels.head(70)          # ncu profiles the first 70 kernels: one iteration of 66, then 4
    out = join(_counters(list(first["name"])), ops)
    assert out.attrs["join"] == "full name" and out["matched"].all()
    assert list(out["trace_dur_us"]) == list(first["dur"])
    assert list(out["trace_ts"]) == list(first["ts"])


def test_function_names_only_still_join_in_order():
    """ncu printing bare function names (--print-kernel-base function) joins by function name."""
    ops = load(VIT_EAGER).gpu_ops
    first = ops[ops["kind"] == "kernel"].sort_values("ts").head(66)
    out = join(_counters([function_key(n) for n in first["name"]]), ops)
    assert out.attrs["join"] == "function name" and out["matched"].all()
    assert list(out["trace_name"]) == list(first["name"])


def test_full_key_ignores_spacing_and_case():
    assert full_key("std::array<char*, 3ul>") == full_key("std::array<char *,3UL>")

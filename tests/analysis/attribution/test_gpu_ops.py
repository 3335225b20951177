"""Attribution rules (tracekit.analysis.attribution.gpu_ops), each on a hand-made trace with a known answer."""

from __future__ import annotations

import pytest

from tests.tracebuilder import TID, TraceBuilder, add_cpu_range, add_graph_launch, add_host_call
from tracekit.analysis.attribution.gpu_ops import UNATTRIBUTED, attribute, common_module
from tracekit.analysis.attribution.graph_capture import captured_launches
from tracekit.analysis.attribution.opnames import kernel_ops, normalize_op
from tracekit.manifest import Attribution
from tracekit.trace import load

KEY = "fxkey1"
GRAPH = f"## Call CompiledFxGraph {KEY} ##"
PROVENANCE = {"provenance": {"graphs": [{"key": KEY, "compile_id": "0/0", "calls": [
    ["triton_poi_fused_addmm_gelu_0", 1, ["blocks.0.mlp.0", "blocks.0.mlp.1"], ["addmm", "gelu"]],
    ["extern_kernels.mm", 2, ["blocks.0.mlp.2"], ["addmm"]],
    ["triton_poi_fused_addmm_gelu_0", 3, ["blocks.1.mlp.0", "blocks.1.mlp.1"], ["addmm", "gelu"]],
    ["extern_kernels.mm", 4, ["blocks.1.mlp.2"], ["addmm"]],
]}]}}


def _load(t: TraceBuilder, tmp_path):
    return load(t.write(tmp_path / "t.json"))


def _rows(att, by="kernel"):
    return {k: (m, o, r) for k, m, o, r in att[[by, "module", "op", "rule"]].itertuples(index=False)}


def eager_scopes() -> TraceBuilder:
    """One eager MLP block: fc1 (linear > addmm), act (gelu), and the residual add in the
    block itself; a kernel launched outside every scope, one on another thread inside the
    scopes' time, one with no launch call."""
    t = TraceBuilder()
    t.step(1, 0, 100)
    add_cpu_range(t, "module::", 1, 90, cat="user_annotation")
    add_cpu_range(t, "module::blocks.0.mlp", 2, 60)
    add_cpu_range(t, "module::blocks.0.mlp.0", 3, 25)
    add_cpu_range(t, "aten::linear", 4, 23)
    add_cpu_range(t, "aten::addmm", 5, 20)
    t.kernel("gemm", start=40, dur=10, launch_at=8)
    add_cpu_range(t, "module::blocks.0.mlp.1", 30, 10)
    add_cpu_range(t, "aten::gelu", 31, 8)
    t.kernel("gelu_kernel", start=51, dur=3, launch_at=33)
    add_cpu_range(t, "aten::add", 45, 10)
    t.kernel("add_kernel", start=55, dur=2, launch_at=47)
    t.kernel("outside", start=97, dur=2, launch_at=93)
    t.kernel("other_thread", start=60, dur=2, launch_at=20, launch_dur=1)
    t.events[-4]["tid"] = TID + 1  # the launch call of other_thread
    t.kernel("no_launch", start=70, dur=2)
    return t


def test_module_scope_rule(tmp_path):
    att = attribute(_load(eager_scopes(), tmp_path))
    rows = _rows(att)
    assert rows["gemm"] == ("blocks.0.mlp.0", "addmm", "module scope")      # innermost aten op, innermost scope
    assert rows["gelu_kernel"] == ("blocks.0.mlp.1", "gelu", "module scope")
    assert rows["add_kernel"] == ("blocks.0.mlp", "add", "module scope")   # the block's own code
    assert rows["outside"] == (UNATTRIBUTED, "", "none: outside module scopes")
    assert rows["other_thread"] == (UNATTRIBUTED, "", "none: outside module scopes")  # scopes hold their thread only
    assert rows["no_launch"] == (UNATTRIBUTED, "", "none: no launch call in the trace")
    assert att.loc[att["kernel"] == "gemm", "iteration"].item() == 1


def compiled_default() -> TraceBuilder:
    """Inductor's generated code, default mode: Triton kernels and cuBLAS calls inside the
    graph call, the same fused kernel called for two blocks."""
    t = TraceBuilder()
    t.step(1, 0, 100)
    add_cpu_range(t, "Torch-Compiled Region: 0/0", 1, 95)
    add_cpu_range(t, GRAPH, 3, 90, cat="user_annotation")
    for start, n in ((10, "0"), (40, "1")):
        add_cpu_range(t, "triton_poi_fused_addmm_gelu_0", start, 5)
        t.kernel("triton_poi_fused_addmm_gelu_0", start=start + 50, dur=2, launch_at=start + 1, api="cuLaunchKernel")
        add_cpu_range(t, "aten::mm", start + 10, 10)
        t.memset(start + 53, 1, launch_at=start + 11)
        t.kernel(f"gemm_{n}", start=start + 55, dur=3, launch_at=start + 14)
    add_cpu_range(t, "aten::_foreach_copy_", 80, 5)
    t.kernel("copy_inputs", start=97, dur=1, launch_at=81)
    return t


def test_inductor_provenance_rule(tmp_path):
    tables = _load(compiled_default(), tmp_path)
    att = attribute(tables, Attribution.of(PROVENANCE))
    fused = att[att["kernel"] == "triton_poi_fused_addmm_gelu_0"].sort_values("ts")
    assert fused["module"].tolist() == ["blocks.0.mlp", "blocks.1.mlp"]   # k-th call -> k-th call site
    assert set(fused["op"]) == {"addmm+gelu"} and set(fused["rule"]) == {"inductor provenance"}
    assert set(fused["region"]) == {"0/0"}
    mm = att[att["kernel"].isin(["gemm_0", "Memset (Device)"])]
    assert set(mm["module"]) == {"blocks.0.mlp.2"} and set(mm["op"]) == {"addmm"}   # memset + gemm of one mm call
    assert _rows(att)["gemm_1"][0] == "blocks.1.mlp.2"
    # cudagraph trees' copy of a replay's inputs: the work of the module the graph computes (its call sites
    # are in blocks.0 and blocks.1: "blocks")
    assert _rows(att)["copy_inputs"] == ("blocks", "_foreach_copy_", "graph input copy")


def test_compiled_without_provenance_keeps_ops(tmp_path):
    att = attribute(_load(compiled_default(), tmp_path))
    rows = _rows(att)
    assert rows["triton_poi_fused_addmm_gelu_0"] == (UNATTRIBUTED, "addmm+gelu",   # ops from the kernel's name
                                                     f"none: compiled graph {KEY} without provenance")
    assert rows["gemm_0"][:2] == (UNATTRIBUTED, "mm")


def test_provenance_count_mismatch_is_not_guessed(tmp_path):
    one_mm = {"provenance": {"graphs": [{**PROVENANCE["provenance"]["graphs"][0],
                                         "calls": PROVENANCE["provenance"]["graphs"][0]["calls"][:3]}]}}
    att = attribute(_load(compiled_default(), tmp_path), Attribution.of(one_mm))
    assert _rows(att)["gemm_0"] == (UNATTRIBUTED, "mm", "none: call count differs from the graph's call sites")
    assert _rows(att)["triton_poi_fused_addmm_gelu_0"][2] == "inductor provenance"


def replayed() -> TraceBuilder:
    """reduce-overhead: one cudaGraphLaunch inside the graph call replays the graph's six ops."""
    t = TraceBuilder()
    t.step(1, 0, 100)
    add_cpu_range(t, "Torch-Compiled Region: 0/1", 1, 95)
    add_cpu_range(t, GRAPH, 3, 90, cat="user_annotation")
    add_graph_launch(t, 10, [("triton_poi_fused_addmm_gelu_0", 30, 2), ("Memset (Device)", 32, 1),
                             ("gemm", 33, 3), ("triton_poi_fused_addmm_gelu_0", 36, 2), ("Memset (Device)", 38, 1),
                             ("gemm", 39, 3)])
    return t


CAPTURE = [["blocks.0.mlp", "addmm+gelu", "inductor provenance"], ["blocks.0.mlp.2", "addmm", "inductor provenance"],
           ["blocks.0.mlp.2", "addmm", "inductor provenance"], ["blocks.1.mlp", "addmm+gelu", "inductor provenance"],
           ["blocks.1.mlp.2", "addmm", "inductor provenance"], ["blocks.1.mlp.2", "addmm", "inductor provenance"]]


def test_graph_capture_rule(tmp_path):
    record = {**PROVENANCE, "captures": [{"graph": KEY, "launches": CAPTURE}]}
    att = attribute(_load(replayed(), tmp_path), Attribution.of(record)).sort_values("ts")
    assert att["module"].tolist() == [m for m, _, _ in CAPTURE]   # i-th replayed op = i-th captured launch
    assert set(att["rule"]) == {"graph capture"} and att["replay"].all()


def test_replay_without_capture_matches_triton_kernels_by_name(tmp_path):
    short = {**PROVENANCE, "captures": [{"graph": KEY, "launches": CAPTURE[:4]}]}  # counts differ: not used
    att = attribute(_load(replayed(), tmp_path), Attribution.of(short)).sort_values("ts")
    assert att["module"].tolist() == ["blocks.0.mlp", UNATTRIBUTED, UNATTRIBUTED, "blocks.1.mlp", UNATTRIBUTED,
                                      UNATTRIBUTED]
    assert att["rule"].iloc[0] == "graph replay (kernel name)"
    assert att["rule"].iloc[2] == "none: CUDA graph replay without a recorded capture"


@pytest.mark.parametrize("wrapper", [None, "CUDAGraphNode.record (dynamo_timed)", "CUDAGraphNode.record"])
def test_captured_launches(tmp_path, wrapper):
    """A profile of the capturing call: a warm-up run executes (its kernels are in the
    trace), then the capture's launches enqueue nothing; only those are the graph's.
    cudagraph trees (torch 2.11) put a ``CUDAGraphNode.record`` range between the graph's
    call and its call sites: the call sites are found through it."""
    t = TraceBuilder()
    add_cpu_range(t, "Torch-Compiled Region: 0/0", 0, 200)
    add_cpu_range(t, GRAPH, 1, 60, cat="user_annotation")      # the warm-up run: executed
    add_cpu_range(t, "triton_poi_fused_addmm_gelu_0", 5, 5)
    t.kernel("triton_poi_fused_addmm_gelu_0", start=6, dur=1, launch_at=6, api="cuLaunchKernel")
    add_host_call(t, "cudaStreamBeginCapture", 100)
    add_cpu_range(t, GRAPH, 105, 80, cat="user_annotation")    # the capture
    if wrapper:
        add_cpu_range(t, wrapper, 106, 78)
    for start in (110, 140):
        add_cpu_range(t, "triton_poi_fused_addmm_gelu_0", start, 5)
        add_host_call(t, "cuLaunchKernel", start + 1)
        add_cpu_range(t, "aten::mm", start + 10, 10)
        add_host_call(t, "cudaMemsetAsync", start + 11)
        add_host_call(t, "cudaLaunchKernel", start + 14)
    add_host_call(t, "cudaStreamEndCapture", 190)
    captures = captured_launches(_load(t, tmp_path), Attribution.of(PROVENANCE))
    assert len(captures) == 1 and captures[0]["graph"] == KEY
    assert [m for m, _, _ in captures[0]["launches"]] == [m for m, _, _ in CAPTURE]


def test_captured_launches_of_a_training_step_include_the_autograd_thread(tmp_path):
    """A captured training step: the forward is launched by the capturing thread, the
    backward by the autograd engine's device thread; the graph replays them in launch order.
    A second capture on a third thread keeps its own launches."""
    t = TraceBuilder()
    add_host_call(t, "cudaStreamBeginCapture", 100)
    add_cpu_range(t, "module::blocks.0", 105, 10)
    add_cpu_range(t, "aten::addmm", 106, 5)
    add_host_call(t, "cudaLaunchKernel", 107)                       # forward: capturing thread
    add_cpu_range(t, "aten::mm", 120, 5, tid=2)
    add_host_call(t, "cudaLaunchKernel", 121, tid=2)                # backward: autograd thread
    add_host_call(t, "cudaStreamBeginCapture", 122, tid=3)
    add_cpu_range(t, "aten::gelu", 124, 3, tid=3)
    add_host_call(t, "cudaLaunchKernel", 125, tid=3)                # another graph's capture
    add_host_call(t, "cudaStreamEndCapture", 128, tid=3)
    add_cpu_range(t, "aten::_foreach_add_", 130, 5)
    add_host_call(t, "cudaLaunchKernel", 131)                       # optimizer: capturing thread
    add_host_call(t, "cudaStreamEndCapture", 140)
    captures = captured_launches(_load(t, tmp_path), Attribution.of({}))
    assert [[o for _, o, _ in c["launches"]] for c in captures] == [["addmm", "mm", "_foreach_add_"], ["gelu"]]
    assert captures[0]["launches"][0][0] == "blocks.0"


def test_scope_prefixes_a_compiled_submodule(tmp_path):
    """A compiled submodule (surgical mode): provenance paths are relative to the
    compiled module, whose scope is around its region."""
    t = TraceBuilder()
    add_cpu_range(t, "module::blocks.0.attn", 0, 100)
    add_cpu_range(t, "Torch-Compiled Region: 1/0", 1, 95)
    add_cpu_range(t, GRAPH, 3, 90, cat="user_annotation")
    add_cpu_range(t, "aten::mm", 10, 10)
    t.kernel("gemm", start=30, dur=3, launch_at=12)
    record = {"provenance": {"graphs": [{"key": KEY, "compile_id": "1/0",
                                         "calls": [["extern_kernels.mm", 1, ["qkv"], ["addmm"]]]}]}}
    att = attribute(_load(t, tmp_path), Attribution.of(record))
    assert _rows(att)["gemm"] == ("blocks.0.attn.qkv", "addmm", "inductor provenance")


@pytest.mark.parametrize("name, ops", [
    ("triton_poi_fused_addmm_gelu_view_4", ["addmm", "gelu"]),
    ("triton_per_fused_add_addmm_native_layer_norm_view_5", ["add", "addmm", "layer_norm"]),
    ("triton_red_fused__log_softmax_0", ["_log_softmax"]),
    ("triton_poi_fused_clone_0", ["clone"]),
    ("triton_poi_fused_view_3", ["view"]),          # only views: kept
    ("sm80_xmma_gemm_f32f32", []),
])
def test_kernel_ops(name, ops):
    assert kernel_ops(name) == ops


def test_names():
    assert normalize_op("aten::cudnn_convolution") == "convolution"
    assert normalize_op("extern_kernels.mm") == "mm"
    assert normalize_op("torch.ops.aten._scaled_dot_product_efficient_attention.default") == \
        "scaled_dot_product_attention"
    assert normalize_op("graph_0_cpp_fused_gelu_3") == "cpp_fused_gelu_3"
    assert common_module(["blocks.0.attn.proj", "blocks.0", "blocks.0.norm2"]) == "blocks.0"
    assert common_module(["", "blocks.0.norm1"]) == ""
    assert common_module(["blocks.1", "norm"]) == ""


def test_graph_capture_is_chosen_by_its_number_of_launches(tmp_path):
    """A compiled graph captured as two CUDA graphs (partitions): each replay takes the
    capture of its graph call with as many launches as it has ops."""
    other = [["head", "mm", "inductor provenance"]] * 2
    record = {**PROVENANCE, "captures": [{"graph": KEY, "launches": CAPTURE}, {"graph": KEY, "launches": other}]}
    att = attribute(_load(replayed(), tmp_path), Attribution.of(record)).sort_values("ts")
    assert att["module"].tolist() == [m for m, _, _ in CAPTURE]

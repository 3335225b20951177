"""What runs record for attribution (tracekit.capture.provenance, module_scopes), on the CPU with real torch."""

from __future__ import annotations

import pytest
import torch

from tracekit.analysis.attribution.gpu_ops import launch_rules
from tracekit.analysis.attribution.opnames import SCOPE_PREFIX
from tracekit.capture.module_scopes import _scoped_modules, module_scopes
from tracekit.capture.provenance import _calls, module_path
from tracekit.manifest import Attribution
from tracekit.trace import load


def _trace(model, x, tmp_path, scoped=True):
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        if scoped:
            with module_scopes(model):
                model(x)
        else:
            model(x)
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    return load(tmp_path / "t.json")


def test_module_scopes_nest_like_the_calls(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(4, 2)))
    cpu = _trace(model, torch.randn(3, 4), tmp_path).cpu_ops
    scopes = cpu[cpu["name"].str.startswith(SCOPE_PREFIX)].sort_values("ts")
    assert scopes["name"].tolist() == ["module::", "module::0", "module::1", "module::1.0", "module::1.1"]
    assert scopes["depth"].tolist() == [0, 1, 1, 2, 2]
    addmm = cpu[cpu["name"] == "aten::addmm"].sort_values("ts")
    inner = scopes.set_index("name")
    assert inner.loc["module::0", "ts"] <= addmm["ts"].iloc[0] < inner.loc["module::0", "end"]
    assert not model._forward_pre_hooks and not model[0]._forward_hooks   # removed on exit


def test_scopes_stop_at_compiled_submodules():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(4, 4)))
    model[1] = torch.compile(model[1])   # lazy: nothing compiles here
    assert [p for p, _ in _scoped_modules(model)] == ["", "0", "1"]


@pytest.mark.parametrize("stack, path", [
    ("L['self'].blocks.0.mlp", "blocks.0.mlp"),
    ("L['self']._modules['blocks']._modules['0']", "blocks.0"),
    ("L['mod'].layers[3].attn", "layers.3.attn"),
    ("L['self']", ""),
])
def test_module_path(stack, path):
    assert module_path({"k": (stack, object)}) == path


def test_recomputed_nodes_do_not_set_a_call_sites_module():
    nodes = {"emb": ("wte", "embedding"), "add": ("", "add"), "ln1": ("h.0.ln_1", "native_layer_norm"),
             "res": ("h.0", "add"), "ln2": ("h.0.ln_2", "native_layer_norm"), "v": ("h.0.attn", "view")}
    mapping = {"cppCodeToPost": {"k2:3": ["add", "res", "ln2", "v"], "k1:1": ["emb", "add", "ln1"],
                                 "extern_kernels.mm:2": ["v"]}}
    assert _calls(mapping, nodes) == [
        ["k1", 1, ["", "h.0.ln_1", "wte"], ["add", "embedding", "native_layer_norm"]],
        ["extern_kernels.mm", 2, ["h.0.attn"], ["view"]],          # only a view: kept
        ["k2", 3, ["h.0", "h.0.ln_2"], ["add", "native_layer_norm"]],   # "add" was k1's: recomputed
    ]


@pytest.mark.slow
def test_provenance_and_scopes_agree_on_a_real_model(tmp_path, monkeypatch):
    """Compiled on the CPU with its C++ kernels profiled, each library call and kernel of
    the generated code gets the module that eager's scopes give the same op."""
    import torch._inductor.config as config

    from tracekit.capture.provenance import InductorProvenance
    from tracekit.models import build

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    model, inputs = build("vit16x2x64", 1, "fp32", "cpu", 0)
    (tmp_path / "e").mkdir()
    eager = _trace(model, *inputs, tmp_path / "e")
    with config.patch({"cpp.enable_kernel_profile": True}), InductorProvenance() as rec, torch.no_grad():
        compiled = torch.compile(model)
        compiled(*inputs)
    assert rec.problem == "" and len(rec.graphs) == 1 and rec.graphs[0]["key"]
    tables = _trace(compiled, *inputs, tmp_path, scoped=False)
    cpu = tables.cpu_ops
    graph_call = cpu[cpu["name"].str.startswith("## Call CompiledFxGraph")].iloc[0]
    calls = cpu[(cpu["depth"] == graph_call["depth"] + 1) & (cpu["ts"] >= graph_call["ts"])
                & (cpu["end"] <= graph_call["end"])].assign(ts=lambda c: c["ts"] + 1e-3)
    rules = launch_rules(tables, calls, Attribution.of({"provenance": rec.to_dict()}))
    assert (rules["rule"] == "inductor provenance").all()
    linears = rules.loc[calls["name"] == "aten::addmm", "module"].tolist()
    eager_calls = eager.cpu_ops[eager.cpu_ops["name"] == "aten::addmm"].assign(ts=lambda c: c["ts"] + 1e-3)
    assert linears == launch_rules(eager, eager_calls, None)["module"].tolist()
    assert linears[:4] == ["blocks.0.attn.qkv", "blocks.0.attn.proj", "blocks.0.mlp.0", "blocks.0.mlp.2"]


def test_a_library_call_is_placed_by_its_own_op():
    nodes = {"mask": ("model.transformer", "where"), "sdpa": ("model.transformer.h.0.attn",
                                                           "_scaled_dot_product_efficient_attention"),
             "mm": ("h.0.mlp.c_fc", "addmm")}
    mapping = {"cppCodeToPost": {"torch.ops.aten._scaled_dot_product_efficient_attention.default:1": ["mask", "sdpa"],
                                 "extern_kernels.mm:2": ["mm"]}}
    assert [c[2] for c in _calls(mapping, nodes)] == [["model.transformer.h.0.attn"], ["h.0.mlp.c_fc"]]


def test_a_cache_hit_in_the_same_process_keeps_module_paths():
    """Inductor's structured-trace records as the recorder sees them: a graph compiled (cache
    miss, the pass saw its nodes), then compiled again by a later run of this process
    (cache hit: no pass runs); both get their modules."""
    import json
    import logging

    from tracekit.capture.provenance import InductorProvenance

    def record(name, payload):
        r = logging.LogRecord("torch.__trace", logging.DEBUG, "", 0, "", None, None)
        r.metadata, r.payload = {"artifact": {"name": name}, "frame_id": 0, "frame_compile_id": 0}, json.dumps(payload)
        return r

    mapping = {"cppCodeToPost": {"extern_kernels.mm:1": ["mm"]}}
    first, second = InductorProvenance(), InductorProvenance()
    first._nodes = {"mm": ("head", "mm")}
    for rec, cache in ((first, "fx_graph_cache_miss"), (second, "fx_graph_cache_hit")):
        rec._artifact(record("inductor_provenance_tracking_node_mappings", mapping))
        rec._artifact(record(cache, {"key": "k-same-process"}))
    assert first.graphs[0]["calls"] == second.graphs[0]["calls"] == [["extern_kernels.mm", 1, ["head"], ["mm"]]]
    assert second.problem == ""
    third = InductorProvenance()
    third._artifact(record("inductor_provenance_tracking_node_mappings", mapping))
    third._artifact(record("fx_graph_cache_hit", {"key": "k-other-process"}))
    assert third.graphs[0]["calls"] == [["extern_kernels.mm", 1, [], []]] and "cache hit" in third.problem

"""hf:<type>: transformers architectures from their config classes, random weights, nothing downloaded."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from tracekit import models
from tracekit.analysis.comparison.workloads import workloads
from tracekit.analysis.runs import analyze
from tracekit.capture import outputs, runner
from tracekit.capture.phases import _loss, make_step, model_loss
from tracekit.manifest.spec import RunSpec

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers not installed (pip install -e '.[models]')")

ROOT = Path(__file__).resolve().parents[2]
GPT2 = "hf:gpt2?layers=2&hidden=64&heads=4&vocab=1000"
LLAMA = "hf:llama?layers=2&hidden=64&heads=4&kv_heads=2&ffn=128&vocab=1000"
QUICK = dict(warmup=1, iters=3, profile_iters=2)
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": os.getcwd()}


def llama_parameters(vocab, hidden, layers, heads, kv_heads, ffn) -> int:
    """Llama's weights by hand: embedding and untied LM head, and per layer q/o (hidden x hidden),
    k/v (hidden x kv_heads * head_dim), gate/up/down (hidden x ffn), two RMSNorms; a final RMSNorm."""
    head_dim = hidden // heads
    layer = 2 * hidden * hidden + 2 * hidden * kv_heads * head_dim + 3 * hidden * ffn + 2 * hidden
    return 2 * vocab * hidden + layers * layer + hidden


def test_sizes_in_the_name_override_the_config():
    module, (ids,) = models.build(LLAMA, batch=2, seq=16)
    assert type(module.model).__name__ == "LlamaForCausalLM" and ids.shape == (2, 16) and ids.dtype == torch.int64
    assert sum(p.numel() for p in module.parameters()) == llama_parameters(1000, 64, 2, 4, 2, 128)
    source = models.lookup(LLAMA)[0].source
    assert source["library"] == "transformers" and source["class"] == "LlamaForCausalLM"
    assert source["config"] == {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 1000,
                                "positions": 2048}


def test_the_published_sizes_are_the_defaults():
    assert models.lookup("hf:gpt2")[0].source["config"] == {"layers": 12, "hidden": 768, "heads": 12, "ffn": None,
                                                            "vocab": 50257, "positions": 1024}
    assert models.lookup("hf:gpt2")[0].default_seq == 128 and models.default_batch("hf:gpt2") == 8


def test_the_h100_suite_runs_the_grid_of_the_issue():
    from tracekit.manifest.suite_toml import load_suite

    cells = [c.values for c in load_suite(ROOT / "workloads" / "models-h100.toml").cells]
    grid = {(c["model"], c.get("batch"), c.get("seq"), c.get("dtype", "fp32"), c.get("phase", "inference"), c["mode"])
            for c in cells}
    modes = ("eager", "cudagraphs", "default", "reduce-overhead")
    for model in ("torchvision:resnet50", "timm:vit_base_patch16_224"):
        assert all((model, b, None, "fp32", "inference", m) in grid for b in (1, 64) for m in modes)
    for model in ("hf:gpt2", "hf:bert"):
        assert all((model, None, s, "fp32", "inference", m) in grid for s in (128, 512) for m in modes)
    llama = {c["model"] for c in cells if c["model"].startswith("hf:llama")}
    assert len(llama) == 1 and all(c["dtype"] == "bf16" for c in cells if c["model"] in llama)
    assert {c["mode"] for c in cells if c["model"] in llama} == set(modes)
    assert {c["model"] for c in cells if c.get("phase") == "train-step"} == {"hf:gpt2", "torchvision:resnet50"}
    # The Llama built at the suite's sizes (on the meta device: no memory, no weights) has the
    # weights those sizes give by hand, and they are about 1B.
    family = models.lookup(llama.pop())[0]
    with torch.device("meta"):
        module, _ = family.builder(None, 1, seq=16, phase="inference")
    c = family.source["config"]
    expected = llama_parameters(c["vocab"], c["hidden"], c["layers"], c["heads"], c["kv_heads"], c["ffn"])
    assert sum(p.numel() for p in module.parameters()) == expected and 1.0e9 < expected < 1.2e9


@pytest.mark.parametrize("name, cls, names", [
    ("hf:bert?layers=1&hidden=32&heads=2&ffn=64&vocab=100", "BertForMaskedLM", ("input_ids", "labels")),
    ("hf:t5?layers=1&hidden=32&heads=2&ffn=64&vocab=100", "T5ForConditionalGeneration",
     ("input_ids", "decoder_input_ids", "labels")),
    ("hf:vit?layers=1&hidden=32&heads=2&ffn=64", "ViTForImageClassification", ("pixel_values", "labels")),
    ("hf:gpt2?layers=1&hidden=32&heads=2&vocab=100&head=base", "GPT2Model", ("input_ids",)),
])
def test_each_kind_gets_its_head_inputs_and_labels_in_training(name, cls, names):
    seq = None if "vit" in name else 8  # an image model takes no sequence length
    module, inputs = models.build(name, batch=2, seq=seq, phase="train-step")
    assert type(module.model).__name__ == cls and module.names == names
    out = module(*inputs)
    assert (model_loss(out) is not None) == ("labels" in names)
    _, inference = models.build(name, batch=2, seq=seq)
    assert len(inference) == len(names) - ("labels" in names)  # no labels, no loss, outside training


def test_train_step_uses_the_models_own_loss():
    module, inputs = models.build(GPT2, batch=2, seq=16, phase="train-step")
    ids, labels = inputs
    out = make_step(module, module, "train-step")(inputs)
    # GPT-2's own loss: next-token cross-entropy (labels shifted inside the model), computed by hand here.
    by_hand = F.cross_entropy(out.logits[:, :-1].reshape(-1, 1000).float(), labels[:, 1:].reshape(-1))
    assert torch.allclose(_loss(out), by_hand, atol=1e-5) and _loss(out) is out.loss
    assert all(p.grad is not None for p in module.parameters() if p.requires_grad)


def test_model_outputs_are_compared_tensor_by_tensor():
    module, inputs = models.build(GPT2, batch=2, seq=8, phase="train-step")
    with torch.no_grad():
        out = module(*inputs)
    ref = outputs.clone(out)  # a ModelOutput: loss and logits (the KV cache is off)
    assert [t.shape for t in ref] == [torch.Size([]), torch.Size([2, 8, 1000])]
    shifted = outputs.clone({"loss": out.loss, "logits": out.logits + 0.5})
    assert outputs.max_abs_diff(shifted, ref) == pytest.approx(0.5, abs=1e-5)
    assert outputs.max_abs_diff(ref[1:], ref) == float("inf")  # another structure is never "the same"


@pytest.mark.parametrize("name, problem", [
    ("hf:gpt3", "not a transformers model type (close: "),
    ("hf:gpt2?kv_heads=2", "GPT2Config has no num_key_value_heads (option kv_heads)"),
    ("hf:gpt2?layers=two", "layers must be a positive integer, got 'two'"),
    ("hf:gpt2?depth=2", "unknown option depth; valid: layers, hidden, heads, kv_heads, ffn, vocab, positions, head"),
    ("hf:gpt2?head=masked-lm", "transformers has no masked-lm model for gpt2"),
])
def test_bad_names_are_clear_errors(name, problem):
    with pytest.raises(ValueError) as err:
        models.lookup(name)
    assert problem in str(err.value)


def test_a_sequence_over_the_positions_is_a_failed_row(tmp_path):
    manifest = runner.run(RunSpec(GPT2 + "&positions=16", seq=32, **QUICK), tmp_path, log=lambda m: None)
    assert manifest.status == "failed" and manifest.stage == "build"
    assert "seq 32 is over gpt2's 16 positions" in manifest.reason


def test_runs_at_two_sequence_lengths_are_two_workloads(tmp_path):
    from tracebuilder import eager_trace, write_run

    for seq in (128, 512):
        spec = {"model": "hf:gpt2", "mode": "eager", "batch": 8, "dtype": "fp32", "device": "cuda",
                "phase": "inference", "seq": seq}
        write_run(tmp_path / f"hf-gpt2-s{seq}" / "eager", eager_trace(), model="hf:gpt2", spec=spec)
    w = workloads(analyze(tmp_path).runs)
    assert sorted(w["workload"]) == ["hf:gpt2 b8 s128 fp32 cuda", "hf:gpt2 b8 s512 fp32 cuda"]


@pytest.mark.slow
def test_tiny_gpt2_and_llama_run_offline_and_analyze_reads_them(tmp_path):
    # A fresh process with the hub switched off: nothing may be fetched.
    traces = tmp_path / "traces"
    for model, extra in ((GPT2, ["--seq", "32", "--phase", "train-step"]), (LLAMA, [])):
        r = subprocess.run([sys.executable, "-m", "tracekit", "trace", "--model", model, "--out", str(traces),
                            "--warmup", "1", "--iters", "3", "--profile-iters", "2", *extra],
                           capture_output=True, text=True, env=OFFLINE)
        assert r.returncode == 0, r.stderr[-2000:]
    gpt2 = json.loads((traces / "hf-gpt2-layers2-hidden64-heads4-vocab1000-s32-train-step" / "eager" /
                       "run.json").read_text())
    assert gpt2["spec"]["seq"] == 32 and gpt2["loss"] == "model's own" and gpt2["source"]["class"] == \
        "GPT2LMHeadModel"
    runs = analyze(traces).runs.set_index("run")
    assert set(runs.index) == {"hf-gpt2-layers2-hidden64-heads4-vocab1000-s32-train-step/eager",
                               "hf-llama-layers2-hidden64-heads4-kv_heads2-ffn128-vocab1000/eager"}
    assert (runs["status"] == "ok").all() and (runs["iterations"] == 2).all()
    assert sorted(runs["seq"]) == [32, 128]  # llama at the default sequence length


@pytest.mark.slow
def test_a_compiled_hf_model_matches_eager_through_its_model_output(tmp_path):
    manifest = runner.run(RunSpec(LLAMA, "default", batch=2, seq=16, **QUICK), tmp_path, log=lambda m: None)
    assert manifest.status == "ok", manifest.reason
    assert manifest.diff_ok and 0 <= manifest.max_abs_diff < 1e-3


def test_a_spec_is_resolved_as_a_run_records_it():
    """Every path that runs a spec (one process, repeats, a suite's plan) fills its defaults
    alike, so a repeated run's manifest matches the plan's cell (sequence length included)."""
    from tracekit.capture.resolved import resolve

    run = resolve(RunSpec("hf:gpt2", repeats=3), "cpu")
    assert (run.spec.batch, run.spec.seq, run.spec.device, run.spec.repeats) == (8, 128, "cpu", 3)
    assert (run.family.default_batch, run.family.default_seq) == (8, 128) and run.label == "hf-gpt2"

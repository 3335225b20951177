"""Every backend path on the CPU (and, marked gpu, on CUDA)."""

import importlib.util
import json

import pytest
import torch

from tracekit import backends, models
from tracekit.analysis.runs import analyze
from tracekit.capture import runner
from tracekit.manifest.spec import RunSpec
from tracekit.models import Unavailable

QUICK = dict(warmup=1, iters=2, profile_iters=2)


def _run(tmp_path, model, mode, **kw):
    return runner.run(RunSpec(model, mode, **{**QUICK, **kw}), tmp_path, log=lambda m: None)


@pytest.mark.slow
def test_jit(tmp_path):
    m = _run(tmp_path, "transformer", "jit")
    assert m.status == "ok" and m.diff_ok, m.reason
    assert "optimize_for_inference" in m.backend["torchscript"]


@pytest.mark.slow
def test_onnx_runtime_cpu_provider_is_labelled_cpu(tmp_path, monkeypatch, capfd):
    import os
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    m = _run(tmp_path / "traces", "mlp", "onnx")
    assert m.status == "ok", m.reason
    assert os.listdir(tmp_path / "tmp") == []   # the export, its weights and ORT's profile went with the run
    assert "[torch.onnx]" not in capfd.readouterr().out   # the exporter's progress lines
    assert m.device_type == "cpu" and m.backend["execution_provider"] == "CPUExecutionProvider"
    assert m.compile_s >= m.prepare_s > 0 and m.diff_ok
    rows = analyze(tmp_path / "traces").runs
    assert set(rows["source"]) == {"pytorch", "onnxruntime"}
    ort = rows[rows["source"] == "onnxruntime"].iloc[0]
    # ORT's profile is trimmed to the profiled window: as many runs as torch.profiler's steps.
    assert ort["iterations"] == m.profile.iterations and ort["cpu_ops"] > 0 and ort["cpu_op_busy_us"] > 0


@pytest.mark.parametrize("mode", ["cudagraphs", "cudagraphs-compile", "fp8-scaled-mm", "torchao-fp8",
                                  "torchao-fp8-surgical"])
def test_cuda_only_modes_are_skipped_on_the_cpu(tmp_path, mode):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    m = _run(tmp_path, "mlp", mode, device="cpu")
    assert m.status == "skipped" and "needs CUDA" in m.reason
    assert json.loads((tmp_path / "mlp" / mode / "run.json").read_text())["status"] == "skipped"


@pytest.mark.parametrize("mode, package", [("tensorrt", "torch_tensorrt"), ("te-fp8", "transformer_engine")])
def test_missing_packages_are_skipped_with_an_install_hint(tmp_path, mode, package):
    try:
        __import__(package)
        pytest.skip(f"{package} is installed here")
    except ImportError:
        pass
    m = _run(tmp_path, "mlp", mode)
    assert m.status == "skipped"
    assert f"{package} not installed" in m.reason and "pip install" in m.reason


def test_the_list_on_a_cpu_does_not_promise_cuda_graphs(monkeypatch):
    from click.testing import CliRunner

    from tracekit.capture import environment
    from tracekit.cli import main
    rows = {r["mode"]: r for r in backends.listing("cpu")}
    for mode in ("reduce-overhead", "max-autotune"):
        assert rows[mode]["description"].endswith("; CUDA graphs on CUDA)")
        assert rows[mode]["note"] == f"mode={mode} uses CUDA graphs only on CUDA; on cpu it runs without them"
    assert rows["cudagraphs"]["reason"].startswith("needs CUDA") and not rows["cudagraphs"]["available"]
    assert backends.get("reduce-overhead").note("cuda") == ""  # on CUDA: nothing to add
    monkeypatch.setattr(environment, "default_device", lambda: "cpu")
    out = CliRunner().invoke(main, ["backends"]).output.splitlines()
    at = next(i for i, line in enumerate(out) if line.startswith("reduce-overhead "))
    assert out[at + 2].split() == ["here:", "mode=reduce-overhead", "uses", "CUDA", "graphs", "only", "on", "CUDA;",
                                   "on", "cpu", "it", "runs", "without", "them"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the listing where torch sees no GPU")
def test_the_cuda_list_where_torch_sees_no_gpu_says_why_each_cuda_mode_cannot_run():
    rows = {r["mode"]: r for r in backends.listing("cuda")}
    for mode in ("cudagraphs", "fp8-scaled-mm", "torchao-fp8"):
        assert not rows[mode]["available"] and rows[mode]["reason"].endswith("torch sees no GPU here")
    assert rows["eager"]["available"] and rows["reduce-overhead"]["note"] == ""


def test_phase_not_supported_is_skipped(tmp_path):
    m = _run(tmp_path, "mlp", "onnx", phase="train-step")
    assert m.status == "skipped" and "supports phases inference" in m.reason


@pytest.mark.slow
def test_surgical_compiles_rope_and_qkv_reshape_only(tmp_path):
    m = _run(tmp_path, "ropetx2x256x64", "surgical", batch=2)
    assert m.status == "ok", m.reason
    assert m.backend["compiled"] == ["layers.0.qkv_reshape", "layers.0.rope", "layers.1.qkv_reshape",
                                        "layers.1.rope"]
    assert m.diff_ok


def test_surgical_without_a_match_fails_with_the_names(tmp_path):
    m = _run(tmp_path, "mlp", "surgical", compile_only="nothing*")
    assert m.status == "failed" and "no submodule matches" in m.reason and "some names: 0" in m.reason


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["forward", "forward-backward", "train-step"])
def test_training_phases(tmp_path, phase):
    m = _run(tmp_path, "mlp", "eager", phase=phase)
    assert m.status == "ok" and m.label == f"mlp-{phase}" and m.max_abs_diff == 0.0


@pytest.mark.slow
def test_compiled_train_step(tmp_path):
    m = _run(tmp_path, "mlp", "default", phase="train-step")
    assert m.status == "ok" and m.diff_ok, m.reason


def test_a_wrong_result_is_flagged(tmp_path, monkeypatch):
    wrong = backends.Backend("wrong", "test", lambda module, inputs, spec: (lambda *x: module(*x) + 1.0))
    monkeypatch.setitem(backends.BACKENDS, "wrong", wrong)
    m = _run(tmp_path, "mlp", "wrong")
    assert m.status == "ok" and not m.diff_ok and m.max_abs_diff == pytest.approx(1.0, abs=1e-4)
    assert "above the fp32 tolerance" in m.note


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["cudagraphs", "cudagraphs-compile", "fp8-scaled-mm", "torchao-fp8"])
def test_cuda_modes_on_a_gpu(tmp_path, mode):
    if mode == "torchao-fp8" and importlib.util.find_spec("torchao") is None:
        pytest.skip("torchao is not installed on this GPU machine (carry its wheel: .whl/, see benchmarks/dist_probe.sh)")
    m = _run(tmp_path, "vit16x6x384", mode, batch=2)
    assert m.status == "ok" and m.device_type == "cuda" and m.diff_ok, m.reason


def test_rows_name_the_device_that_did_the_work(tmp_path):
    from tracebuilder import TraceBuilder

    folder = tmp_path / "vit16x6x384" / "onnx"
    folder.mkdir(parents=True)
    t = TraceBuilder(device_name=None)
    t.cpu_op("aten::linear", 0, 10)
    t.write(folder / "w.pt.trace.json.gz")
    # ONNX Runtime's CPU provider on a GPU machine: the machine has an H100, the run used the CPU.
    (folder / "run.json").write_text(json.dumps({
        "model": "vit16x6x384", "mode": "onnx", "status": "ok", "device_type": "cpu", "device_name": "AMD EPYC",
        "environment": {"device_name": "NVIDIA H100 80GB HBM3"}, "spec": {"batch": 8, "dtype": "fp32"}}))
    row = analyze(tmp_path).runs.iloc[0]
    assert row["device_type"] == "cpu" and row["device_name"] == "AMD EPYC"


def test_fp8_conversion_leaves_linears_torch_nn_layers_read_directly():
    from torch import nn

    from tracekit.backends.fp8 import convert

    module, _ = models.build("mlp")
    assert convert(module, lambda lin: nn.Identity()) == ["0", "2"]  # 512 -> 10 is not a multiple of 16
    module, _ = models.build("transformer")
    with pytest.raises(Unavailable, match="multiple of 16"):
        convert(module, lambda lin: nn.Identity())  # its linears all sit in TransformerEncoderLayers


def test_torchao_missing_is_skipped_with_an_install_hint(tmp_path, monkeypatch):
    from tracekit.backends import torchao_fp8

    monkeypatch.setattr(torchao_fp8.importlib.util, "find_spec", lambda name: None)
    m = _run(tmp_path, "mlp", "torchao-fp8")
    assert m.status == "skipped" and "torchao not installed" in m.reason and "pip install torchao" in m.reason


def _fp8_here(monkeypatch, mode):
    """Let an FP8 mode run on this machine's CPU (torch's CPU ``_scaled_mm`` computes FP8 GEMMs)."""
    from dataclasses import replace

    monkeypatch.setitem(backends.BACKENDS, mode, replace(backends.get(mode), unavailable=lambda spec: None))


@pytest.mark.slow
@pytest.mark.parametrize("mode, phase", [("torchao-fp8", "inference"), ("torchao-fp8", "train-step"),
                                         ("torchao-fp8-compile", "train-step")])
def test_torchao_fp8_converts_the_eligible_linears_and_runs(tmp_path, monkeypatch, mode, phase):
    pytest.importorskip("torchao")
    _fp8_here(monkeypatch, mode)
    m = _run(tmp_path, "ropetx2x256x64", mode, batch=2, dtype="bf16", phase=phase)
    assert m.status == "ok", m.reason
    module, _ = models.build("ropetx2x256x64")
    linears = [n for n, sub in module.named_modules() if type(sub) is torch.nn.Linear]
    assert m.backend["fp8_linears"] == len(linears) == 8  # qkv, out and the MLP's two, in each of 2 layers
    assert m.backend["torchao"] and "tensorwise" in m.backend["fp8_recipe"]
    assert m.diff_ok and 0 < m.max_abs_diff <= m.diff_tolerance  # FP8 is not bit-equal to bf16


@pytest.mark.slow
def test_torchao_fp8_surgical_compiles_only_the_targets_around_fp8_linears(tmp_path, monkeypatch):
    pytest.importorskip("torchao")
    from torchao.float8.float8_linear import Float8Linear

    from tracekit.backends import torchao_fp8

    _fp8_here(monkeypatch, "torchao-fp8-surgical")
    m = _run(tmp_path, "ropetx1x256x64", "torchao-fp8-surgical", batch=2, dtype="bf16")
    assert m.status == "ok" and m.diff_ok, m.reason
    assert m.backend["compiled"] == ["layers.0.qkv_reshape", "layers.0.rope"] and m.backend["fp8_linears"] == 4
    module, _ = models.build("ropetx1x256x64")
    converted, names, _ = torchao_fp8.to_float8(module)
    assert all(isinstance(converted.get_submodule(n), Float8Linear) for n in names)


@pytest.mark.gpu
@pytest.mark.parametrize("phase", ["forward-backward", "train-step"])
def test_cudagraphs_captures_a_whole_training_iteration(tmp_path, phase):
    m = _run(tmp_path, "mlp", "cudagraphs", phase=phase, device="cuda")
    assert m.status == "ok" and m.diff_ok, m.reason
    assert "whole training step" in m.backend["cuda_graph"]


@pytest.mark.gpu
def test_a_captured_train_step_updates_the_weights_at_each_replay():
    module, inputs = models.build("mlp", batch=4, dtype="fp32", device="cuda")
    before = [p.detach().clone() for p in module.parameters()]
    prepared = backends.get("cudagraphs").prepare(module, inputs, RunSpec("mlp", "cudagraphs", phase="train-step",
                                                                         device="cuda"))
    assert all(torch.equal(p, b) for p, b in zip(module.parameters(), before))  # the capture left eager's weights
    prepared.step(inputs)
    once = [p.detach().clone() for p in module.parameters()]
    prepared.step(inputs)
    assert not all(torch.equal(p, b) for p, b in zip(once, before))
    assert not all(torch.equal(p, o) for p, o in zip(module.parameters(), once))

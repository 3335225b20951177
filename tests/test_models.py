import importlib.util
import os
import subprocess
import sys

import pytest
import torch

from tracekit import models


@pytest.mark.parametrize("name, dim, depth, patch", [
    ("vit16x6x384", 384, 6, 16), ("vit32x12x768", 768, 12, 32), ("vit32x18x1024", 1024, 18, 32)])
def test_vit_names_parse_into_their_sizes(name, dim, depth, patch):
    module, (x,) = models.build(name, batch=1)
    assert x.shape == (1, 3, 224, 224)
    assert module.patch_embed.kernel_size == (patch, patch)
    assert len(module.blocks) == depth
    assert module.blocks[0].attn.heads == dim // 64
    assert module.head.out_features == 1000


@pytest.mark.parametrize("name, in_shape, out_shape", [
    ("mlp", (4, 256), (4, 10)),
    ("conv", (4, 3, 128, 128), (4, 10)),
    ("transformer", (2, 128, 256), (2, 128, 256)),
])
def test_small_models_run_at_their_default_batch(name, in_shape, out_shape):
    module, inputs = models.build(name)
    assert inputs[0].shape == in_shape
    with torch.no_grad():
        assert module(*inputs).shape == out_shape


def test_dtype_and_seed():
    m1, (x1,) = models.build("mlp", dtype="bf16", seed=3)
    m2, (x2,) = models.build("mlp", dtype="bf16", seed=3)
    assert x1.dtype == torch.bfloat16 and next(m1.parameters()).dtype == torch.bfloat16
    assert torch.equal(x1, x2)


def test_unknown_model_lists_the_valid_ones():
    with pytest.raises(models.UnknownModel) as err:
        models.build("resnet5000")
    assert "vit16x6x384" in str(err.value) and "mlp" in str(err.value)


def test_bad_sizes_are_clear_errors():
    with pytest.raises(ValueError, match="multiple of 64"):
        models.build("vit16x6x100")
    with pytest.raises(ValueError, match="dtype"):
        models.build("mlp", dtype="fp8")


@pytest.mark.parametrize("name, problem", [
    ("vit16x6x38", "the width (dim) 38 is not a multiple of 64 (one head per 64)"),
    ("vit15x6x384", "the patch size 15 does not divide the 224-pixel image"),
    ("vit16x0x384", "every size in the name must be at least 1"),
    ("ropetx4x100x2048", "the hidden size 100 is not a multiple of the head size 128"),
    ("softmax0", "every size in the name must be at least 1"),
    ("lm-small-0", "every size in the name must be at least 1"),
])
def test_a_name_that_fits_a_pattern_but_cannot_be_built_is_refused_at_lookup(name, problem):
    """Found before anything runs (issue 17: vit16x6x38 used to fail inside the run, exit 1)."""
    with pytest.raises(models.UnknownModel) as err:
        models.default_batch(name)
    assert str(err.value).startswith(f"model {name!r} cannot be built: {problem} (e.g. ")



def test_triton_softmax_is_a_variant_of_softmax():
    # It computes the op softmax{N}, so reports compare it with the eager run of softmax{N}.
    assert models.cost("softmax1024-triton", 4096, "fp16") == {**models.cost("softmax1024", 4096, "fp16"),
                                                                "op": "softmax1024"}


def test_triton_softmax_without_triton_or_gpu_says_why(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    module, (x,) = models.build("softmax64-triton", 2)
    if importlib.util.find_spec("triton") is None:
        with pytest.raises(models.Unavailable, match="needs triton"):
            module(x)
    else:
        with pytest.raises(models.Unavailable, match="needs a CUDA GPU"):
            module(x)


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")
def test_triton_softmax_matches_torch_in_tritons_interpreter():
    # Triton reads TRITON_INTERPRET when it is imported: a fresh interpreter.
    code = ("import torch; from tracekit.models.ops import triton_softmax as f;"
            "x = torch.randn(5, 300) * 4; y = f(x); r = torch.softmax(x, -1);"
            "assert torch.allclose(y, r, atol=1e-6), (y - r).abs().max();"
            "h = x.half(); assert f(h).dtype == torch.float16;"
            "assert torch.allclose(f(h).float(), torch.softmax(h.float(), -1), atol=1e-3)")
    result = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TRITON_INTERPRET": "1"},
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.gpu
def test_triton_softmax_matches_torch_on_the_gpu():
    from tracekit.models.ops import triton_softmax

    for n in (1000, 16384, 65536):
        x = torch.randn(64, n, device="cuda", dtype=torch.float16)
        assert torch.allclose(triton_softmax(x).float(), torch.softmax(x.float(), -1), atol=1e-3)

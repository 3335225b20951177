"""timm:<name> and torchvision:<name>: the published architectures with random weights; a library
that is not installed is a skipped row with the install command."""

import importlib.util
from pathlib import Path

import pytest
import torch

from tracekit import models
from tracekit.bench import plan
from tracekit.capture import runner
from tracekit.manifest.spec import RunSpec
from tracekit.manifest.suite_toml import load_suite

ROOT = Path(__file__).resolve().parents[2]
HAS = {lib: importlib.util.find_spec(lib) is not None for lib in ("timm", "torchvision")}
# torchvision (and timm, which imports it) has no build for the CPU torch this test machine uses.
WHY = "{} is not installed here (no torchvision build matches the CPU build of torch used in CI)"


@pytest.mark.parametrize("prefix, install", [("timm", "pip install timm"), ("torchvision", "pip install torchvision")])
def test_a_library_not_installed_is_a_skipped_row_with_the_install_command(prefix, install, tmp_path):
    if HAS[prefix]:
        pytest.skip(f"{prefix} is installed here; this checks a machine without it")
    manifest = runner.run(RunSpec(f"{prefix}:resnet50"), tmp_path, log=lambda m: None)
    assert manifest.status == "skipped" and install in manifest.reason
    assert manifest.label == f"{prefix}-resnet50" and manifest.source.library == prefix
    suite = tmp_path / "s.toml"
    suite.write_text(f'name = "s"\n[[grid]]\nmodel = "{prefix}:resnet50"\nmode = ["eager", "default"]\n')
    planned = plan(load_suite(suite), tmp_path / "traces")
    assert all(install in p.problem for p in planned)  # a skipped row each, no process started


@pytest.mark.skipif(not HAS["torchvision"], reason=WHY.format("torchvision"))
def test_torchvision_resnet50_is_the_published_architecture():
    module, (x,) = models.build("torchvision:resnet50", batch=2)
    assert sum(p.numel() for p in module.parameters()) == 25_557_032  # torchvision's documented size
    assert x.shape == (2, 3, 224, 224) and module(x).shape == (2, 1000)
    # The pure-torch ResNet-50 of workloads/resnet50.py has the same weights' shapes.
    ours, _ = models.build(f"{ROOT}/workloads/resnet50.py:resnet50", batch=1)
    assert sorted(p.shape for p in ours.parameters()) == sorted(p.shape for p in module.parameters())
    assert models.build("torchvision:inception_v3", batch=1)[1][0].shape == (1, 3, 299, 299)
    with pytest.raises(models.UnknownModel, match="close: resnet50"):
        models.lookup("torchvision:resnet5")


@pytest.mark.skipif(not HAS["timm"], reason=WHY.format("timm"))
def test_timm_vit_base_is_the_published_architecture():
    module, (x,) = models.build("timm:vit_base_patch16_224", batch=1)
    assert sum(p.numel() for p in module.parameters()) == 86_567_656  # ViT-B/16, 1000 classes
    with torch.no_grad():
        assert x.shape == (1, 3, 224, 224) and module(x).shape == (1, 1000)
    assert models.lookup("timm:vit_base_patch16_224")[0].source["library"] == "timm"
    with pytest.raises(models.UnknownModel, match="has no model"):
        models.lookup("timm:vit_nonexistent_model")


@pytest.mark.slow
@pytest.mark.skipif(not HAS["torchvision"], reason=WHY.format("torchvision"))
def test_a_torchvision_model_runs_a_train_step(tmp_path):
    manifest = runner.run(RunSpec("torchvision:resnet18", batch=2, phase="train-step", warmup=1, iters=2,
                                  profile_iters=1), tmp_path, log=lambda m: None)
    assert manifest.status == "ok" and manifest.loss.startswith("synthetic")
    assert manifest.source.version and manifest.parameters == 11_689_512

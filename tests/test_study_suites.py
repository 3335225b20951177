"""The quick variant of each study suite, run end to end on this machine by `tracekit bench`."""

import io
import json

import pytest
import torch
from rich.console import Console

from tracekit import bench, models
from tracekit.manifest.suite_toml import load_suite


def _run(study, tmp_path):
    suite = load_suite(f"workloads/{study}-quick.toml")
    (result,) = bench.bench([suite], tmp_path / "traces", tmp_path / "reports", console=Console(file=io.StringIO()))
    assert set(result.manifests) == {p.name for p in result.planned}  # every cell is a row
    assert all(m.reason for m in result.manifests.values() if m.status != "ok")
    report = (result.report_dir / "report.md").read_text()
    assert "## Results" in report and "## What the traces show" in report and "a trimmed variant" in report
    return result, report


def _statuses(result) -> dict[str, str]:
    return {name: m.status for name, m in result.manifests.items()}


@pytest.mark.slow
def test_compile_modes_quick(tmp_path):
    result, report = _run("compile-modes", tmp_path)
    assert set(_statuses(result).values()) == {"ok"}, result.manifests
    assert "## Published claims, checked" in report and "kernels executed per iteration" in report
    assert result.analysis.runs.set_index("run").loc["vit32x1x64-b1/default", "max_abs_diff"] < 1e-4


@pytest.mark.slow
def test_backends_quick(tmp_path):
    result, _ = _run("backends", tmp_path)
    for name, m in result.manifests.items():
        if name.startswith("mlp-cuda/") and not torch.cuda.is_available():
            assert m.status == "skipped" and "CUDA" in m.reason
        elif m.mode == "tensorrt":
            assert m.status == "skipped" and "torch_tensorrt" in m.reason
        else:
            assert m.status == "ok", (name, m.reason)


@pytest.mark.slow
def test_ops_quick(tmp_path):
    result, report = _run("ops", tmp_path)
    for name, m in result.manifests.items():
        if "triton" in name:
            assert m.status == "ok" or "triton" in m.reason or "CUDA GPU" in m.reason, m.reason
            continue
        assert m.status == "ok", (name, m.reason)
        spec = m.spec
        assert m.flop_per_iter == models.cost(spec.model, spec.batch, spec.dtype)["flop"]
    runs = {r["run"]: r for r in json.loads((result.report_dir / "runs.json").read_text())["runs"]}
    softmax = runs["softmax256-b64-fp16/eager"]
    seconds = softmax["latency_median_ms"] / 1e3
    assert softmax["op"] == "softmax256" and softmax["achieved_GBps"] == pytest.approx(2 * 64 * 256 * 2 / seconds / 1e9)
    assert "## Achieved rates" in report and "## Speedup over eager, ranked" in report


@pytest.mark.slow
def test_lm_quick(tmp_path):
    result, _ = _run("lm", tmp_path)
    assert set(_statuses(result).values()) == {"ok"}, result.manifests
    assert {m.spec.phase for m in result.manifests.values()} == {"forward", "forward-backward", "train-step"}


@pytest.mark.slow
def test_surgical_quick(tmp_path):
    result, report = _run("surgical", tmp_path)
    assert set(_statuses(result).values()) == {"ok"}, result.manifests
    assert "ropetx1x256x64-b1/surgical" in report


@pytest.mark.slow
def test_decode_quick(tmp_path):
    """Issue 41's quick CPU suite: tiny decoder LMs, eager and default, through the bench; every cell ok, its
    report's per-token table one row per cell with the tokens/s of its run.json."""
    result, report = _run("decode", tmp_path)
    assert set(_statuses(result).values()) == {"ok"}, result.manifests
    table = report[report.index("## Decode: per token"):].split("\n\n")[2].splitlines()[2:]
    assert len(table) == len(result.manifests) == 4
    for name, m in result.manifests.items():
        row = next(line for line in table if line.startswith(f"| {name} |"))
        assert f"| {m.decode.tokens_per_s.median:,.0f} |" in row and m.diff_ok

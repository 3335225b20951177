"""An eager run's check of its step's capture path (tracekit.capture.capture_path): the aten ops of one
step as it runs against one while torch.cuda.is_current_stream_capturing() says True."""

import json

import pytest
import torch

from tracekit.capture.capture_path import check


def _capturing() -> bool:
    """What Hugging Face transformers asks (``is_cuda_stream_capturing``): False where CUDA cannot say."""
    try:
        return torch.cuda.is_current_stream_capturing()
    except Exception:  # noqa: BLE001 - a CPU build of torch has no CUDA to ask
        return False


class Asks(torch.nn.Module):
    """x * 2 while captured, else x + 1 then .item() (a read a capture cannot make)."""

    def forward(self, x):
        if _capturing():
            return x * 2
        y = x + 1
        y.sum().item()
        return y


class Refuses(torch.nn.Module):
    """Raises while captured, as torch.optim does for a step that is not capturable."""

    def forward(self, x):
        if _capturing():
            raise RuntimeError("Attempting CUDA graph capture of step() but capturable is False\nmore")
        return x + 1


def test_a_step_that_asks_differs_by_the_ops_it_runs():
    x = torch.ones(4)
    found = check(lambda: Asks()(x), "cpu")
    assert found == {"differs": True, "added": {"aten::mul": 1},
                     "removed": {"aten::add": 1, "aten::sum": 1, "aten::_local_scalar_dense": 1},
                     "calls_added": 1, "calls_removed": 3, "error": None}
    assert check(lambda: torch.nn.Linear(4, 2)(x), "cpu") == {
        "differs": False, "added": {}, "removed": {}, "calls_added": 0, "calls_removed": 0, "error": None}
    assert not _capturing()   # the patch is gone after the check


def test_a_step_that_fails_while_captured_is_that_error_in_one_line():
    found = check(lambda: Refuses()(torch.ones(2)), "cpu")
    assert found["differs"] and found["error"] == ("RuntimeError: Attempting CUDA graph capture of step() but "
                                                   "capturable is False")
    with pytest.raises(ZeroDivisionError):   # the plain step's failure is the caller's
        check(lambda: 1 / 0, "cpu")


def test_transformers_keeps_an_encoders_ops_and_builds_a_decoders_mask():
    """With the transformers this machine has (5.24 when written): bert given no mask runs the same ops, a
    Mistral-style decoder builds its causal mask instead of reading the mask it was given."""
    pytest.importorskip("transformers")
    from tracekit.models import build

    bert, inputs = build("hf:bert?layers=1", batch=1, seq=16)
    with torch.no_grad():
        assert not check(lambda: bert(*inputs), "cpu")["differs"]
        mistral, inputs = build("hf:mistral?layers=1&hidden=64&heads=4&kv_heads=2&ffn=128", batch=1, seq=16)
        found = check(lambda: mistral(*inputs), "cpu")
    assert found["differs"] and found["removed"].get("aten::_local_scalar_dense") == 1
    assert {"aten::arange", "aten::index", "aten::bitwise_and"} <= set(found["added"])


def test_an_eager_run_records_its_capture_path_and_a_compiled_one_does_not(tmp_path):
    from tracekit.capture import runner
    from tracekit.manifest.spec import RunSpec

    counts = dict(device="cpu", warmup=0, iters=1, profile_iters=1)
    eager = runner.run(RunSpec("mlp", **counts), tmp_path, log=lambda m: None)
    assert eager.status == "ok" and eager.capture_path.differs is False
    on_disk = json.loads((tmp_path / "mlp" / "eager" / "run.json").read_text())
    assert on_disk["capture_path"]["differs"] is False and on_disk["manifest_version"] == 8
    script = runner.run(RunSpec("mlp", mode="jit", **counts), tmp_path, log=lambda m: None)
    assert script.status == "ok" and script.capture_path is None


def test_a_run_whose_path_differs_traces_its_steps_as_if_captured_beside_its_trace(tmp_path):
    """The capture path's trace: beside the run's trace, its steps marked as the run's are, and no run's trace."""
    pytest.importorskip("transformers")
    from tracekit.capture import runner
    from tracekit.manifest.spec import RunSpec
    from tracekit.trace import load
    from tracekit.trace.discover import discover

    spec = RunSpec("hf:mistral?layers=1&hidden=64&heads=4&kv_heads=2&ffn=128", device="cpu", batch=1, seq=16,
                   warmup=0, iters=1, profile_iters=3)
    run = runner.run(spec, tmp_path, log=lambda m: None)
    assert run.status == "ok" and run.capture_path.differs and run.capture_path.trace.endswith(
        ".capture-path.pt.trace.json.gz")
    [found] = discover(tmp_path)
    path = tmp_path / found.name / run.capture_path.trace
    assert len(found.traces) == 1 and path.is_file() and path not in found.traces
    ops = load(path).cpu_ops["name"].astype(str)
    assert ops.str.startswith("ProfilerStep#").sum() == 3 and (ops == "aten::bitwise_and").sum() >= 3

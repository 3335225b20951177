"""The one entry point of the processes tracekit starts (python -m tracekit.capture '<json>')."""

import importlib

import pytest

from tracekit.capture.child import ChildJob
from tracekit.manifest.spec import RunSpec

entry = importlib.import_module("tracekit.capture.__main__")


def test_a_job_carries_every_field_of_its_spec():
    spec = RunSpec("hf:gpt2", "surgical", batch=2, dtype="bf16", device="cuda:1", phase="train-step",
                   compile_only="blocks.*", warmup=2, iters=7, profile_iters=3, seed=5, seq=512, threads=4,
                   repeats=1, nproc=2, parallel="fsdp")
    job = ChildJob("rank", spec, "/traces/x", parent=123, backend="nccl")
    assert ChildJob.from_json(job.to_json()) == job
    assert job.command()[1:3] == ["-m", "tracekit.capture"]
    assert job.command(["torchrun", "--nproc-per-node", "2"])[:5] == ["torchrun", "--nproc-per-node", "2", "-m",
                                                                     "tracekit.capture"]


@pytest.mark.parametrize("text", ['{"task": "dance", "spec": {"model": "mlp"}, "out": "x"}', "[1]", "{nope",
                                  '{"task": "run", "spec": {"model": "mlp", "warp": 9}, "out": "x"}',
                                  '{"task": "run", "out": "x"}'])
def test_what_is_not_a_job_is_exit_code_2(text, capsys):
    assert entry.main([text]) == 2
    assert capsys.readouterr().err.startswith("error: python -m tracekit.capture:")


def test_an_invalid_spec_is_exit_code_2(tmp_path, capsys):
    assert entry.main([ChildJob("run", RunSpec("mlp", dtype="fp8"), str(tmp_path)).to_json()]) == 2
    assert "unknown dtype 'fp8'" in capsys.readouterr().err and not any(tmp_path.iterdir())

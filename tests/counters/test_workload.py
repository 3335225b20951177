"""The workload ncu profiles (tracekit.counters.workload): the one capture's stages up to the warm-up,
then the measured iterations; started as every child process is, with the whole spec."""

import json
import subprocess

import pytest
import torch

from tracekit.capture.child import ChildJob
from tracekit.capture.resolved import ResolvedRun
from tracekit.counters import workload
from tracekit.manifest.spec import RunSpec


def test_first_call_warmup_then_measured_iterations(tmp_path, monkeypatch):
    calls = []

    class Counting(torch.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x
    monkeypatch.setattr(ResolvedRun, "build", lambda self: (Counting(), (torch.zeros(1),)))
    m = workload.run(ChildJob("counters", RunSpec(model="mlp", device="cpu", warmup=3, profile_iters=2), str(tmp_path)))
    assert len(calls) == 1 + 1 + 3 + 2   # the eager reference output, the first call, warm-up, measured (no NVTX here)
    assert m.status == "ok" and m.profile.iterations == 2 and m.first_call_s > 0 and m.max_abs_diff == 0
    assert json.loads((tmp_path / "workload.json").read_text())["status"] == "ok"


def test_a_failure_is_the_workloads_status(tmp_path, monkeypatch):
    def build(self):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    monkeypatch.setattr(ResolvedRun, "build", build)
    m = workload.run(ChildJob("counters", RunSpec(model="mlp", device="cpu"), str(tmp_path)))
    on_disk = json.loads((tmp_path / "workload.json").read_text())
    assert (m.status, on_disk["status"], on_disk["stage"]) == ("oom", "oom", "build")


@pytest.mark.slow
def test_entry_point_writes_the_device_info(tmp_path):
    job = ChildJob("counters", RunSpec("mlp", device="cpu", warmup=1, profile_iters=1), str(tmp_path))
    proc = subprocess.run(job.command(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "workload.json").read_text())
    assert data["spec"]["model"] == "mlp" and data["environment"]["device_name"]
    bad = ChildJob("counters", RunSpec("mlp", "turbo"), str(tmp_path / "bad"))
    proc = subprocess.run(bad.command(), capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown mode 'turbo'" in proc.stderr and "Traceback" not in proc.stderr

import json
import subprocess
import sys

import pytest
import torch

from tracekit.counters import workload
from tracekit.spec import RunSpec


def test_first_call_warmup_then_measured_iterations(monkeypatch):
    calls = []

    class Counting(torch.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x
    monkeypatch.setattr(workload.models, "build", lambda *a, **k: (Counting(), (torch.zeros(1),)))
    workload.run(RunSpec(model="mlp", device="cpu", warmup=3), iters=2)   # no NVTX on the CPU
    assert len(calls) == 1 + 3 + 2


@pytest.mark.slow
def test_entry_point_writes_the_device_info(tmp_path):
    info = tmp_path / "w.json"
    proc = subprocess.run([sys.executable, "-m", "tracekit.counters.workload", "--model", "mlp", "--device", "cpu",
                           "--iters", "1", "--warmup", "1", "--info", str(info)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(info.read_text())
    assert data["spec"]["model"] == "mlp" and data["environment"]["device_name"]
    proc = subprocess.run([sys.executable, "-m", "tracekit.counters.workload", "--model", "mlp", "--mode", "turbo"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "unknown mode 'turbo'" in proc.stderr and "Traceback" not in proc.stderr

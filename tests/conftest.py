import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the helpers: tracebuilder, owndata

from owndata import FIXTURES  # noqa: E402


@pytest.fixture
def real_trace(request):
    """A resolver of real trace names: ``own:<run>`` is our trace of that run in tests/data
    (tests/owndata.py: always there); any other name a path under the shared fixtures
    (the test skips, saying why, where they are absent)."""
    from owndata import h100_trace

    def resolve(name: str) -> Path:
        if name.startswith("own:"):
            return h100_trace(name.removeprefix("own:"))
        return request.getfixturevalue("fixtures") / name
    return resolve


@pytest.fixture
def fixtures() -> Path:
    """Other projects' real traces (HolisticTraceAnalysis' test traces of AMD, A100 and
    multi-rank NCCL runs, CPU-only and Triton traces, ...), kept outside the repository.
    Tests of our own traces use tests/data (tests/owndata.py) and never skip."""
    if not FIXTURES.is_dir():
        pytest.skip(f"needs other projects' real traces (HolisticTraceAnalysis' test traces: AMD MI250, A100, "
                    f"two NCCL ranks, CPU-only, Triton) at {FIXTURES}, which is not part of a clone: "
                    "set TRACEKIT_FIXTURES to a folder holding hta/ (README.md, 'Tests')")
    return FIXTURES


def pytest_collection_modifyitems(config, items):
    try:
        import torch
        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def cpu_machine_unless_gpu(request, monkeypatch):
    """A test not marked ``gpu`` runs as on a machine without one, wherever it runs: torch sees
    no GPU in the test's process and its child processes (the default device, folder names
    like ``mlp`` rather than ``mlp-cpu``, CUDA-event timing are then those of CI's machine)."""
    if "gpu" in request.keywords:
        return
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    try:
        import torch
    except ImportError:
        return
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def study(tmp_path) -> Path:
    """Two runs of one workload in folders whose names say nothing: eager (launch-bound,
    latency p50 0.08 ms) and reduce-overhead (one graph launch per iteration, 0.04 ms)."""
    from tracebuilder import eager_trace, graph_trace, write_run

    write_run(tmp_path / "a" / "first", eager_trace(), mode="eager", latency_ms=(0.08, 0.07, 0.09))
    write_run(tmp_path / "b" / "second", graph_trace(), mode="reduce-overhead", latency_ms=(0.04, 0.035, 0.05))
    return tmp_path

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the tracebuilder helper

ROOT = Path(__file__).resolve().parents[1]
# Real traces shared beside the checkout (../shared/fixtures); TRACEKIT_FIXTURES overrides.
FIXTURES = Path(os.environ.get("TRACEKIT_FIXTURES", ROOT.parent / "shared" / "fixtures"))


@pytest.fixture
def fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"real trace fixtures not found at {FIXTURES} (set TRACEKIT_FIXTURES)")
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


@pytest.fixture
def study(tmp_path) -> Path:
    """Two runs of one workload in folders whose names say nothing: eager (launch-bound,
    latency p50 0.08 ms) and reduce-overhead (one graph launch per iteration, 0.04 ms)."""
    from tracebuilder import eager_trace, graph_trace, write_run

    write_run(tmp_path / "a" / "first", eager_trace(), mode="eager", latency_ms=(0.08, 0.07, 0.09))
    write_run(tmp_path / "b" / "second", graph_trace(), mode="reduce-overhead", latency_ms=(0.04, 0.035, 0.05))
    return tmp_path

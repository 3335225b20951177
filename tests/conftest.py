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

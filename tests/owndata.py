"""The project's own traces, committed for tests (tests/data/README.md says how each was made).

Tests that need real traces from other projects (HolisticTraceAnalysis' multi-vendor
traces, ...) read them from ``../shared/fixtures`` instead, through conftest's
``fixtures``, and skip saying so where that folder is absent.
"""

import os
from pathlib import Path

# Other projects' real traces, shared beside the checkout (../shared/fixtures); TRACEKIT_FIXTURES overrides.
FIXTURES = Path(os.environ.get("TRACEKIT_FIXTURES", Path(__file__).resolve().parents[2] / "shared" / "fixtures"))
DATA = Path(__file__).resolve().parent / "data"
# vit16x6x384 at batch 8 and 1, fp32 inference, eager / default / reduce-overhead, on an H100:
# <label>/<mode>/run.json + one Kineto trace each (10 ProfilerStep iterations).
H100_STUDY = DATA / "h100" / "vit-study"
H100_RUNS = ("vit16x6x384/eager", "vit16x6x384/default", "vit16x6x384/reduce-overhead",
             "vit16x6x384-b1/eager", "vit16x6x384-b1/default", "vit16x6x384-b1/reduce-overhead")
# vit16x6x384 batch 8 on the CPU: eager, default, and onnx (ONNX Runtime's CPU provider: its torch
# trace and ORT's own profile); 3 profiled iterations each.
CPU_RUNS = DATA / "cpu"
CPU_ONNX = CPU_RUNS / "vit16x6x384" / "onnx"


def h100_trace(run: str) -> Path:
    """The Kineto trace of one of ``H100_RUNS``."""
    return next((H100_STUDY / run).glob("*.pt.trace.json.gz"))

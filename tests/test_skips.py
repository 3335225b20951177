"""Without ../shared/fixtures (a fresh clone), only the tests of other projects' traces skip,
and their skip says what they need; the tests of our own traces (tests/data) run."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_without_shared_fixtures_only_other_projects_traces_skip_and_say_what_they_need(tmp_path):
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                        "tests/analysis/test_idle.py", "tests/analysis/test_kernels.py"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "TRACEKIT_FIXTURES": str(tmp_path / "absent")})
    assert r.returncode == 0, r.stdout[-3000:]
    skips = [line for line in r.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips and all("needs other projects' real traces (HolisticTraceAnalysis' test traces" in s
                         and "set TRACEKIT_FIXTURES" in s for s in skips)
    # our own H100 traces: the host-wait acceptance and the kernel classes of all six runs
    assert " passed" in r.stdout.splitlines()[-1] and "test_real_eager_vit_is_mostly_host_wait" not in "".join(skips)

"""benchmarks/lease_call.sh and lease_unpack.sh: one resumable call of a suite on a lent machine,
and its results back here. Run on the CPU with a tiny suite of two cells (no GPU, no nvidia-smi)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITE = """name = "tiny"
description = "two tiny ops on the CPU"
[defaults]
device = "cpu"
warmup = 1
iters = 3
profile_iters = 2
[[grid]]
model = "matmul64"
mode = "eager"
[[grid]]
model = "softmax256"
batch = 8
mode = "eager"
"""

pytestmark = pytest.mark.skipif(not (shutil.which("xz") and shutil.which("split")), reason="needs xz and split")


def _call(repo: Path, out: Path, machine: str = "machine1", hard_s: int = 240, *bench_options: str
          ) -> subprocess.CompletedProcess:
    """One call on a machine named by ``machine``: its LEASE_DIR outlasts the call, as on a warm machine."""
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "PYTHONPATH": str(ROOT),
           "LEASE_DIR": str(repo.parent / machine)}
    return subprocess.run(["bash", str(ROOT / "benchmarks/lease_call.sh"), "tiny", "3", str(hard_s), *bench_options],
                          cwd=repo,
                          env=env, capture_output=True, text=True, timeout=hard_s + 60)


def _unpack(repo: Path, out: Path) -> str:
    r = subprocess.run(["bash", str(ROOT / "benchmarks/lease_unpack.sh"), str(out), "tiny"], cwd=repo,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.slow
def test_a_call_packs_its_cells_and_the_next_resumes_from_the_unpacked_run_json(tmp_path):
    repo = tmp_path / "repo"
    (repo / "workloads").mkdir(parents=True)
    (repo / "workloads/tiny.toml").write_text(SUITE)

    first = _call(repo, tmp_path / "out1")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    parts = sorted((tmp_path / "out1").glob("cells.tar.xz.*"))
    assert parts and all(p.stat().st_size <= 15 << 20 for p in parts)
    # a call at once on the same warm machine resumes from its cells, before anything is unpacked here
    warm = _call(repo, tmp_path / "out-warm")
    assert warm.returncode == 0, warm.stderr[-2000:]
    assert "0 cells run" in warm.stdout
    assert not list((tmp_path / "machine1").rglob("*.pt.trace.json.gz"))  # packed traces leave the machine
    assert _unpack(repo, tmp_path / "out1").strip() == "2 cells done"
    done = sorted((repo / "reports/h100/tiny/traces").rglob("run.json"))
    assert [p.parent.relative_to(repo / "reports/h100/tiny/traces").as_posix() for p in done] == [
        "matmul64/eager", "softmax256-b8/eager"]
    assert {json.loads(p.read_text())["status"] for p in done} == {"ok"}
    traces = sorted((repo / ".gpu/full/tiny").rglob("*.pt.trace.json.gz"))
    assert len(traces) == 2  # gzipped again here
    # the report is written here from the unpacked cells
    r = subprocess.run([sys.executable, "-m", "tracekit", "bench", "workloads/tiny.toml", "--traces", ".gpu/full",
                        "--reports", "reports/h100", "--report-only"], cwd=repo, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Cells: 2 ok." in (repo / "reports/h100/tiny/report.md").read_text()

    # the next call (a fresh machine: only the committed run.json files travel) runs nothing
    shutil.rmtree(repo / ".gpu")
    second = _call(repo, tmp_path / "out2", machine="machine2")
    assert second.returncode == 0, second.stderr[-2000:]
    assert "0 cells run" in second.stdout
    # options after the hard limit go to the bench: one cell measured again, packed and unpacked over the old
    old = (repo / "reports/h100/tiny/traces/matmul64/eager/run.json").read_bytes()
    third = _call(repo, tmp_path / "out3", "machine2", 240, "--force", "--only", "matmul64/*")
    assert third.returncode == 0, third.stderr[-2000:]
    assert "1 cells run" in third.stdout
    _unpack(repo, tmp_path / "out1")  # the old traces are here when the new ones come
    assert _unpack(repo, tmp_path / "out3").strip() == "2 cells done"
    assert (repo / "reports/h100/tiny/traces/matmul64/eager/run.json").read_bytes() != old
    new = list((repo / ".gpu/full/tiny/matmul64/eager").glob("*.pt.trace.json.gz"))
    assert len(new) == 1  # replaced, not added to: a folder's traces are one run


@pytest.mark.slow
def test_a_call_stopped_at_its_hard_limit_still_packs(tmp_path):
    repo = tmp_path / "repo"
    (repo / "workloads").mkdir(parents=True)
    (repo / "workloads/tiny.toml").write_text(SUITE)
    out = tmp_path / "out1"
    r = _call(repo, out, hard_s=1)  # interrupted during start-up: nothing done, still an archive
    assert r.returncode == 0, r.stderr[-2000:]
    assert _unpack(repo, out).strip() == "0 cells done"

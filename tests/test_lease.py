"""benchmarks/lease_call.sh and lease_unpack.sh: one resumable call of a suite on a lent machine,
and its results back here. Run on the CPU with a tiny suite of two cells (no GPU, no nvidia-smi)."""

import gzip
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
                       env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _packed(repo: Path) -> dict[str, dict]:
    """The suite's packed manifests, cell -> run.json (benchmarks/packed_manifests.py's format, read here)."""
    with gzip.open(repo / "reports/h100/tiny/manifests.jsonl.gz", "rt") as f:
        return {row["cell"]: row["manifest"] for row in map(json.loads, f)}


def _unattributed(run_json: Path) -> dict:
    """A cell's run.json as packed: without its attribution (benchmarks/packed_manifests.py)."""
    manifest = json.loads(run_json.read_text())
    assert "attribution" in manifest
    return {k: v for k, v in manifest.items() if k != "attribution"}


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
    assert _unpack(repo, tmp_path / "out1").startswith("2 cells done")
    done = _packed(repo)  # the manifests of the suite's cells, packed into one file, none left per cell
    assert sorted(done) == ["matmul64/eager", "softmax256-b8/eager"] and not (repo / "reports/h100/tiny/traces").exists()
    assert {m["status"] for m in done.values()} == {"ok"}
    assert done["matmul64/eager"] == _unattributed(repo / ".gpu/full/tiny/matmul64/eager/run.json")
    traces = sorted((repo / ".gpu/full/tiny").rglob("*.pt.trace.json.gz"))
    assert len(traces) == 2  # gzipped again here
    # the report is written here from the unpacked cells
    r = subprocess.run([sys.executable, "-m", "tracekit", "bench", "workloads/tiny.toml", "--traces", ".gpu/full",
                        "--reports", "reports/h100", "--report-only"], cwd=repo, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Cells: 2 ok." in (repo / "reports/h100/tiny/report.md").read_text()

    # the next call (a fresh machine: only the committed packed manifests travel) runs nothing
    shutil.rmtree(repo / ".gpu")
    second = _call(repo, tmp_path / "out2", machine="machine2")
    assert second.returncode == 0, second.stderr[-2000:]
    assert "2 cells unpacked" in second.stdout and "0 cells run" in second.stdout
    # options after the hard limit go to the bench: one cell measured again, packed and unpacked over the old
    third = _call(repo, tmp_path / "out3", "machine2", 240, "--force", "--only", "matmul64/*")
    assert third.returncode == 0, third.stderr[-2000:]
    assert "1 cells run" in third.stdout
    _unpack(repo, tmp_path / "out1")  # the old traces are here when the new ones come
    assert _unpack(repo, tmp_path / "out3").startswith("2 cells done")
    forced = _packed(repo)  # the forced cell's manifest replaced in the packed file, the other one kept
    assert sorted(forced) == sorted(done) and forced["softmax256-b8/eager"] == done["softmax256-b8/eager"]
    assert forced["matmul64/eager"]["started_at"] != done["matmul64/eager"]["started_at"]
    assert forced["matmul64/eager"] == _unattributed(repo / ".gpu/full/tiny/matmul64/eager/run.json")
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
    assert _unpack(repo, out).startswith("0 cells done")
    assert not (repo / "reports/h100/tiny/manifests.jsonl.gz").exists()


def _packed_manifests(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks/packed_manifests.py"), *args], capture_output=True,
                          text=True, timeout=60)


def test_packed_manifests_keep_finished_cells_replace_them_and_unpack_as_written(tmp_path):
    runs, packed = tmp_path / "runs", tmp_path / "suite" / "manifests.jsonl.gz"
    cells = {"mlp/eager": {"spec": {"model": "mlp"}, "status": "ok", "latency_ms": {"median": 0.1}},
             "mlp/cudagraphs": {"spec": {"model": "mlp"}, "status": "ok", "attribution": {"captures": [[1, 2]]}},
             "mlp/default": {"spec": {"model": "mlp", "mode": "default"}, "status": "interrupted"},
             "conv/eager": {"spec": {"model": "conv"}, "status": "failed", "reason": "boom µs"}}
    for cell, manifest in cells.items():
        (runs / cell).mkdir(parents=True)
        (runs / cell / "run.json").write_text(json.dumps(manifest, indent=1))
    r = _packed_manifests("add", "--finished", str(packed), str(runs))
    assert r.returncode == 0 and r.stdout.startswith("3 cells done (3 added"), r.stderr
    first = packed.read_bytes()
    graphs = cells.pop("mlp/cudagraphs")   # packed without its attribution (read beside a trace only)
    with gzip.open(packed, "rt") as f:  # one line a cell, sorted by cell, the cell's name first
        assert [json.loads(line) for line in f] == [
            {"cell": "conv/eager", "manifest": cells["conv/eager"]},
            {"cell": "mlp/cudagraphs", "manifest": {k: v for k, v in graphs.items() if k != "attribution"}},
            {"cell": "mlp/eager", "manifest": cells["mlp/eager"]}]
    # the same cells give the same bytes (no timestamp in the gzip header)
    packed.unlink()
    _packed_manifests("add", "--finished", str(packed), str(runs))
    assert packed.read_bytes() == first
    # a cell measured again replaces its line; the others stay
    again = {**cells["mlp/eager"], "latency_ms": {"median": 0.2}}
    (tmp_path / "new/mlp/eager").mkdir(parents=True)
    (tmp_path / "new/mlp/eager/run.json").write_text(json.dumps(again))
    assert _packed_manifests("add", str(packed), str(tmp_path / "new")).stdout.startswith("3 cells done (1 added")
    r = _packed_manifests("unpack", str(packed), str(tmp_path / "lease"))
    assert r.stdout.startswith("3 cells unpacked")
    assert sorted(p.parent.relative_to(tmp_path / "lease").as_posix()
                  for p in (tmp_path / "lease").rglob("run.json")) == ["conv/eager", "mlp/cudagraphs", "mlp/eager"]
    assert json.loads((tmp_path / "lease/mlp/eager/run.json").read_text()) == again
    assert json.loads((tmp_path / "lease/conv/eager/run.json").read_text()) == cells["conv/eager"]
    assert json.loads(_packed_manifests("show", str(packed), "conv/eager").stdout) == cells["conv/eager"]
    r = _packed_manifests("show", str(packed), "mlp/default")
    assert r.returncode == 2 and r.stderr.strip() == f"error: {packed}: no cell 'mlp/default'"


def test_a_file_that_is_not_packed_manifests_is_a_one_line_error(tmp_path):
    bad = tmp_path / "manifests.jsonl.gz"
    bad.write_text("not gzip")
    for args in (["unpack", str(bad), str(tmp_path / "runs")], ["show", str(bad), "mlp/eager"]):
        r = _packed_manifests(*args)
        assert r.returncode == 2 and r.stdout == "" and len(r.stderr.splitlines()) == 1, r.stderr
        assert r.stderr.startswith(f"error: {bad}: not a packed manifests file (BadGzipFile")


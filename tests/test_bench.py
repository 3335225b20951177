import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tracebuilder import eager_trace, graph_trace, write_run

from tracekit import bench
from tracekit.io import write_json
from tracekit.manifest import Manifest
from tracekit.manifest.suite_toml import SuiteError, load_suite

ROOT = Path(__file__).resolve().parents[1]


def _suite(tmp_path, text: str, name: str = "s"):
    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\n' + text)
    return load_suite(path)


def _finish(traces, suite, p, status="ok", **extra):
    """Write the run.json a finished run of ``p`` would leave."""
    write_json(bench.suite_traces(traces, suite) / p.name / "run.json",
               {"spec": p.spec.to_dict(), "status": status, **extra})


def test_done_means_a_final_status_for_the_same_spec(tmp_path):
    suite = _suite(tmp_path, '[[grid]]\nmodel = "mlp"\nmode = ["eager", "default"]\niters = 3\n')
    eager, default = bench.plan(suite, tmp_path)
    assert (eager.name, default.name) == ("mlp/eager", "mlp/default")
    assert eager.spec.batch == 4 and eager.spec.device == "cpu" and eager.to_run
    _finish(tmp_path, suite, eager, "oom")
    _finish(tmp_path, suite, default, "running")
    eager, default = bench.plan(suite, tmp_path)
    assert eager.done and not eager.to_run and not default.done
    # The same folder with another spec (more iterations) is not this cell's result.
    other = _suite(tmp_path, '[[grid]]\nmodel = "mlp"\nmode = "eager"\niters = 5\n')
    assert not bench.plan(other, tmp_path)[0].done
    assert not bench.plan(suite, tmp_path, force=True)[0].done


def test_only_selects_by_run_name(tmp_path):
    suite = _suite(tmp_path, '[[grid]]\nmodel = ["mlp", "conv"]\nmode = ["eager", "default"]\n')
    picked = [p.name for p in bench.plan(suite, tmp_path, only=("*/eager", "conv/*")) if p.selected]
    assert picked == ["mlp/eager", "conv/eager", "conv/default"]


def test_cells_writing_the_same_folder_are_an_error(tmp_path):
    same = _suite(tmp_path, '[[grid]]\nmodel = "mlp"\n[[grid]]\nmodel = "mlp"\nmode = "eager"\nbatch = 4\n')
    assert [p.name for p in bench.plan(same, tmp_path)] == ["mlp/eager"]  # one run, spelled twice
    clash = _suite(tmp_path, '[[grid]]\nmodel = "mlp"\niters = [3, 5]\n')
    with pytest.raises(SuiteError, match="two different cells write mlp/eager"):
        bench.plan(clash, tmp_path)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only answer")
def test_cells_that_cannot_run_here_are_skipped_rows_written_without_a_process(tmp_path):
    suite = _suite(tmp_path, '[[grid]]\nmodel = ["mlp", "nosuchmodel"]\nmode = ["nosuchmode"]\n'
                             '[[grid]]\nmodel = "mlp"\ndevice = "cuda"\n'
                             '[[grid]]\nmodel = "mlp"\nphasee = "forward"\n'
                             '[[grid]]\nmodel = "vit16x6x38"\n[[grid]]\nmodel = "mlp"\nbatch = 0\n')
    planned = bench.plan(suite, tmp_path)
    assert [p.to_run for p in planned] == [False] * 6
    manifests, ran = bench.run_planned(suite, planned, tmp_path)
    assert ran == []
    reasons = {name: (m.status, m.reason) for name, m in manifests.items()}
    assert reasons["mlp/nosuchmode"][0] == "skipped" and "valid modes" in reasons["mlp/nosuchmode"][1]
    assert "valid models" in reasons["nosuchmodel/nosuchmode"][1]
    assert reasons["mlp-cuda/eager"] == ("skipped", "needs a CUDA GPU; torch sees none here")
    assert "unknown field(s) phasee" in reasons["mlp-forward/eager"][1]
    assert "'vit16x6x38' cannot be built: the width (dim) 38" in reasons["vit16x6x38/eager"][1]
    assert reasons["mlp-b0/eager"] == ("skipped", "batch must be at least 1, got 0")
    on_disk = json.loads((tmp_path / "s" / "mlp-cuda" / "eager" / "run.json").read_text())
    assert on_disk["status"] == "skipped" and on_disk["spec"]["device"] == "cuda"
    # Checked afresh on every run, never remembered as done.
    assert not any(p.done for p in bench.plan(suite, tmp_path))


def test_a_cell_past_its_timeout_is_a_timeout_row(tmp_path):
    suite = _suite(tmp_path, '[[grid]]\nmodel = "mlp"\n')
    (p,) = bench.plan(suite, tmp_path)
    t0 = time.monotonic()
    manifest = bench.run_cell(p, tmp_path / "s", timeout_s=0.5)  # starting Python and torch alone takes longer
    assert time.monotonic() - t0 < 10
    assert manifest.status == "timeout" and "0.5 s limit of one cell (--timeout)" in manifest.reason
    assert bench.plan(suite, tmp_path)[0].done  # a timeout is a result: not redone unless --force


def test_a_child_that_dies_is_a_failed_row_with_its_output(tmp_path):
    suite = _suite(tmp_path, '[[grid]]\nmodel = "mlp"\ndtype = "fp8"\n')
    (p,) = bench.plan(suite, tmp_path)
    manifest = bench.run_cell(p, tmp_path / "s")
    assert manifest.status == "failed"
    assert "process exited 2" in manifest.reason and "unknown dtype 'fp8'" in manifest.reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only answer")
def test_a_run_that_finds_it_cannot_apply_stays_a_skipped_row(tmp_path):
    """The check happens in the run (the Triton softmax builds, then needs a GPU): skipped, not failed."""
    suite = _suite(tmp_path, '[[grid]]\nmodel = "softmax1024-triton"\niters = 2\nprofile_iters = 1\n')
    (p,) = bench.plan(suite, tmp_path)
    assert p.to_run  # nothing says so before the run
    manifest = bench.run_cell(p, tmp_path / "s")
    assert manifest.status == "skipped" and "softmax-triton needs" in manifest.reason


def test_a_stale_skipped_row_is_not_taken_for_the_result_of_a_child_that_died(tmp_path):
    suite = _suite(tmp_path, '[[grid]]\nmodel = "mlp"\ndtype = "fp8"\n')
    (p,) = bench.plan(suite, tmp_path)
    _finish(tmp_path, suite, p, "skipped", reason="time limit")
    os.utime(tmp_path / "s" / p.name / "run.json", (time.time() - 60,) * 2)
    assert bench.run_cell(p, tmp_path / "s").status == "failed"


def test_cells_past_the_deadline_are_skipped_and_run_next_time(tmp_path):
    suite = _suite(tmp_path, '[[grid]]\nmodel = ["mlp", "conv"]\n')
    planned = bench.plan(suite, tmp_path)
    manifests, ran = bench.run_planned(suite, planned, tmp_path, deadline=time.monotonic() - 1)
    assert ran == [] and {m.status for m in manifests.values()} == {"skipped"}
    assert "time limit" in manifests["conv/eager"].reason
    assert all(p.to_run for p in bench.plan(suite, tmp_path))


def test_a_cell_is_not_started_with_less_time_left_than_the_last_of_its_kind_took(tmp_path, monkeypatch):
    """Eager cells take 1 s, compiled ones 0.1 s (a stand-in for run_cell): with 1.6 s, conv/eager is
    not started after mlp/eager took 1 s, and conv/default, shorter, still runs."""
    suite = _suite(tmp_path, '[[grid]]\nmodel = ["mlp", "conv"]\nmode = ["eager", "default"]\n')
    planned = bench.plan(suite, tmp_path)

    def fake_run_cell(p, root, timeout_s, deadline, on_stage):
        time.sleep(1.0 if p.spec.mode == "eager" else 0.1)
        _finish(tmp_path, suite, p, "ok")
        return Manifest(status="ok", spec=p.spec)

    monkeypatch.setattr(bench.progress, "run_cell", fake_run_cell)
    monkeypatch.setattr(bench.progress, "_outcome", lambda m: m.status)
    manifests, ran = bench.run_planned(suite, planned, tmp_path, deadline=time.monotonic() + 1.6)
    assert ran == ["mlp/eager", "mlp/default", "conv/default"]
    assert manifests["conv/eager"].status == "skipped"
    assert "less than the 1 s the last cell of its kind took" in manifests["conv/eager"].reason
    assert [p.name for p in bench.plan(suite, tmp_path) if p.to_run] == ["conv/eager"]


def _bench_process(suite_path, traces, reports, tmp=None):
    return subprocess.Popen([sys.executable, "-m", "tracekit", "bench", str(suite_path), "--traces", str(traces),
                             "--reports", str(reports)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **({"TMPDIR": str(tmp)} if tmp else {})})


def _finished(folder: Path) -> dict[str, bytes]:
    """run.json bytes of every cell with a final status under ``folder``."""
    out = {}
    for path in folder.rglob("run.json"):
        data = path.read_bytes()
        if json.loads(data)["status"] in bench.FINAL:
            out[str(path.parent.relative_to(folder))] = data
    return out


def _wait_for(pred, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


def _cells_running(traces: Path) -> list[int]:
    """Pids of live cell processes writing under ``traces``."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"tracekit.capture" in cmd and any(str(traces).encode() in part for part in cmd):
            pids.append(int(proc.name))
    return pids


@pytest.mark.slow
def test_interrupted_bench_loses_no_finished_cell_and_redoes_none(tmp_path):
    """Stop a bench with SIGTERM, then with SIGKILL, mid-way; each restart goes on where it stopped."""
    suite_path = tmp_path / "resume.toml"
    suite_path.write_text('name = "resume"\n[defaults]\nwarmup = 1\niters = 3\nprofile_iters = 2\n'
                          '[[grid]]\nmodel = "mlp"\nbatch = [1, 2, 3, 4, 5, 6]\n')
    traces, reports = tmp_path / "traces", tmp_path / "reports"
    folder = traces / "resume"
    kept: dict[str, bytes] = {}
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = _bench_process(suite_path, traces, reports, tmp)
        _wait_for(lambda: len(_finished(folder)) >= len(kept) + 2, 120)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
        if sig == signal.SIGTERM:
            assert proc.returncode == 130 and "interrupted during" in out
            assert os.listdir(tmp) == []   # the temporary files of the cell that was running went with it
        _wait_for(lambda: not _cells_running(traces), 10)  # the running cell died with the bench
        now = _finished(folder)
        assert {k: now[k] for k in kept} == kept  # earlier results untouched
        assert len(now) < 6, "the bench finished before it was stopped; nothing was tested"
        kept = now
    proc = _bench_process(suite_path, traces, reports)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out
    final = _finished(folder)
    assert len(final) == 6 and {k: final[k] for k in kept} == kept
    redone = [name for name in kept if f"{name}: ok" in out]
    assert redone == [] and f"{6 - len(kept)} cells run" in out
    assert all(json.loads(v)["status"] == "ok" for v in final.values())
    assert (reports / "resume" / "report.md").read_text().count("/eager | ok |") == 6


@pytest.mark.slow
def test_a_cell_interrupted_says_so_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM, as the CLI takes it) while a cell runs: the bench kills the cell's process."""
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    suite = _suite(tmp_path, '[defaults]\niters = 1000000\n[[grid]]\nmodel = "mlp"\n')
    [p] = bench.plan(suite, tmp_path / "traces")
    seen = []

    def on_stage(stage):
        seen.append(os.listdir(tmp_path / "tmp"))
        if stage.startswith("timing"):
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        bench.run_cell(p, bench.suite_traces(tmp_path / "traces", suite), on_stage=on_stage)
    m = json.loads((bench.suite_traces(tmp_path / "traces", suite) / p.name / "run.json").read_text())
    assert (m["status"], m["reason"]) == (
        "interrupted", "the bench was interrupted (Ctrl-C or SIGTERM) during timing (1000000 iterations, "
                       "interleaved with a synchronised wall clock)")
    assert len(seen[-1]) == 1 and os.listdir(tmp_path / "tmp") == []   # the cell's scratch folder, then none


def test_report_only_writes_the_report_of_runs_made_on_another_machine(tmp_path):
    """Runs copied from a GPU machine: named as there (no "-cuda" on a cuda cell), reported, nothing run."""
    suite = _suite(tmp_path, '[[grid]]\nmodel = "vit16x6x384"\nmode = ["eager", "reduce-overhead"]\n'
                             '[[grid]]\nmodel = "transformer"\ndevice = "cuda"\n', name="gpu")
    traces = tmp_path / "traces"
    root = bench.suite_traces(traces, suite)
    env = {"device_name": "NVIDIA H100 80GB HBM3", "cuda_driver": "580.159.04"}
    write_run(root / "vit16x6x384" / "eager", eager_trace(), mode="eager", environment=env)
    write_run(root / "vit16x6x384" / "reduce-overhead", graph_trace(), mode="reduce-overhead",
              latency_ms=(0.5, 0.4, 0.6), environment=env)
    assert bench.recorded_device(traces, suite) == "cuda"
    [result] = bench.report_only([suite], traces, tmp_path / "reports", command="tracekit bench --report-only gpu.toml")
    assert [p.name for p in result.planned] == ["vit16x6x384/eager", "vit16x6x384/reduce-overhead",
                                                "transformer/eager"]
    assert sorted(result.manifests) == ["vit16x6x384/eager", "vit16x6x384/reduce-overhead"] and not result.ran
    report = (tmp_path / "reports" / "gpu" / "report.md").read_text()
    assert "this report written from those runs by `tracekit bench --report-only gpu.toml`" in report
    assert "| vit16x6x384/reduce-overhead | ok | 0.500 | 2.00x (1.50-2.75) |" in report
    assert "| transformer/eager | not run |" in report
    assert not (root / "transformer").exists()


def test_bench_prints_the_answer_as_analyze_does(tmp_path):
    """What `make demo` prints: the speedup of each workload first (it was only in report.md)."""
    from click.testing import CliRunner

    from tracekit.cli import main

    suite = tmp_path / "demo.toml"
    suite.write_text('name = "demo"\n[[grid]]\nmodel = "vit16x6x384"\nmode = ["eager", "reduce-overhead"]\n')
    root = bench.suite_traces(tmp_path / "traces", load_suite(suite))
    env = {"device_name": "NVIDIA H100 80GB HBM3", "cuda_driver": "580.159.04"}
    write_run(root / "vit16x6x384" / "eager", eager_trace(), mode="eager", environment=env)
    write_run(root / "vit16x6x384" / "reduce-overhead", graph_trace(), mode="reduce-overhead",
              latency_ms=(0.5, 0.4, 0.6), environment=env)
    r = CliRunner().invoke(main, ["bench", str(suite), "--report-only", "--traces", str(tmp_path / "traces"),
                                  "--reports", str(tmp_path / "reports")], env={"COLUMNS": None})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0] == "vit16x6x384 b8 fp32 cuda: reduce-overhead 2.00x (1.50-2.75) over eager (1.000 -> 0.500 ms)"
    assert lines[1].startswith("  why: Δ GPU busy ")
    assert any("speedup over eager" in line for line in lines)


def test_an_only_pattern_matching_no_cell_is_a_usage_error(tmp_path):
    from click.testing import CliRunner

    from tracekit.cli import main

    for extra in ([], ["--dry-run"]):
        r = CliRunner().invoke(main, ["bench", str(ROOT / "workloads" / "demo.toml"), "--only", "mlp*/eager",
                                      "--only", "zzz*", "--traces", str(tmp_path / "t"),
                                      "--reports", str(tmp_path / "r"), *extra])
        assert r.exit_code == 2, r.output
        assert "--only 'zzz*' matches no cell of demo (its cells: mlp-t1/eager, mlp-t1/default)" in r.output
        assert not (tmp_path / "t").exists() and not (tmp_path / "r").exists()

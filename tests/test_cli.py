import json

import pytest
from click.testing import CliRunner
from owndata import H100_STUDY
from tracebuilder import TraceBuilder

from tracekit.cli import main


def test_every_command_has_help():
    runner = CliRunner()
    for cmd in ([], ["trace"], ["analyze"], ["compare"], ["bench"], ["models"], ["backends"], ["counters"], ["diff"],
                ["whatif"]):
        result = runner.invoke(main, [*cmd, "--help"])
        assert result.exit_code == 0 and "Usage" in result.output


def test_unknown_model_and_mode_are_one_line_errors(tmp_path):
    runner = CliRunner()
    r = runner.invoke(main, ["trace", "--model", "nope", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "valid models" in r.output and "Traceback" not in r.output
    r = runner.invoke(main, ["trace", "--model", "mlp", "--mode", "turbo", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "valid modes" in r.output


@pytest.mark.parametrize("args, message", [
    (["--model", "mlp", "--batch", "0"], "Invalid value for '--batch' / '-b': 0 is not in the range x>=1."),
    (["--model", "mlp", "--batch", "-3"], "Invalid value for '--batch' / '-b': -3 is not in the range x>=1."),
    (["--model", "mlp", "--iters", "0"], "Invalid value for '--iters': 0 is not in the range x>=1."),
    (["--model", "mlp", "--profile-iters", "0"], "Invalid value for '--profile-iters': 0 is not in the range x>=1."),
    (["--model", "mlp", "--warmup", "-1"], "Invalid value for '--warmup': -1 is not in the range x>=0."),
    (["--model", "vit16x6x38"], "Error: model 'vit16x6x38' cannot be built: the width (dim) 38 is not a multiple of "
                                "64 (one head per 64) (e.g. vit16x6x384; `tracekit models` lists the families)"),
    (["--model", "vit15x6x384"], "the patch size 15 does not divide the 224-pixel image"),
    (["--model", "matmul0"], "model 'matmul0' cannot be built: every size in the name must be at least 1"),
])
def test_usage_errors_exit_2_and_write_nothing(tmp_path, args, message):
    """A newcomer's typos (issue 17): exit 2, one clear line, no run.json for analyze to find later."""
    r = CliRunner().invoke(main, ["trace", *args, "--out", str(tmp_path / "traces")])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
    assert not (tmp_path / "traces").exists()


def test_make_passes_batch_0_on_to_be_refused():
    """`make trace BATCH=0` used to drop the 0 and run at the default batch."""
    import subprocess
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    dry = subprocess.run(["make", "-n", "-C", str(root), "trace", "BATCH=0", "SETUP=", "TRACEKIT=tracekit"],
                         capture_output=True, text=True)
    assert dry.returncode == 0 and "--batch 0" in dry.stdout
    dry = subprocess.run(["make", "-n", "-C", str(root), "trace", "REPEATS=3", "THREADS=1", "SETUP=",
                          "TRACEKIT=tracekit"], capture_output=True, text=True)
    assert "--threads 1 --repeats 3" in dry.stdout


def test_make_test_leaves_slow_tests_to_test_all_and_installs_nothing_that_ci_does_not_ask_for():
    """`make test` once installed Chromium with apt-get whenever no browser was found (here: BROWSER=)."""
    import subprocess
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]

    def dry(*args):
        r = subprocess.run(["make", "-n", "-C", str(root), *args, "SETUP=", "BROWSER=", "PYTEST=pytest"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return [line for line in r.stdout.splitlines() if not line.startswith("make")]
    assert dry("test") == ['pytest -q -m "not slow" --durations=15']
    assert dry("test-all") == ["pytest -q --durations=15"]
    assert "apt-get install" in " ".join(dry("setup-browser"))
    ci = [line for line in (root / ".ci" / "run").read_text().splitlines() if line.startswith("make")]
    assert ci == ["make demo", "make setup-browser", "make test-all"]


def test_readme_main_job_traces_an_eager_baseline_first():
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = text.split("## The main job", 1)[1].split("```")[1].strip().splitlines()
    assert block == ["make trace MODEL=vit16x6x384 MODE=eager", "make trace MODEL=vit16x6x384 MODE=reduce-overhead",
                     "tracekit analyze traces/"]


def test_one_command_lists_the_modes():
    r = CliRunner().invoke(main, ["modes"])
    assert r.exit_code == 2 and "No such command 'modes'" in r.output
    r = CliRunner().invoke(main, ["backends", "--json"])
    assert r.exit_code == 0
    rows = {row["mode"]: row for row in json.loads(r.output)}
    assert {"eager", "default", "reduce-overhead", "cudagraphs", "onnx"} <= set(rows)
    assert rows["eager"]["available"] and rows["eager"]["reason"] == ""


def test_analyze_prints_rows_and_writes_reports(tmp_path):
    t = TraceBuilder()
    t.kernel("a", 0, 10, launch_at=-5)
    t.graph_launch(20, [(30, 5), (35, 5)])
    (tmp_path / "traces").mkdir()
    t.write(tmp_path / "traces" / "x.pt.trace.json.gz")
    out = tmp_path / "reports"
    r = CliRunner().invoke(main, ["analyze", str(tmp_path / "traces"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "x.pt.trace.json.gz" in r.output
    data = json.loads((out / "runs.json").read_text())
    assert data["runs"][0]["kernels"] == 3 and data["runs"][0]["host_launches"] == 2
    assert "| x.pt.trace.json.gz |" in (out / "summary.md").read_text()
    assert (out / "runs.csv").read_text().startswith("run,")


def test_analyze_json_and_missing_path(tmp_path):
    t = TraceBuilder()
    t.kernel("a", 0, 10, launch_at=-5)
    path = t.write(tmp_path / "one.json")
    r = CliRunner().invoke(main, ["analyze", str(path), "--json", "--out", str(tmp_path / "r")])
    assert r.exit_code == 0
    assert json.loads(r.output)["runs"][0]["kernels"] == 1
    r = CliRunner().invoke(main, ["analyze", str(tmp_path / "missing")])
    assert r.exit_code == 3 and "no such file" in r.output


def test_analyze_our_h100_folder(tmp_path):
    r = CliRunner().invoke(main, ["analyze", str(H100_STUDY), "--json", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    runs = {row["run"]: row for row in json.loads(r.output)["runs"]}
    assert [runs[f"vit16x6x384/{m}"]["kernels"] for m in ("eager", "default", "reduce-overhead")] == [660, 590, 639]


@pytest.mark.slow
def test_trace_then_analyze_reduce_overhead_vit(tmp_path):
    """The README's main job, on the CPU: trace vit16x6x384 in reduce-overhead mode, then analyze."""
    runner = CliRunner()
    traces = tmp_path / "traces"
    r = runner.invoke(main, ["trace", "--model", "vit16x6x384", "--mode", "reduce-overhead", "--warmup", "1",
                             "--iters", "2", "--profile-iters", "2", "--out", str(traces)])
    assert r.exit_code == 0, r.output
    assert "CUDA graphs only on CUDA" in r.output  # honest label on the CPU
    r = runner.invoke(main, ["analyze", str(traces), "--out", str(tmp_path / "reports")])
    assert r.exit_code == 0 and "vit16x6x384/reduce-overhead" in r.output


def test_compare_prints_the_speedup_and_why(study, tmp_path):
    out = tmp_path / "report"
    r = CliRunner().invoke(main, ["compare", str(study / "a" / "first"), str(study / "b" / "second"),
                                  "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "2.00x (1.40-2.57)" in r.output and "less GPU idle time" in r.output
    assert "a/first +25%" in r.output                        # profiler overhead flagged
    assert (out / "index.html").is_file() and (out / "plots" / "vit16x6x384-b8-fp32-cuda.png").is_file()
    r = CliRunner().invoke(main, ["compare", str(study), "--baseline", "reduce-overhead"])
    assert r.exit_code == 0 and "0.50x (0.39-0.71)" in r.output
    r = CliRunner().invoke(main, ["compare", str(tmp_path / "nope")])
    assert r.exit_code == 3 and "no such file" in r.output


def test_analyze_writes_the_html_report(study, tmp_path):
    r = CliRunner().invoke(main, ["analyze", str(study), "--out", str(tmp_path / "r"), "--baseline", "eager"])
    assert r.exit_code == 0, r.output
    assert "speedup over eager" in r.output and (tmp_path / "r" / "index.html").is_file()


def test_counters_runs_the_sequence_length_it_is_given(monkeypatch):
    """`tracekit counters --seq` reaches the run's spec (as `tracekit trace --seq` does); ncu is
    stubbed out by a ProfilerError, which the command reports as its exit code 11."""
    from tracekit import counters as hw

    seen = []

    def fake_run(spec, *args, **kw):
        seen.append(spec)
        raise hw.ProfilerError("ncu not found")

    monkeypatch.setattr(hw, "run", fake_run)
    r = CliRunner().invoke(main, ["counters", "--model", "hf:gpt2", "--seq", "256", "--device", "cpu"])
    assert r.exit_code == 11 and "ncu not found" in r.output
    assert [s.seq for s in seen] == [256]


# Every command that writes, with its folder options (issue 32).
WRITERS = [(["trace", "--model", "mlp"], "--out"), (["analyze", str(H100_STUDY)], "--out"),
           (["compare", str(H100_STUDY)], "--out"), (["diff", str(H100_STUDY)], "--out"),
           (["bench", "workloads/demo.toml"], "--traces"), (["bench", "workloads/demo.toml"], "--reports"),
           (["counters", "--model", "mlp"], "--traces"), (["counters", "--model", "mlp"], "--out")]


@pytest.mark.parametrize("command, option", WRITERS)
@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_an_output_folder_that_is_a_file_is_a_one_line_usage_error(tmp_path, command, option, where):
    (tmp_path / "notes.txt").write_text("mine\n")
    folder = tmp_path / "notes.txt" / ("sub" if where == "under a file" else "")
    r = CliRunner().invoke(main, [*command, option, str(folder)])
    assert r.exit_code == 2 and r.output == f"Error: {option} {folder}: {tmp_path / 'notes.txt'} is a file, not a folder\n"
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_an_output_folder_on_a_read_only_file_system_is_a_one_line_usage_error(tmp_path):
    """A read-only tmpfs mounted in a user namespace of its own (unshare), where the system allows one."""
    import subprocess
    import sys
    from pathlib import Path
    ro = tmp_path / "ro"
    ro.mkdir()
    commands = [[*command, option, str(ro / "reports")] for command, option in WRITERS]
    script = (f"mount -t tmpfs -o ro none {ro} || exit 99\n"
              + "".join(f"{sys.executable} -m tracekit {' '.join(c)}; echo rc=$?\n" for c in commands))
    try:
        r = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                           cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        pytest.skip("needs unshare (util-linux) to mount a read-only file system")
    if r.returncode == 99 or "unshare:" in r.stderr:
        pytest.skip(f"needs user namespaces to mount a read-only file system: {r.stderr.strip()[:200]}")
    assert r.stdout.split() == ["rc=2"] * len(commands), r.stderr
    assert r.stderr.splitlines() == [f"Error: {option} {ro / 'reports'}: cannot write in {ro}: Read-only file system"
                                     for _, option in WRITERS]


def test_a_dask_address_that_is_not_one_is_a_one_line_usage_error(tmp_path):
    pytest.importorskip("dask.distributed", reason="dask[distributed] is not installed (make setup installs it)")
    r = CliRunner().invoke(main, ["analyze", str(H100_STUDY), "--dask", "notaurl", "--out", str(tmp_path)])
    assert r.exit_code == 2 and r.output.count("\n") == 1
    assert r.output.startswith("Error: --dask notaurl: not a scheduler address (missing port number")


@pytest.mark.parametrize("command", [["trace", "--model", "mlp"], ["models"], ["backends"]])
def test_commands_that_run_workloads_say_pytorch_is_missing_in_one_line(tmp_path, command):
    """torch hidden from a process of its own, as where it is not installed."""
    import subprocess
    import sys
    hide = "import sys; sys.modules['torch'] = None; from tracekit.cli import run; sys.argv[0] = 'tracekit'; run()"
    r = subprocess.run([sys.executable, "-c", hide, *command], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 12 and r.stderr == (
        f"Error: tracekit {command[0]} needs PyTorch, which is not installed here: `make setup`, or pip install "
        "torch (analyze, compare and diff work without it)\n") and not r.stdout


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_an_interrupted_trace_exits_130_says_so_in_run_json_and_leaves_no_temporary_files(tmp_path, signal_name):
    """Ctrl-C (SIGINT) or kill (SIGTERM) while the run times its iterations."""
    import os
    import signal
    import subprocess
    import sys
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    TIMING = "timing (1000000 iterations, interleaved with a synchronised wall clock)"   # capture/stages.py's stage
    # SIGINT as a terminal gives it: a test run in a background job inherits it ignored, and Python then
    # leaves it so (no KeyboardInterrupt); Inductor's own cache folder, which importing torch._dynamo makes in
    # the temporary folder where TORCHINDUCTOR_CACHE_DIR is not set, is torch's, not the run's
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    proc = subprocess.Popen([sys.executable, "-m", "tracekit", "trace", "--model", "mlp", "--iters", "1000000",
                             "--out", str(tmp_path / "traces")], cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                            env={**env, "TMPDIR": str(scratch)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def made() -> list[str]:   # what the run left in the temporary folder
        return [name for name in os.listdir(scratch) if not name.startswith("torchinductor_")]
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if "] timing (1000000 iterations" in line:
                assert len(made()) == 1   # the run's temporary folder
                proc.send_signal(getattr(signal, signal_name))
                break
        lines += proc.stderr.readlines()
        assert proc.wait(timeout=120) == 130, "".join(lines)
    finally:   # a failed assertion leaves no run of a million iterations behind
        if proc.poll() is None:
            proc.kill()
    folder = tmp_path / "traces" / "mlp" / "eager"
    assert lines[-1] == (f"tracekit trace: {folder}: interrupted (Ctrl-C or SIGTERM) during {TIMING}; "
                         "run.json says so\n")
    manifest = json.loads((folder / "run.json").read_text())
    assert (manifest["status"], manifest["reason"]) == (
        "interrupted", f"interrupted (Ctrl-C or SIGTERM) during {TIMING}")
    assert made() == []


def test_whatif_prints_the_prediction_or_its_json(tmp_path):
    """`tracekit whatif` is argument parsing and tracekit.whatif: the text is the prediction's, --json its
    to_dict(); a trace it cannot predict is one line and exit 0."""
    from pathlib import Path

    from tracebuilder import eager_trace, write_run

    import tracekit

    run = Path(__file__).resolve().parent / "data" / "h200" / "predict-h200" / "conv-b1" / "eager"
    r = CliRunner().invoke(main, ["whatif", str(run), "--cuda-graphs"])
    assert r.exit_code == 0 and r.output.splitlines() == [
        f"{run}: cuda-graphs",
        "  predicted iteration 0.053 ms (0.053-0.055 ms), from 0.231 ms modelled (calibrated to the unprofiled "
        "0.231 ms (host time x0.39, GPU time x1.00))",
        "  critical path before: cpu 191 µs (85%), launch 33 µs (15%)",
        "  critical path after:  kernel 50 µs (94%), gpu_gap 3 µs (6%)",
        "  note: replay costs of the NVIDIA H200, measured on it (benchmarks/replay_probe.py): 27.7 µs + 0.46 µs a "
        "kernel of host time per replay, 0.26 µs between replayed kernels",
        f"  {next(run.glob('*.pt.trace.json.gz'))}: integrity ok"]   # issue 40: each input's integrity
    host = write_run(tmp_path / "w" / "eager", eager_trace(), latency_ms=(0.05, 0.045, 0.055))
    r = CliRunner().invoke(main, ["whatif", str(host), "--faster", "gemm=2", "--host-faster", "2", "--json"])
    out = json.loads(r.output)
    assert r.exit_code == 0 and out == tracekit.whatif(host, faster={"gemm": 2}, host_faster=2).to_dict()
    assert out["edits"] == ["faster gemm=2", "host-faster 2"] and out["predicted_latency_ms"] == 0.025
    bare = tmp_path / "bare.pt.trace.json.gz"
    eager_trace().write(bare)
    r = CliRunner().invoke(main, ["whatif", str(bare), "--cuda-graphs"])
    assert r.exit_code == 0 and "UNCALIBRATED: no run.json with an unprofiled latency" in r.output
    assert "  note: no unprofiled latency (run.json): modelled as traced, uncalibrated" in r.output.splitlines()
    cpu = TraceBuilder()
    cpu.cpu_op("aten::mm", 0, 10)
    write_run(tmp_path / "cpu", cpu, device_type="cpu")
    r = CliRunner().invoke(main, ["whatif", str(tmp_path / "cpu"), "--cuda-graphs", "--json"])
    out = json.loads(r.output)
    assert r.exit_code == 0 and out == {
        "path": str(tmp_path / "cpu"), "predicted_latency_ms": None,
        "cannot_predict": "no GPU ops in the trace: there is no host-GPU critical path to find", "unreadable": [],
        "integrity": out["integrity"]}   # issue 40: each input's integrity
    assert [(c["check"], c["status"], c["detail"]) for c in out["integrity"]] == [("accelerator", "ok", "none")]


@pytest.mark.parametrize("args, code, message", [
    (["--faster", "zzz=2"], 2, "Error: --faster zzz=2: the pattern matches no kernel class, kernel, op or module "
                               "of the trace"),
    (["--faster", "zzz"], 2, "Error: --faster 'zzz': expected PATTERN=FACTOR with a factor above 0, "
                             "e.g. 'blocks.*.mlp=2'"),
    ([], 2, "Error: no edit: give --cuda-graphs, --faster PATTERN=FACTOR, --host-faster FACTOR, --overlap-comm or "
            "--balance-ranks"),
    (["--cuda-graphs", "--annotation", "nope"], 2, "{run}: no CPU op or annotation named 'nope' in the trace"),
    (["--cuda-graphs", "--host-faster", "0"], 2, "Invalid value for '--host-faster'"),
])
def test_whatif_usage_errors_are_one_line_and_exit_2(tmp_path, args, code, message):
    from tracebuilder import eager_trace, write_run

    run = write_run(tmp_path / "w" / "eager", eager_trace())
    r = CliRunner().invoke(main, ["whatif", str(run), *args])
    assert r.exit_code == code and message.format(run=run) in r.output and "Traceback" not in r.output


def test_whatif_of_a_path_without_a_trace_exits_with_its_code(tmp_path):
    r = CliRunner().invoke(main, ["whatif", str(tmp_path / "missing"), "--cuda-graphs"])
    assert r.exit_code == 3 and "no such file or folder" in r.output
    r = CliRunner().invoke(main, ["whatif", str(tmp_path), "--cuda-graphs"])
    assert r.exit_code == 4 and "no trace files" in r.output

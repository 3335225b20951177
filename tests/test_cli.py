import json

import pytest
from click.testing import CliRunner
from owndata import H100_STUDY
from tracebuilder import TraceBuilder

from tracekit.cli import main


def test_every_command_has_help():
    runner = CliRunner()
    for cmd in ([], ["trace"], ["analyze"], ["compare"], ["bench"], ["models"], ["backends"], ["counters"]):
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

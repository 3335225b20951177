import json
import re

import pytest

from tracekit import backends, models
from tracekit.api import analyze  # the worded tables a user gets (the runs' notes)
from tracekit.capture import runner
from tracekit.manifest.spec import RunSpec
from tracekit.trace import load

QUICK = dict(warmup=1, iters=3, profile_iters=2)


@pytest.mark.slow
def test_eager_run_writes_trace_and_manifest(tmp_path):
    manifest = runner.run(RunSpec("mlp", "eager", **QUICK), tmp_path, log=lambda m: None)
    folder = tmp_path / "mlp" / "eager"
    assert manifest.status == "ok"
    on_disk = json.loads((folder / "run.json").read_text())
    assert on_disk["status"] == "ok" and on_disk["spec"]["batch"] == 4 and on_disk["device_type"] == "cpu"
    assert on_disk["latency_ms"]["n"] == 3 and on_disk["latency_ms"]["timer"] == "perf_counter"
    assert on_disk["interleaving"]["rounds"] == 3 and on_disk["interleaving"]["schedule"] == "sized"
    assert on_disk["wall_ms"]["n"] == 3 and on_disk["wall_ms"]["calls"] == 3 * on_disk["interleaving"]["wall_calls"]
    assert on_disk["max_abs_diff"] == 0.0
    traces = list(folder.glob("*.pt.trace.json.gz"))
    assert len(traces) == 1 and traces[0].name == on_disk["profile"]["traces"][0]
    result = analyze(tmp_path)
    row = result.runs.iloc[0]
    assert row["run"] == "mlp/eager" and row["iterations"] == 2 and not row["has_gpu"]
    assert "no GPU activity" in row["note"]
    assert len(result["iterations"]) == 2  # one ProfilerStep marker per profiled iteration
    # attribution: a scope around each module call of each profiled iteration
    assert on_disk["attribution"]["module_scopes"] is True
    cpu = load(traces[0]).cpu_ops
    assert (cpu["name"] == "module::").sum() == 2 and (cpu["name"] == "module::4").sum() == 2


@pytest.mark.slow
def test_compiled_run_matches_eager(tmp_path):
    manifest = runner.run(RunSpec("mlp", "default", **QUICK), tmp_path, log=lambda m: None)
    assert manifest.status == "ok"
    assert manifest.max_abs_diff < 1e-4
    assert manifest.compile_s > 0
    graphs = manifest.attribution.provenance.graphs   # Inductor's call sites, with their modules
    assert len(graphs) == 1 and re.fullmatch(r"\d+/\d+", graphs[0]["compile_id"]) and graphs[0]["key"]
    problem = manifest.attribution.provenance.problem
    assert {m for _kernel, _handle, modules, _ops in graphs[0]["calls"] for m in modules} >= {"0", "2"}, problem


@pytest.mark.slow
def test_failures_are_recorded_not_raised(tmp_path, monkeypatch):
    def broken(module, inputs, spec):
        raise RuntimeError("backend exploded")

    monkeypatch.setitem(backends.BACKENDS, "broken", backends.Backend("broken", "test", broken))
    manifest = runner.run(RunSpec("mlp", "broken", **QUICK), tmp_path, log=lambda m: None)
    assert manifest.status == "failed"
    assert "backend exploded" in manifest.reason and manifest.stage == "prepare"
    rows = analyze(tmp_path).runs
    assert rows.iloc[0]["status"] == "failed"


def test_unavailable_backend_is_a_status_row(tmp_path, monkeypatch):
    b = backends.Backend("nope", "test", lambda *a: None, unavailable=lambda spec: "needs foo: pip install foo")
    monkeypatch.setitem(backends.BACKENDS, "nope", b)
    manifest = runner.run(RunSpec("mlp", "nope"), tmp_path, log=lambda m: None)
    assert manifest.status == "skipped" and "pip install foo" in manifest.reason


def test_invalid_names_raise_before_writing(tmp_path):
    with pytest.raises(backends.UnknownMode, match="reduce-overhead"):
        runner.run(RunSpec("mlp", "turbo"), tmp_path)
    with pytest.raises(models.UnknownModel, match="the width .dim. 38 is not a multiple of 64"):
        runner.run(RunSpec("vit16x6x38"), tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("field, value, message", [
    ("batch", 0, "batch must be at least 1, got 0"), ("batch", -2, "batch must be at least 1, got -2"),
    ("iters", 0, "iters must be at least 1, got 0"), ("profile_iters", 0, "profile_iters must be at least 1, got 0"),
    ("warmup", -1, "warmup must be at least 0, got -1")])
def test_bad_counts_raise_before_writing(tmp_path, field, value, message):
    """The Python API too: batch 0 is no longer taken for "the default" (None is)."""
    with pytest.raises(ValueError, match=message):
        runner.run(RunSpec("mlp", **{field: value}), tmp_path)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_trace_prints_no_usdt_lines(tmp_path):
    """End to end, in a process of its own (the real file descriptor 2)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "tracekit", "trace", "--model", "mlp", "--device", "cpu", "--warmup",
                        "1", "--iters", "2", "--profile-iters", "2", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "profiling (2 iterations)" in r.stderr and "USDT" not in r.stderr and "USDT" not in r.stdout


def test_labels_name_non_default_settings():
    assert RunSpec("vit16x6x384", batch=8).label(8, "cuda") == "vit16x6x384"
    assert RunSpec("vit16x6x384", batch=1, dtype="bf16").label(8, "cuda") == "vit16x6x384-b1-bf16"
    assert RunSpec("mlp", device="cpu").label(4, "cuda") == "mlp-cpu"


@pytest.mark.gpu
def test_profiled_steps_hold_only_the_kernels_they_launched(tmp_path):
    """The profiler's warm-up step is synchronized before the window opens: a GPU-bound run's
    queued work (here a whole CUDA-graph replay) must not run inside profiled step 1 with no
    launch call in the trace (it did before: step 1 of vit16x6x384 reduce-overhead on the H100
    held 43 ops of the previous replay, 850 µs)."""
    from tracekit.analysis.metrics.idle import launch_index, op_iterations
    from tracekit.trace.reader import trace_files

    m = runner.run(RunSpec("vit16x6x384", "reduce-overhead", batch=8, warmup=3, iters=5, profile_iters=3),
                   tmp_path, log=lambda s: None)
    assert m.status == "ok", m.reason
    tables = load(next(f for d in tmp_path.rglob("run.json") for f in trace_files(d.parent)))
    ops = tables.gpu_ops
    in_steps = op_iterations(tables, ops) >= 0
    assert in_steps.sum() > 0 and ops.loc[in_steps, "correlation"].isin(launch_index(tables).index).all()

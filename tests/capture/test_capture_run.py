"""The one capture (tracekit.capture.capture_run): a failure is one status, Ctrl-C says where it
stopped, the model is looked up once a run (tracekit.capture.resolved), and the sequence of stages
exists once."""

import json

import pytest
import torch

from tracekit import models
from tracekit.capture import runner
from tracekit.capture.capture_run import Capture, failure
from tracekit.capture.resolved import resolve
from tracekit.errors import Interrupted
from tracekit.manifest.spec import RunSpec


def test_a_failure_is_one_status_with_its_reason():
    assert failure(models.Unavailable("needs foo: pip install foo")) == (
        "skipped", "Unavailable: needs foo: pip install foo")
    assert failure(torch.cuda.OutOfMemoryError("Tried to allocate 2 GiB"))[0] == "oom"
    assert failure(RuntimeError("CUDA error: out of memory"))[0] == "oom"
    assert failure(ValueError("  bad shape\n"), " in the loop at step 3") == (
        "failed", "ValueError in the loop at step 3: bad shape")
    assert failure(KeyboardInterrupt())[0] == "failed"
    assert len(failure(RuntimeError("x" * 5000))[1]) == len("RuntimeError: ") + 2000


def _life(tmp_path, lines):
    return Capture.of(resolve(RunSpec("mlp", device="cpu")), tmp_path / "mlp" / "eager", log=lines.append)


def test_an_exception_in_a_stage_ends_the_run_with_its_status(tmp_path):
    lines = []
    life = _life(tmp_path, lines)
    life.start()
    with life:
        life.stage("prepare")
        raise RuntimeError("backend exploded")
    on_disk = json.loads((tmp_path / "mlp" / "eager" / "run.json").read_text())
    assert (on_disk["status"], on_disk["stage"], on_disk["reason"]) == ("failed", "prepare",
                                                                         "RuntimeError: backend exploded")
    assert on_disk["finished_at"] and set(on_disk["host_load"]) == {"start", "end"}
    assert lines[-1].endswith("failed during prepare: RuntimeError: backend exploded")


def test_ctrl_c_is_recorded_with_its_stage_and_raised(tmp_path):
    life = _life(tmp_path, [])
    life.start()
    with pytest.raises(Interrupted, match="run.json says so"):
        with life:
            life.stage("timing")
            raise KeyboardInterrupt
    on_disk = json.loads((tmp_path / "mlp" / "eager" / "run.json").read_text())
    assert (on_disk["status"], on_disk["reason"]) == ("interrupted", "interrupted (Ctrl-C or SIGTERM) during timing")


def test_a_run_looks_its_model_up_once(tmp_path, monkeypatch):
    """run_dir, the defaults, the build and the cost each looked the name up (an hf: name built its
    config each time, a workload file was hashed each time): now the run resolves it once."""
    lookups = []
    lookup = models.lookup
    monkeypatch.setattr(models, "lookup", lambda name: lookups.append(name) or lookup(name))
    manifest = runner.run(RunSpec("mlp", device="cpu", warmup=0, iters=1, profile_iters=1), tmp_path,
                          log=lambda m: None)
    assert manifest.status == "ok" and lookups == ["mlp"]


def test_a_run_leaves_inductor_no_folder_of_its_own_scratch(tmp_path):
    """Inductor fixes its precompiled headers' folder under the temporary folder of its first
    import; a run's temporary folder is removed at its end, so that folder must not be it (a later
    C++ compile in the process failed for a missing header on torch 2.11). A fresh process: this
    one has imported Inductor already."""
    import subprocess
    import sys

    code = ("import sys, tempfile; from tracekit.capture import runner; from tracekit.manifest.spec import RunSpec\n"
            f"runner.run(RunSpec('mlp', warmup=0, iters=1, profile_iters=1, device='cpu'), {str(tmp_path)!r}, "
            "log=lambda m: None)\n"
            "import torch._inductor.codecache as c; print(c._HEADER_DIR); print(tempfile.gettempdir())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    header_dir, tmp = out.stdout.split()[-2:]
    assert "tracekit-run-" not in header_dir and header_dir.startswith(tmp)


def test_a_run_records_the_thread_count_it_ran_with_and_restores_it(tmp_path):
    before = torch.get_num_threads()
    manifest = runner.run(RunSpec("mlp", device="cpu", threads=1, warmup=0, iters=1, profile_iters=1), tmp_path,
                          log=lambda m: None)
    assert manifest.status == "ok" and manifest.environment.cpu_threads == 1 and torch.get_num_threads() == before


STAGES = ("build", "reference_output", "prepare", "first_call", "warm_up", "timing", "profiled_window",
          "as_if_captured", "nvtx_window", "later_steps", "loop_timings")   # tracekit/capture/stages.py's stages


def test_the_sequence_of_stages_is_written_once():
    """Only the one capture calls a stage, each stage once (so their order is written once); no other
    module of tracekit imports a stage or makes the manifest of a run that starts ("running")."""
    import ast
    from pathlib import Path

    import tracekit
    from tracekit.capture import stages

    package = Path(tracekit.__file__).parent
    assert set(STAGES) <= set(vars(stages))
    called = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(package).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "tracekit.capture.stages":
                assert not {a.name for a in node.names} & set(STAGES), f"{where} imports a stage"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "stages":
                called.setdefault(node.func.attr, []).append(where)
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Manifest":
                running = [k for k in node.keywords if k.arg == "status" and getattr(k.value, "value", "") == "running"]
                assert not running or where == "capture/capture_run.py", f"{where} starts a manifest"
    assert {name: places for name, places in called.items() if name in STAGES} == {
        name: ["capture/capture_run.py"] for name in STAGES}


def test_no_front_end_climbs_back_to_the_front_door():
    """The ranks, the repeated processes and the counters' workload run the one capture directly:
    none of them imports the dispatcher that chose them (tracekit.capture.runner)."""
    from test_imports import import_graph

    graph = import_graph()

    def reach(module: str) -> set[str]:
        seen, todo = set(), [module]
        while todo:
            for m in graph[todo.pop()] - seen:
                seen.add(m)
                todo.append(m)
        return seen

    for front_end in ("tracekit.capture.ranks", "tracekit.capture.launcher", "tracekit.capture.repeats",
                      "tracekit.capture.loop", "tracekit.counters.workload", "tracekit.capture.capture_run"):
        assert "tracekit.capture.runner" not in reach(front_end), front_end
    assert "tracekit.capture.capture_run" in reach("tracekit.capture.runner")


def test_the_differences_are_what_the_readme_lists():
    """DIFFERENCES is the one list of what each way in does not record like a single run; the
    README's table shows every field of it under its way in."""
    from pathlib import Path

    from tracekit.capture.capture_run import DIFFERENCES

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in readme.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip() in DIFFERENCES}
    assert set(rows) == set(DIFFERENCES)
    for way, fields in DIFFERENCES.items():
        assert all(f"`{name}`" in rows[way] for name in fields), way


@pytest.mark.slow
def test_every_way_in_fills_the_same_manifest(tmp_path):
    """A single run, a bench cell, a run in 2 processes, a 2-rank gloo job, a recorded loop and the
    counters' workload of one workload (an MLP's training step, on the CPU) fill the same fields of
    run.json, but for the differences DIFFERENCES lists."""
    import tracekit
    from tracekit.bench import plan
    from tracekit.bench.cells import run_cell
    from tracekit.capture.capture_run import DIFFERENCES
    from tracekit.capture.child import ChildJob
    from tracekit.counters import workload
    from tracekit.manifest.suite_toml import load_suite

    counts = dict(phase="train-step", warmup=1, iters=2, profile_iters=1)
    quiet = lambda line: None  # noqa: E731
    single = runner.run(RunSpec("mlp", device="cpu", **counts), tmp_path / "single", log=quiet)
    suite = tmp_path / "cell.toml"
    suite.write_text('name = "cell"\n[defaults]\nphase = "train-step"\nwarmup = 1\niters = 2\nprofile_iters = 1\n'
                     '[[grid]]\nmodel = "mlp"\nmode = "eager"\n')
    [cell] = plan(load_suite(suite), tmp_path / "bench")
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    with tracekit.record(tmp_path / "loop" / "mlp", phase="train-step", batch=4, warmup=1, iters=2,
                         profile_iters=1) as rec:
        for _ in range(1 + 2 + 1 + 1):
            model(torch.randn(4, 64)).square().mean().backward()
            rec.step()
    ways = {"bench cell": run_cell(cell, tmp_path / "bench"),
            "repeats": runner.run(RunSpec("mlp", device="cpu", repeats=2, **counts), tmp_path / "repeats", log=quiet),
            "job": runner.run(RunSpec("mlp", device="cpu", nproc=2, **counts), tmp_path / "job", log=quiet),
            "recorded loop": rec.manifest,
            "counters": workload.run(ChildJob("counters", single.spec, str(tmp_path / "counters")))}
    assert single.status == "ok" and {name: m.status for name, m in ways.items()} == dict.fromkeys(ways, "ok")
    fields = set(single.to_dict())
    assert {"host_ms", "wall_ms", "attribution", "max_abs_diff", "loss"} <= fields
    assert {name: fields ^ set(m.to_dict()) for name, m in ways.items()} == {
        name: set(DIFFERENCES[name]) for name in ways}
    assert ways["job"].host_ms.n == ways["job"].distributed.ranks[1].host_ms.n == single.host_ms.n

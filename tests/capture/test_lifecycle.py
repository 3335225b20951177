"""One run's lifecycle (tracekit.capture.lifecycle): a failure is one status, Ctrl-C says where it
stopped, the model is looked up once a run (tracekit.capture.resolved)."""

import json

import pytest
import torch

from tracekit import models
from tracekit.capture import runner
from tracekit.capture.lifecycle import Lifecycle, failure, new_manifest
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
    spec = resolve(RunSpec("mlp", device="cpu")).spec
    return Lifecycle(new_manifest(spec, "mlp", {"kind": "built-in"}), tmp_path / "mlp" / "eager", lines.append)


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

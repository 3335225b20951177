"""Workload files: path.py:fn, package.module:fn, functions of workloads/ by name, the decorator,
`tracekit models`, suites naming them, and each bad file as one line, exit 2 and no run folder."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from tracekit import backends, models
from tracekit.analysis.runs import analyze
from tracekit.bench import plan, run_planned
from tracekit.capture import runner
from tracekit.cli import main
from tracekit.manifest.spec import RunSpec, folder_name
from tracekit.manifest.suite_toml import load_suite
from tracekit.models.workload_files import WorkloadError

ROOT = Path(__file__).resolve().parents[2]
QUICK = dict(warmup=1, iters=3, profile_iters=2)

# Written as someone outside the project would: only torch, no tracekit import.
THEIRS = '''
import torch
from torch import nn


class TwoLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 64), nn.Linear(64, 8)

    def forward(self, x):
        return {"logits": self.fc2(torch.relu(self.fc1(x))), "hidden": self.fc1(x)}


def their_model(batch, dtype, device):
    """Their two-layer net, returning a dict."""
    return TwoLayer().to(device, dtype), (torch.randn(batch, 32, device=device, dtype=dtype),)


def bad_return(batch, dtype, device):
    return nn.Linear(2, 2)


def bad_inputs(batch, dtype, device):
    return nn.Linear(2, 2), (3,)


def not_a_module(batch, dtype, device):
    return "model", (torch.randn(2),)


def raises(batch, dtype, device):
    raise RuntimeError("their bug")  # the line the error names


def wrong_signature(x):
    return x
'''

RAISE = '    raise RuntimeError("their bug")  # the line the error names'


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def theirs(tmp_path) -> Path:
    return write(tmp_path / "elsewhere", "their_file.py", THEIRS)


def test_a_plain_function_builds_without_tracekit(theirs):
    module, (x,) = models.build(f"{theirs}:their_model", batch=3, dtype="bf16")
    assert x.shape == (3, 32) and x.dtype == torch.bfloat16 and next(module.parameters()).dtype == torch.bfloat16
    assert not module.training  # eval mode, as every workload
    family, _ = models.lookup(f"{theirs}:their_model")
    assert family.default_batch == 1 and family.description == "Their two-layer net, returning a dict."
    assert family.source["kind"] == "file" and family.source["file"] == str(theirs)
    assert family.source["function"] == "their_model" and len(family.source["sha256"]) == 64


def test_folder_names_are_filesystem_safe_and_readable():
    assert folder_name("path/to/their_file.py:their_model") == "their_file-their_model"
    assert folder_name("hf:llama?layers=16&hidden=2048") == "hf-llama-layers16-hidden2048"
    assert folder_name("pkg.mod:fn") == "pkg.mod-fn"
    assert folder_name("vit16x6x384") == "vit16x6x384" and folder_name("lm-2.7b-1024") == "lm-2.7b-1024"
    assert RunSpec("hf:gpt2", seq=512, batch=1).label(8, "cpu", 128) == "hf-gpt2-b1-s512"
    assert RunSpec("hf:gpt2", seq=128).label(8, "cpu", 128) == "hf-gpt2"


def test_the_decorator_gives_batch_description_cost_and_compile_targets(tmp_path):
    path = write(tmp_path, "decorated.py", '''
        import torch
        from torch import nn
        import tracekit

        @tracekit.workload(batch=6, description="one linear", compile_targets="0",
                           cost=lambda batch, dtype: {"flop": 2 * batch * 16 * 16, "bytes": dtype.itemsize})
        def lin(batch, dtype, device, seq=12):
            return nn.Sequential(nn.Linear(16, 16)).to(device, dtype), (torch.randn(batch, seq, 16),)
    ''')
    family, _ = models.lookup(f"{path}:lin")
    assert (family.default_batch, family.description, family.compile_targets, family.default_seq) == \
        (6, "one linear", "0", 12)
    assert models.cost(f"{path}:lin", 6, "fp16") == {"flop": 2 * 6 * 16 * 16, "bytes": 2}
    assert models.build(f"{path}:lin", seq=5)[1][0].shape == (6, 5, 16)
    with pytest.raises(ValueError, match="takes no sequence length"):
        models.check_seq(models.lookup("mlp")[0], "mlp", 5)


def test_a_package_module_reference_imports_from_the_current_folder(tmp_path, monkeypatch):
    write(tmp_path, "mypkg/__init__.py", "")
    write(tmp_path, "mypkg/nets.py", '''
        import torch
        def tiny(batch, dtype, device):
            return torch.nn.Linear(4, 2).to(device, dtype), (torch.randn(batch, 4, device=device, dtype=dtype),)
    ''')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    module, (x,) = models.build("mypkg.nets:tiny", batch=2)
    assert isinstance(module, torch.nn.Linear) and x.shape == (2, 4)
    source = models.lookup("mypkg.nets:tiny")[0].source
    assert source == {"kind": "module", "module": "mypkg.nets", "function": "tiny",
                      "file": str(tmp_path / "mypkg" / "nets.py")}


def test_functions_of_workloads_are_found_by_name_and_listed(tmp_path, monkeypatch):
    write(tmp_path / "wl", "nets.py", '''
        import torch
        from tracekit import workload

        def helper(x):
            return x

        @workload(batch=2, description="a tiny linear")
        def tiny_linear(batch, dtype, device):
            return torch.nn.Linear(4, 2), (torch.randn(batch, 4),)

        def plain(batch, dtype, device):
            return torch.nn.Linear(4, 4), (torch.randn(batch, 4),)
    ''')
    write(tmp_path / "wl", "broken.py", "import torch\ndef needs_missing(batch, dtype, device):\n    pass\n"
                                         "import not_a_real_package\n")
    monkeypatch.setenv("TRACEKIT_WORKLOADS", str(tmp_path / "wl"))
    assert models.default_batch("tiny_linear") == 2 and models.lookup("plain")[0].default_batch == 1
    assert models.lookup("tiny_linear")[0].source["found_in"] == str(tmp_path / "wl")
    assert models.lookup("mlp")[0].source == {"kind": "built-in", "module": "tracekit.models.mlp"}  # built-ins win
    r = CliRunner().invoke(main, ["models", "--json"])
    rows = {row["name"]: row for row in json.loads(r.output)}
    assert rows["tiny_linear"]["description"] == "a tiny linear" and rows["tiny_linear"]["batch"] == 2
    assert rows["tiny_linear"]["source"]["file"] == str(tmp_path / "wl" / "nets.py")
    assert "plain" in rows and "helper" not in rows
    assert "No module named 'not_a_real_package' (line 4)" in rows["needs_missing"]["problem"]
    assert rows["mlp"]["kind"] == "built-in" and rows["hf:gpt2"]["kind"] == "library"
    text = CliRunner().invoke(main, ["models"]).output
    assert "tiny_linear" in text and "workload functions" in text and "hf:gpt2" in text


def test_a_name_defined_twice_in_workloads_says_where(tmp_path, monkeypatch):
    for name in ("a.py", "b.py"):
        write(tmp_path, name, "def twice(batch, dtype, device):\n    pass\n")
    monkeypatch.setenv("TRACEKIT_WORKLOADS", str(tmp_path))
    with pytest.raises(WorkloadError, match="defined in .*a.py and .*b.py"):
        models.lookup("twice")


@pytest.mark.parametrize("ref, problem", [
    ("their_file.py:bad_return", "their_file.py: bad_return returned Linear; a workload returns (nn.Module"),
    ("their_file.py:bad_inputs", "their_file.py: bad_inputs returned inputs of int;"),
    ("their_file.py:not_a_module", "their_file.py: not_a_module returned a str as the model;"),
    ("their_file.py:raises", "their_file.py: raises(batch=1, dtype=torch.float32, device='cpu') raised "
                             f"RuntimeError: their bug (line {THEIRS.splitlines().index(RAISE) + 1})"),
    ("their_file.py:wrong_signature", "their_file.py: wrong_signature(x) cannot be called as "
                                      "wrong_signature(batch, dtype, device)"),
    ("their_file.py:missing", "their_file.py: no function 'missing' (functions there: their_model, bad_return"),
    ("import_error.py:f", "import_error.py: cannot import it: ModuleNotFoundError: No module named "
                          "'not_a_real_package' (line 3)"),
    ("syntax_error.py:f", "syntax_error.py: cannot import it: SyntaxError: expected ':' (line 1)"),
    ("no_such_file.py:f", "no_such_file.py: no such file"),
    ("no_such_package.mod:f", "no_such_package.mod: no module named 'no_such_package'"),
])
def test_a_bad_workload_file_is_one_line_exit_2_and_no_run_folder(theirs, monkeypatch, ref, problem):
    folder = theirs.parent
    write(folder, "import_error.py", "import torch\n\nimport not_a_real_package\n")
    write(folder, "syntax_error.py", "def f(batch, dtype, device)\n    pass\n")
    monkeypatch.chdir(folder)
    out = folder / "traces"
    r = CliRunner().invoke(main, ["trace", "--model", ref, "--out", str(out)])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {problem}"), r.output
    assert "Traceback" not in r.output and not out.exists()


@pytest.mark.slow
def test_a_workload_file_runs_like_a_built_in_and_analyze_reads_it(theirs, tmp_path):
    manifest = runner.run(RunSpec(f"{theirs}:their_model", "eager", batch=4, **QUICK), tmp_path / "t",
                          log=lambda m: None)
    assert manifest.status == "ok" and manifest.max_abs_diff == 0.0
    assert manifest.label == "their_file-their_model-b4" and manifest.parameters == 32 * 64 + 64 + 64 * 8 + 8
    assert manifest.source.file == str(theirs) and manifest.source.function == "their_model"
    on_disk = json.loads((tmp_path / "t" / "their_file-their_model-b4" / "eager" / "run.json").read_text())
    assert on_disk["source"] == manifest.source.to_dict() and on_disk["spec"]["model"] == f"{theirs}:their_model"
    row = analyze(tmp_path / "t").runs.iloc[0]
    assert row["run"] == "their_file-their_model-b4/eager" and row["iterations"] == 2 and row["status"] == "ok"


@pytest.mark.slow
def test_a_suite_names_workload_files_and_a_bad_one_is_a_skipped_row(theirs, tmp_path, monkeypatch):
    monkeypatch.chdir(theirs.parent)
    suite = write(tmp_path, "mine.toml", '''
        name = "mine"
        [defaults]
        warmup = 1
        iters = 3
        profile_iters = 2
        [[grid]]
        model = ["their_file.py:their_model", "their_file.py:missing"]
        mode = "eager"
    ''')
    s = load_suite(suite)
    planned = plan(s, tmp_path / "traces")
    assert [p.name for p in planned] == ["their_file-their_model/eager", "their_file-missing/eager"]
    assert planned[0].problem is None and "no function 'missing'" in planned[1].problem
    manifests, ran = run_planned(s, planned, tmp_path / "traces")
    assert ran == ["their_file-their_model/eager"]  # the bad one never started a process
    assert manifests["their_file-their_model/eager"].status == "ok"
    assert manifests["their_file-missing/eager"].status == "skipped"


@pytest.mark.slow
def test_make_trace_runs_an_outside_file_compiled_and_analyze_reports_it(theirs, tmp_path):
    # The acceptance: someone's torch-only file, `make trace MODEL=path:fn MODE=default`, then `tracekit analyze`.
    python = f"{sys.executable} -m tracekit"
    traces = tmp_path / "traces"
    for mode in ("eager", "default"):
        r = subprocess.run(["make", "-s", "-C", str(ROOT), "trace", f"MODEL={theirs}:their_model", f"MODE={mode}",
                            "SETUP=", f"TRACEKIT={python}", f"TRACES={traces}", "ITERS=5"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([*python.split(), "analyze", str(traces), "--json", "--out", str(tmp_path / "reports")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    runs = {row["run"]: row for row in result["runs"]}
    assert set(runs) == {"their_file-their_model/eager", "their_file-their_model/default"}
    assert all(row["status"] == "ok" and row["iterations"] == 10 for row in runs.values())
    compiled = json.loads((traces / "their_file-their_model" / "default" / "run.json").read_text())
    assert compiled["max_abs_diff"] < 1e-4 and compiled["diff_ok"]  # the dict output compared tensor by tensor
    report = json.loads((tmp_path / "reports" / "runs.json").read_text())
    comparison = {row["mode"]: row for row in report["comparison"]}
    assert comparison["default"]["baseline_run"] == "their_file-their_model/eager"
    assert comparison["default"]["speedup"] > 0


def test_surgical_compiles_the_targets_a_workload_file_names(tmp_path):
    path = write(tmp_path, "targets.py", '''
        import torch
        from tracekit import workload

        @workload(compile_targets="1")
        def two(batch, dtype, device):
            return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)), (torch.randn(batch, 4),)
    ''')
    module, inputs = models.build(f"{path}:two")
    prepared = backends.get("surgical").prepare(module, inputs, RunSpec(f"{path}:two", "surgical", device="cpu"))
    assert prepared.info["compiled"] == ["1"]

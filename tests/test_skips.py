"""Without ../shared/fixtures (a fresh clone), only the tests of other projects' traces skip,
and their skip says what they need; the tests of our own traces (tests/data) run. Checked over
every test file."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# Keeps the tests that read real traces (conftest's `fixtures` or `real_trace`, directly or through
# another fixture) of the test files collected.
PLUGIN = '''
def pytest_collection_modifyitems(config, items):
    keep = [i for i in items if {"fixtures", "real_trace"} & set(getattr(i, "fixturenames", ()))]
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep
'''


def test_every_test_of_real_traces_runs_ours_and_skips_others_saying_what_they_need(tmp_path):
    """Every test file that names the fixtures is collected (the others cannot use them)."""
    files = [str(path.relative_to(ROOT)) for path in sorted(TESTS.rglob("test_*.py"))
             if path.name != "test_skips.py" and re.search(r"\b(real_trace|fixtures)\b", path.read_text())]
    (tmp_path / "only_real_traces.py").write_text(PLUGIN)
    env = {**os.environ, "TRACEKIT_FIXTURES": str(tmp_path / "absent"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "only_real_traces",
                        "-m", "not gpu and not slow", *files], cwd=ROOT, capture_output=True, text=True,
                       timeout=900, env=env)
    assert r.returncode == 0, r.stdout[-3000:]
    skips = [line for line in r.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips and all("needs other projects' real traces (HolisticTraceAnalysis' test traces" in s
                         and "set TRACEKIT_FIXTURES" in s for s in skips), skips
    assert " passed" in r.stdout.splitlines()[-1]   # ours (own:, tests/data) ran, and none skipped
    # the section of the README the skips point at is there
    section = re.search(r"\(README\.md, '([^']+)'\)", skips[0]).group(1)
    assert re.search(rf"^#+ {re.escape(section)}$", (ROOT / "README.md").read_text(), re.M)


def _code_strings(path: Path) -> list[str]:
    """The string literals of a Python file, docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


def test_no_test_file_looks_for_other_projects_traces_by_itself():
    """Other projects' traces are found in one place (tests/owndata.py's FIXTURES, through conftest's
    fixtures): a test that builds its own path to them skips where they are absent, saying nothing
    of what it needs, and may skip our own traces with them (as test_modules.py once did)."""
    own = [path for path in TESTS.rglob("*.py") if path.name not in ("owndata.py", "test_skips.py")
           and any(s == "shared" or "shared/fixtures" in s for s in _code_strings(path))]
    assert own == []

"""The committed reports (issue 33's weight): what a reader opens stays, every link in the README
and the reports resolves to a tracked file, each suite's cells are one packed manifests file, and
the tracked files outside tests/ stay under 8 MB."""

import json
import posixpath
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT_MB = 8  # issue 33: tracked files outside tests/ under 8 MB (10**6 bytes a MB)
# a Markdown link or image, [text](target) / ![alt](target), and an HTML src/href
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|(?:src|href)=\"([^\"]+)\"")


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout:
        pytest.skip("not a git checkout")
    return out.stdout.splitlines()


def _relative_links(text: str) -> list[str]:
    """The relative link targets of a Markdown (or HTML) text, without their #anchor or ?query."""
    out = []
    for m in LINK.finditer(re.sub(r"```.*?```|`[^`\n]*`", "", text, flags=re.S)):
        target = unquote((m.group(1) or m.group(2)).split("#")[0].split("?")[0])
        if target and not re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) and not target.startswith("/"):
            out.append(target)
    return out


def test_every_relative_link_of_the_readme_and_the_reports_is_a_tracked_file():
    tracked = _tracked()
    known = set(tracked) | {p.as_posix() for f in tracked for p in Path(f).parents}  # files and their folders
    pages = [f for f in tracked if f == "README.md" or (f.startswith("reports/") and f.endswith((".md", ".html")))]
    broken = [f"{page}: {target}" for page in pages for target in _relative_links((ROOT / page).read_text())
              if posixpath.normpath(posixpath.join(posixpath.dirname(page), target)) not in known]
    assert len(pages) > 30 and broken == []


def test_the_committed_suites_keep_a_run_json_only_beside_an_example_trace(tmp_path):
    """A cell's run.json stays in its folder only beside its example trace (or as the measured run
    an example is checked against); each suite's cells are in its manifests.jsonl.gz, which unpacks
    (benchmarks/packed_manifests.py) to the very run.json files of the example folders."""
    tracked = [f for f in _tracked() if f.startswith("reports/")]
    packed = [Path(p) for p in tracked if p.endswith("/manifests.jsonl.gz")]
    assert len(packed) >= 10
    for p in packed:
        r = subprocess.run([sys.executable, str(ROOT / "benchmarks/packed_manifests.py"), "unpack", str(ROOT / p),
                            str(tmp_path / p.parent)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        for f in tracked:
            if f.startswith(f"{p.parent}/traces/") and f.endswith("/run.json"):
                unpacked = tmp_path / p.parent / Path(f).relative_to(p.parent / "traces")
                assert json.loads(unpacked.read_text()) == json.loads((ROOT / f).read_text()), f
    loose = {Path(f).parent.as_posix() for f in tracked if f.endswith("/run.json")}
    traced = {Path(f).parent.as_posix() for f in tracked if ".pt.trace.json" in f}
    assert sorted(loose - traced) == WITHOUT_TRACE


# run.json files left in reports/ with no trace beside them: the folders of two reports that are not a
# suite's traces/ (repeats' eager run, the distributed job's two modes). (The H200 example runs that
# tests/analysis/test_critical_path.py checks are test data: tests/data/h200/predict-h200.)
WITHOUT_TRACE = ["reports/h100/distributed/distributed-h100/vit16x6x384-train-step-ddp-np2/default",
                 "reports/h100/distributed/distributed-h100/vit16x6x384-train-step-ddp-np2/eager",
                 "reports/h100/repeats/vit16x6x384-b1/eager"]


def test_the_tracked_files_outside_tests_weigh_under_8_mb():
    sizes = {f: (ROOT / f).stat().st_size for f in _tracked() if not f.startswith("tests/") and (ROOT / f).is_file()}
    assert sum(sizes.values()) < LIMIT_MB * 10**6, sorted(sizes, key=sizes.get)[-10:]

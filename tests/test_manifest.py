import json
import math
from pathlib import Path

import pytest

from tracekit import backends, runner
from tracekit.manifest import FILENAME, VERSION, Manifest
from tracekit.spec import RunSpec

ROOT = Path(__file__).resolve().parents[1]
# Written on the H100 before run.json had a version, a phase or compile_only in its spec.
OLD = ROOT / "tests/data/h100/vit-study/vit16x6x384-b1/eager/run.json"


def test_a_version_1_manifest_reads_with_defaults_and_writes_back_unchanged(tmp_path):
    data = json.loads(OLD.read_text())
    assert "manifest_version" not in data and "phase" not in data["spec"]
    m = Manifest.read(OLD.parent)
    assert m.manifest_version == 1 and m.status == "ok" and m.model == "vit16x6x384"
    assert m.phase == "inference" and m.spec["batch"] == 1
    assert m.latency("median") == data["latency_ms"]["median"] and math.isnan(m.latency("p99"))
    assert m.ran_on_name == "NVIDIA H100 80GB HBM3"
    assert m.compile_cache is None and m.prepare_s is None and m.extra == {}
    m.write(tmp_path)
    assert json.loads((tmp_path / FILENAME).read_text()) == {**data, "manifest_version": 1}


def test_fields_of_a_newer_manifest_survive_a_read_and_a_rewrite(tmp_path):
    newer = {"manifest_version": VERSION + 1, "spec": {"model": "mlp", "rank": 3}, "status": "running",
             "world_size": 8, "gpu_clocks": {"sm_MHz": 1980}}
    (tmp_path / FILENAME).write_text(json.dumps(newer))
    m = Manifest.read(tmp_path)
    assert m.extra == {"world_size": 8, "gpu_clocks": {"sm_MHz": 1980}} and m["world_size"] == 8
    m.status = "timeout"
    m.write(tmp_path)
    assert json.loads((tmp_path / FILENAME).read_text()) == {**newer, "status": "timeout"}


def test_fields_not_recorded_are_left_out_and_read_like_missing_keys():
    m = Manifest(status="failed", reason="boom")
    assert m.to_dict() == {"manifest_version": VERSION, "spec": {}, "status": "failed", "reason": "boom"}
    assert m.get("compile_s") is None and m["reason"] == "boom"
    with pytest.raises(KeyError):
        m["latency_ms"]
    m.add_note("first")
    m.add_note("second")
    assert m.note == "first; second"


def test_missing_or_damaged_run_json_reads_as_none(tmp_path):
    assert Manifest.read(tmp_path) is None
    (tmp_path / FILENAME).write_text("[1, 2]")
    assert Manifest.read(tmp_path) is None
    (tmp_path / FILENAME).write_text("{not json")
    assert Manifest.read(tmp_path / FILENAME) is None


def test_the_runner_writes_the_current_version(tmp_path, monkeypatch):
    b = backends.Backend("nope", "test", lambda *a: None, unavailable=lambda spec: "needs foo")
    monkeypatch.setitem(backends.BACKENDS, "nope", b)
    returned = runner.run(RunSpec("mlp", "nope"), tmp_path, log=lambda m: None)
    on_disk = Manifest.read(tmp_path / "mlp" / "nope")
    assert on_disk == returned
    assert on_disk.manifest_version == VERSION and on_disk.status == "skipped" and on_disk.spec["model"] == "mlp"

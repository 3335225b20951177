import gzip
import json
import math
from pathlib import Path

from msgspec.structs import replace

from tracekit import backends
from tracekit.capture import runner
from tracekit.manifest import FILENAME, VERSION, Manifest, Timer
from tracekit.manifest.spec import RunSpec

ROOT = Path(__file__).resolve().parents[1]
# Written on the H100 before run.json had a version, a phase or compile_only in its spec.
OLD = ROOT / "tests/data/h100/vit-study/vit16x6x384-b1/eager/run.json"


def test_a_version_1_manifest_reads_with_defaults_and_writes_back_unchanged(tmp_path):
    data = json.loads(OLD.read_text())
    assert "manifest_version" not in data and "phase" not in data["spec"]
    m = Manifest.read(OLD.parent)
    assert m.manifest_version == 1 and m.status == "ok" and m.model == "vit16x6x384"
    assert m.phase == "inference" and m.spec == RunSpec("vit16x6x384", batch=1, device="cuda")
    assert m.environment.cuda_driver == "580.159.04" and m.profile.iterations == 10 and m.latency_ms.n == 50
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
    assert m.extra == {"world_size": 8, "gpu_clocks": {"sm_MHz": 1980}} and m.spec == RunSpec("mlp")
    m.status = "timeout"
    m.write(tmp_path)
    assert json.loads((tmp_path / FILENAME).read_text()) == {**newer, "status": "timeout"}


def test_fields_not_recorded_are_left_out_and_read_like_missing_keys():
    m = Manifest(status="failed", reason="boom", latency_ms=Timer(median=2.0, timer="perf_counter"))
    assert m.to_dict() == {"manifest_version": VERSION, "status": "failed", "reason": "boom",
                           "latency_ms": {"median": 2.0, "timer": "perf_counter"}}
    assert m.compile_s is None and m.latency("median") == 2.0 and math.isnan(m.latency("p10"))
    assert Manifest.from_dict(m.to_dict()) == m
    m.add_note("first")
    m.add_note("second")
    assert m.note == "first; second"


def _committed_manifests() -> list[tuple[str, dict]]:
    """(where, the parsed run.json) of every manifest committed under reports/ and tests/data: the
    run.json and workload.json files, and each cell of a suite's packed manifests.jsonl.gz."""
    out = [(str(p), json.loads(p.read_text())) for folder in ("reports", "tests/data")
           for pattern in ("run.json", "workload.json") for p in (ROOT / folder).rglob(pattern)]
    for packed in (ROOT / "reports").rglob("manifests.jsonl.gz"):
        with gzip.open(packed, "rt", encoding="utf-8") as f:
            out += [(f"{packed}: {row['cell']}", row["manifest"]) for row in map(json.loads, f)]
    return out


def test_every_committed_manifest_reads_typed_and_writes_back_as_it_was():
    """The manifests committed under reports/ and tests/data (versions 1 to 5, H100 and CPU runs,
    bench cells, ncu workloads) each read with a RunSpec and every section it holds typed (none
    read as damaged), and are written back unchanged (a version 1 file gains its version)."""
    manifests = _committed_manifests()
    assert len(manifests) > 100
    for where, data in manifests:
        m = Manifest.from_dict(data)
        assert isinstance(m.spec, RunSpec) and m.spec.model == data["spec"]["model"], where
        typed = [k for k in data if isinstance(data[k], dict) and k not in ("spec", "backend")]
        assert all(getattr(m, k) is not None for k in typed if k not in m.extra), where
        assert m.to_dict() == {"manifest_version": 1, **data}, where


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
    assert on_disk.manifest_version == VERSION and on_disk.status == "skipped" and on_disk.spec.model == "mlp"


def test_sections_are_typed_and_a_changed_one_is_written_anew(tmp_path):
    """Sections read as typed records; one left as read is written back as read (a key of a newer
    version inside it too), one changed is written from its record."""
    data = {"spec": {"model": "mlp", "batch": 4, "dtype": "fp32"}, "status": "ok",
            "latency_ms": {"median": 1.5, "p10": 1.0, "timer": "cuda_events", "p99": 3.0},
            "host_load": {"start": {"loadavg_1m": 0.5, "cpus": 2}}, "environment": {"device_name": "cpu x"}}
    m = Manifest.from_dict(data)
    assert (m.latency_ms.median, m.latency_ms.timer, m.host_load.start.cpus) == (1.5, "cuda_events", 2)
    assert m.spec.batch == 4 and m.ran_on_name == "cpu x"
    assert m.to_dict()["latency_ms"] == data["latency_ms"]          # p99, unknown here, kept
    m.latency_ms = replace(m.latency_ms, median=1.25)
    assert m.to_dict()["latency_ms"] == {"median": 1.25, "p10": 1.0, "timer": "cuda_events"}
    assert m.to_dict()["host_load"] == data["host_load"]


def test_a_damaged_section_reads_as_not_recorded_and_is_kept(tmp_path):
    data = {"spec": {"model": "mlp"}, "status": "ok", "latency_ms": {"median": "fast"}, "profile": [1, 2]}
    (tmp_path / FILENAME).write_text(json.dumps(data))
    m = Manifest.read(tmp_path)
    assert m.latency_ms is None and m.profile is None and math.isnan(m.latency("median"))
    m.write(tmp_path)
    assert json.loads((tmp_path / FILENAME).read_text()) == {**data, "manifest_version": 1}

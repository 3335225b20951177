"""The tracks of ``tracekit analyze --annotate`` (tracekit.analysis.annotation_tracks): hand-made traces
with known answers, and our real H100 traces, whose annotated copies tracekit reads with the
same figures as the originals. The CLI's option is tested here too (tests/test_cli.py is
shared with other work in progress)."""

from __future__ import annotations

import gzip
import json
import shutil
from collections import defaultdict
from decimal import Decimal

import pytest
from click.testing import CliRunner

import tracekit
from tests.analysis.attribution.test_gpu_ops import eager_scopes
from tests.chrome_trace import problems
from tests.owndata import h100_trace
from tests.tracebuilder import TraceBuilder, add_cpu_range, eager_trace
from tracekit.analysis import critical_path
from tracekit.analysis.annotation_tracks import NO_TRACK, NOTHING, annotate
from tracekit.analysis.critical_path import reasons
from tracekit.analysis.trace_analysis import analyze_trace
from tracekit.cli import main
from tracekit.report.annotation_text import annotation_note
from tracekit.trace import load
from tracekit.trace.annotate import PID


def _ours(path) -> tuple[dict[str, list[dict]], dict]:
    """The annotated copy's tracks (thread name -> its X events, numbers as their JSON text
    parses to float: ``Decimal(str)`` gives the exact text back), and the whole trace."""
    trace = json.loads(gzip.decompress(path.read_bytes()), parse_float=_Exact)
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["pid"] == PID and e["name"] == "thread_name"}
    tracks = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["pid"] == PID and e["ph"] == "X":
            tracks[names[e["tid"]]].append(e)
    return dict(tracks), trace


def _misnested(events: list[dict]) -> list[dict]:
    """The slices of one track that overlap a slice without lying inside it, from the exact
    decimals of the file (parsed as floats, times of ~4.5e12 µs are only good to ~1 ns)."""
    spans = [(Decimal(str(e["ts"])), Decimal(str(e["ts"])) + Decimal(str(e["dur"])), i) for i, e in enumerate(events)]
    spans.sort(key=lambda s: (s[0], -s[1]))
    bad, stack = [], []
    for start, end, i in spans:
        while stack and stack[-1] <= start:
            stack.pop()
        if stack and end > stack[-1]:
            bad.append(events[i])
        stack.append(end)
    return bad


class _Exact(float):
    """A float that keeps the JSON text it was parsed from."""

    def __new__(cls, text: str):
        self = super().__new__(cls, text)
        self.text = text
        return self

    def __str__(self) -> str:
        return self.text


def _per_step(events: list[dict]) -> dict[int, float]:
    out = defaultdict(float)
    for e in events:
        out[e["args"]["step"]] += e["dur"]
    return dict(out)


def _relative(events: list[dict], base: float) -> list[tuple]:
    return [(e["name"], round(e["ts"] - base, 3), round(e["ts"] + e["dur"] - base, 3)) for e in events]


def test_critical_path_and_idle_tracks_of_a_hand_made_trace(tmp_path):
    # 2 iterations of 100 µs: launch (4 µs) at 10 and 50 of each, kernels of 10 µs 5 µs after each launch
    t = eager_trace()
    result = annotate(t.write(tmp_path / "t.pt.trace.json.gz"))
    assert result["notes"].tolist() == [[]]
    tracks, trace = _ours(result["annotated"][0])
    assert problems(trace) == []
    assert _per_step(tracks["critical path"]) == {1: 100.0, 2: 100.0}   # host-bound: the host's 100 µs per iteration
    assert _relative(sorted(tracks["critical path"], key=lambda e: e["ts"]), t.base) == [
        ("cpu", 0, 10), ("launch", 10, 14), ("cpu", 14, 50), ("launch", 50, 54), ("cpu", 54, 100),
        ("cpu", 100, 110), ("launch", 110, 114), ("cpu", 114, 150), ("launch", 150, 154), ("cpu", 154, 200)]
    its = tracks["critical path: iterations"]
    assert [(e["name"], e["args"]["latency_us"], e["args"]["launch_us"]) for e in its] == [
        ("iteration 1", 100.0, 8.0), ("iteration 2", 100.0, 8.0)]
    # GPU ops [15,25) [55,65) [115,125) [155,165): three gaps, each before a launch that came late
    assert _relative(tracks["GPU idle (device 0)"], t.base) == [
        ("host_wait", 25, 55), ("host_wait", 65, 115), ("host_wait", 125, 155)]
    assert [e["args"]["gap_us"] for e in tracks["GPU idle (device 0)"]] == [30.0, 50.0, 30.0]


def test_an_iteration_that_ends_inside_the_one_before_gets_a_track_of_its_own(tmp_path):
    t = TraceBuilder()
    t.step(1, 0, 50)
    t.kernel("long", start=15, dur=135, stream=8, launch_at=10)           # iteration 1 finishes at 150
    t.step(2, 60, 40)
    t.kernel("short", start=75, dur=10, stream=7, launch_at=70)           # iteration 2 at 100, inside it
    tracks, trace = _ours(tracekit.annotate(t.write(tmp_path / "t.json"))["annotated"][0])
    assert _relative(tracks["critical path"], t.base) == [
        ("kernel", 15, 150), ("launch_latency", 14, 15), ("launch", 10, 14), ("cpu", 0, 10)]
    assert _relative(tracks["critical path (2)"], t.base) == [("cpu", 74, 100), ("launch", 70, 74), ("cpu", 60, 70)]
    assert [e["args"]["latency_us"] for e in tracks["critical path: iterations"]] == [150.0, 40.0]
    assert all(_misnested(events) == [] for events in tracks.values()) and problems(trace) == []


def test_module_track_nests_module_paths_and_ops(tmp_path):
    t = eager_scopes()                      # an MLP block's GPU ops in its module scopes, and some outside
    t.kernel("gemm_tail", start=50, dur=1, launch_at=15)                   # a second GPU op of blocks.0.mlp.0's addmm
    add_cpu_range(t, "aten::mul", 73, 5)
    t.kernel("mul_kernel", start=75, dur=2, launch_at=74)                  # the model's own op
    tracks, _ = _ours(tracekit.annotate(t.write(tmp_path / "m.json"))["annotated"][0])
    modules = tracks["modules (device 0, stream 7)"]
    assert sorted(_relative(modules, t.base), key=lambda s: (s[1], -s[2])) == [
        ("blocks", 40, 57), ("blocks.0", 40, 57), ("blocks.0.mlp", 40, 57),
        ("blocks.0.mlp.0", 40, 51), ("addmm", 40, 51),                    # two GPU ops of one op: one slice
        ("blocks.0.mlp.1", 51, 54), ("gelu", 51, 54),
        ("add", 55, 57),                                                   # the block's own op
        ("(unattributed)", 60, 72), ("(no op)", 60, 72),                   # another thread's launch; no launch
        ("(model)", 75, 77), ("mul", 75, 77),
        ("(unattributed)", 97, 99), ("(no op)", 97, 99)]                   # launched outside every scope
    addmm = next(e for e in modules if e["name"] == "addmm")
    assert addmm["args"] == {"module": "blocks.0.mlp.0", "op": "addmm", "gpu_ops": 2, "rule": "module scope"}
    assert _misnested(modules) == []


def test_a_track_that_cannot_be_made_is_a_note_and_the_rest_stands(tmp_path):
    t = TraceBuilder()
    t.step(1, 0, 100)
    t.kernel("a", start=10, dur=5)              # no launch calls: no host side of a critical path
    t.kernel("b", start=40, dur=5)
    cpu = TraceBuilder()
    cpu.step(1, 0, 100)
    cpu.cpu_op("aten::mm", 10, 50)
    t.write(tmp_path / "gpu.json")
    cpu.write(tmp_path / "cpu.json")
    result = annotate(tmp_path).set_index("trace")
    gpu_row, cpu_row = result.loc[tmp_path / "gpu.json"], result.loc[tmp_path / "cpu.json"]
    assert gpu_row["tracks"] == ["GPU idle (device 0)", "modules (device 0, stream 7)"]
    assert gpu_row["notes"] == [{"code": NO_TRACK, "track": "critical path", "why": {"code": reasons.NO_LAUNCH_CALLS}}]
    assert [annotation_note(n) for n in gpu_row["notes"]] == [
        "no critical path track: no launch calls (CUDA runtime or driver events) in the trace: the host side of the "
        "path is unknown"]
    tracks, _ = _ours(gpu_row["annotated"])
    assert _relative(tracks["GPU idle (device 0)"], t.base) == [("other", 15, 40)]
    assert cpu_row["annotated"] is None and cpu_row["notes"] == [{"code": NOTHING}]
    assert annotation_note(cpu_row["notes"][0]) == "no GPU ops in the trace: nothing to annotate"
    worded = tracekit.annotate(tmp_path).set_index("trace")["notes"]   # the API's notes: in words
    assert worded[tmp_path / "cpu.json"] == ["no GPU ops in the trace: nothing to annotate"]
    assert worded[tmp_path / "gpu.json"][0].startswith("no critical path track: no launch calls")


@pytest.mark.parametrize("run", ["vit16x6x384/eager", "vit16x6x384-b1/reduce-overhead"])
def test_annotated_real_trace_reads_as_the_original(tmp_path, run):
    trace = shutil.copy(h100_trace(run), tmp_path)
    result = annotate(trace)
    copy = result["annotated"][0]
    tracks, whole = _ours(copy)
    assert problems(whole) == []
    assert all(_misnested(events) == [] for events in tracks.values())
    original, annotated = analyze_trace(load(trace)), analyze_trace(load(copy))
    assert annotated.row == original.row             # kernels, launches, busy, idle by cause, verdict...
    for name, table in original.tables.items():
        assert table.equals(annotated.tables[name]), name
    # the critical path track adds up to each iteration's latency
    cp = critical_path.analyze(load(trace))
    latency = dict(zip(cp.iterations["step"], cp.iterations["latency_us"]))
    assert len(latency) == 10
    assert _per_step(tracks["critical path"]) == pytest.approx(latency, abs=1e-3 * len(cp.segments))
    assert {e["args"]["step"]: e["args"]["latency_us"] for e in tracks["critical path: iterations"]} == \
        pytest.approx(latency)
    gaps = tracks["GPU idle (device 0)"]
    assert sum(e["dur"] for e in gaps) == pytest.approx(original.row["idle_us"], abs=1e-3 * len(gaps))


def test_copies_go_to_the_folder_given_in_the_traces_folders(study, tmp_path_factory):
    out = tmp_path_factory.mktemp("copies")
    result = tracekit.annotate(study, out=out)
    name = "host_1.1.annotated.pt.trace.json.gz"
    assert result["annotated"].tolist() == [out / "a" / "first" / name, out / "b" / "second" / name]
    assert result["trace"].tolist() == [study / "a" / "first" / "host_1.1.pt.trace.json.gz",
                                        study / "b" / "second" / "host_1.1.pt.trace.json.gz"]
    assert not list(study.rglob("*.annotated.*"))


def test_analyze_annotate_writes_copies_a_second_analyze_skips(study, tmp_path):
    def analyze(*options):
        r = CliRunner().invoke(main, ["analyze", str(study), "--json", "--out", str(tmp_path / "r"), *options])
        assert r.exit_code == 0, r.output
        return r, [(x["run"], x["trace"], x["kernels"], x["idle_us"]) for x in json.loads(r.stdout)["runs"]]

    r, first = analyze("--annotate")
    copies = sorted(study.rglob("*.annotated.pt.trace.json.gz"))
    assert [c.parent for c in copies] == [study / "a" / "first", study / "b" / "second"]
    assert all(f"annotated {c}" in r.stderr for c in copies)
    written = [c.stat().st_mtime_ns for c in copies]
    assert analyze()[1] == first and len(first) == 2                          # the copies are no runs
    assert [c.stat().st_mtime_ns for c in sorted(study.rglob("*.annotated.*"))] == written   # nor rewritten

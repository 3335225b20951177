"""Writing a copy of a trace with extra tracks (tracekit.trace.annotate): the original's events
unchanged, the tracks as named threads of their own process, the Chrome Trace Event Format kept,
and the copies never taken for runs."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest

from tests.chrome_trace import problems
from tests.tracebuilder import eager_trace, write_run
from tracekit.trace import TraceError, discover
from tracekit.trace.annotate import CAT, PID, annotated_path, write
from tracekit.trace.reader import is_trace_file


def _read(path) -> dict:
    return json.loads(gzip.decompress(path.read_bytes()))


def _tracks(base: float) -> dict[str, pd.DataFrame]:
    """A parent slice and a child ending with it (times to the ns), and an empty track."""
    return {"outer": pd.DataFrame({"name": ["parent", "child"], "start_us": [base + 1.0, base + 2.0004],
                                   "end_us": [base + 10.0016, base + 10.0016], "step": [1, 1], "event": ["a", ""]}),
            "nothing": pd.DataFrame(columns=["name", "start_us", "end_us"]),
            "second": pd.DataFrame({"name": ["gap"], "start_us": [base + 20.0], "end_us": [base + 25.0]})}


def test_annotated_copies_are_named_beside_the_trace_and_skipped_as_runs(tmp_path):
    assert annotated_path(tmp_path / "w_1.17.pt.trace.json.gz") == tmp_path / "w_1.17.annotated.pt.trace.json.gz"
    assert annotated_path(tmp_path / "t.json", tmp_path / "out") == tmp_path / "out" / "t.annotated.pt.trace.json.gz"
    assert not is_trace_file(annotated_path(tmp_path / "t.json"))
    assert not is_trace_file(tmp_path / "t.annotated.pt.trace.json")
    run = write_run(tmp_path / "traces" / "eager", eager_trace())
    bare = eager_trace().write(tmp_path / "traces" / "bare.pt.trace.json.gz")
    for trace in (run / "host_1.1.pt.trace.json.gz", bare):
        write(trace, _tracks(0.0), annotated_path(trace))
    runs = discover(tmp_path / "traces")
    assert [(r.name, [p.name for p in r.traces]) for r in runs] == [
        ("bare.pt.trace.json.gz", ["bare.pt.trace.json.gz"]), ("eager", ["host_1.1.pt.trace.json.gz"])]


@pytest.mark.parametrize("name", ["t.pt.trace.json.gz", "t.json"])
def test_the_copy_holds_every_event_and_the_named_tracks(tmp_path, name):
    t = eager_trace()
    trace = t.write(tmp_path / name)
    original = t.build()
    dest = write(trace, _tracks(t.base), tmp_path / "out" / "copy.pt.trace.json.gz")
    copy = _read(dest)
    assert {k: v for k, v in copy.items() if k != "traceEvents"} == {k: v for k, v in original.items()
                                                                     if k != "traceEvents"}
    ours = [e for e in copy["traceEvents"] if e["pid"] == PID]
    assert [e for e in copy["traceEvents"] if e["pid"] != PID] == original["traceEvents"]   # same events, same order
    assert problems(copy) == []
    meta = {(e["tid"], e["name"]): e["args"] for e in ours if e["ph"] == "M"}
    assert meta[(0, "process_name")] == {"name": CAT}
    assert meta[(1, "thread_name")] == {"name": "outer"} and meta[(2, "thread_name")] == {"name": "second"}
    assert (3, "thread_name") not in meta                                  # an empty track is left out
    slices = [(e["tid"], e["name"], e["ts"], e["dur"], e["args"]) for e in ours if e["ph"] == "X"]
    b = t.base
    assert slices == [(1, "parent", b + 1.0, 9.002, {"step": 1, "event": "a"}),
                      (1, "child", b + 2.0, 8.002, {"step": 1}),          # whole ns; an empty arg is left out
                      (2, "gap", b + 20.0, 5.0, {})]
    assert all(e["cat"] == CAT for e in ours if e["ph"] == "X")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["copy.pt.trace.json.gz"]   # no temporary left


def test_empty_event_arrays_and_the_array_format(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text('{"schemaVersion": 1, "traceEvents": [ ]}')
    copy = _read(write(empty, _tracks(0.0), tmp_path / "a.pt.trace.json.gz"))
    assert problems(copy) == [] and len(copy["traceEvents"]) == 2 + 4 + 3
    array = tmp_path / "array.json"
    array.write_text(json.dumps(eager_trace().build()["traceEvents"]))
    events = _read(write(array, _tracks(0.0), tmp_path / "b.pt.trace.json.gz"))
    assert isinstance(events, list) and problems({"traceEvents": events}) == []
    assert len(events) == len(eager_trace().build()["traceEvents"]) + 2 + 4 + 3


def test_a_file_without_an_event_array_is_a_trace_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": 3}')
    with pytest.raises(TraceError, match="no traceEvents array"):
        write(bad, _tracks(0.0), tmp_path / "bad.annotated.pt.trace.json.gz")
    assert not any(p.name.startswith(".") or "annotated" in p.name for p in tmp_path.iterdir())

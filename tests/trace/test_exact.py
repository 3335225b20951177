"""The columnar reader gives exactly the tables of a plain per-event reading (tests/reference_reader.py),
on every real fixture and on hand-made traces with odd types and damaged events, serially and in parallel."""

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from reference_reader import read
from tracebuilder import TraceBuilder

from tracekit.trace import load, stream
from tracekit.trace.event_columns import TABLES

NAMES = {"gpu": "gpu_ops", "host": "host_calls", "cpu": "cpu_ops", "syncs": "syncs",
         "markers": "markers", "comms": "comms"}


def _text(df: pd.DataFrame) -> pd.DataFrame:
    """String columns as object, a missing text (None, or NaN in pandas' str dtype) as None."""
    text = [c for c in df.columns if df[c].dtype == object or isinstance(df[c].dtype, (pd.CategoricalDtype,
                                                                                          pd.StringDtype))]
    return df.astype({c: object for c in text}).assign(**{c: lambda d, c=c: d[c].where(d[c].notna(), None)
                                                          for c in text})


def _same(tables, expected: dict) -> None:
    for key, attr in NAMES.items():
        got, want = getattr(tables, attr), expected.get(key)
        if want is None:
            assert got.empty, attr
            continue
        got, want = _text(got), _text(want)
        cols = [c for c in TABLES.get(key, ["step", "ts", "dur"]) + ["end", "depth"] if c in want.columns]
        pd.testing.assert_frame_equal(got[cols].reset_index(drop=True), want[cols].reset_index(drop=True),
                                      check_dtype=False, obj=attr)


def _fixtures(fixtures):
    return sorted(p for p in fixtures.rglob("*.json.gz") if "ort" not in p.parts)


def test_every_real_fixture(fixtures):
    paths = _fixtures(fixtures)
    assert len(paths) >= 12
    for path in paths:
        _same(load(path), read(path))


def test_depth_in_small_blocks_is_the_same(fixtures, monkeypatch, tmp_path):
    """The depth's keys and counts made a few ops at a time (blocks that cut through ties of
    start) give the reference reader's depths, on a real trace and on the odd one."""
    from tracekit.trace import dataframes as table_module
    monkeypatch.setattr(table_module, "_BLOCK", 7)
    for path in (fixtures / "h100" / "vit16x6x384_reduce-overhead.pt.trace.json.gz", _odd_trace(tmp_path)):
        _same(load(path), read(path))


def test_real_fixture_in_parallel_chunks(fixtures, monkeypatch, tmp_path):
    src = fixtures / "hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    path = tmp_path / "t.pt.trace.json"
    path.write_bytes(gzip.decompress(src.read_bytes()))
    monkeypatch.setattr(stream, "CHUNK_BYTES", 200_000)
    _same(load(path, workers=2), read(path))


def _odd_trace(tmp_path, name="odd.json"):
    """Every kind of op, then the types tools disagree on and the damage traces carry."""
    t = TraceBuilder()
    t.step(1, 0, 100)
    t.cpu_op("aten::mm", 5, 50)
    t.cpu_op("aten::addmm", 5, 50)          # same start, same length: nested by file order
    t.cpu_op("aten::inner", 10, 5)
    t.kernel("gemm", start=10, dur=5, stream=7, launch_at=2)
    t.memcpy(start=20, dur=3, nbytes=4096, launch_at=16)
    t.memset(start=30, dur=1, launch_at=25)
    doc = t.build()
    ev = doc["traceEvents"]
    ev += [
        {"ph": "X", "cat": "kernel", "name": "hex", "pid": 0, "tid": 0, "ts": 1000040.0, "dur": 2,
         "args": {"stream": "0x3", "device": "0", "correlation": 77, "grid": "grid(1,)"}},   # ROCm/Inductor text
        {"ph": "X", "cat": "Kernel", "name": "old", "pid": 0, "tid": 9, "ts": 1000050, "dur": 1},  # 2021 names
        {"ph": "X", "cat": "Operator", "name": "aten::old", "pid": "Spans", "tid": "t", "ts": 1000001, "dur": None},
        {"ph": "X", "cat": "cpu_op", "name": "no_ts", "pid": 1, "tid": 1, "dur": 3},           # dropped
        {"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": 1000002, "dur": -1},  # dropped
        {"ph": "X", "cat": "cpu_op", "name": "str_ts", "pid": 1, "tid": 1, "ts": "1000003.5", "dur": "2"},
        {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 1, "tid": 1, "ts": 1000004},
        {"ph": "X", "cat": "new_category", "name": "x", "pid": 1, "tid": 1, "ts": 1000005, "dur": 1},
        {"ph": "s", "cat": "ac2g", "id": "5", "pid": 1, "tid": 1, "ts": 1000006, "args": None},
        # collectives: metadata of the types torch versions write (ranks as a list or a str, numbers as str)
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 1000060, "dur": 9,
         "args": {"External id": 90, "Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": "1024",
                  "Group size": 2, "dtype": "Float", "Process Group Name": "0", "Process Group Ranks": [0, 1],
                  "Seq": 3}},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "pid": 0, "tid": 7,
         "ts": 1000065, "dur": 20, "args": {"correlation": 91, "stream": 7, "device": 0, "Collective name": "allreduce",
                                            "Process Group Ranks": "[0, 1]", "Seq": "3", "Group size": True}},
        {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 2, "ts": 1000070, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": "1", "tid": 2, "ts": 1000071, "dur": 3,
         "args": {"Seq": None, "dtype": 7}},
        {"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "pid": 1, "tid": 1, "ts": 1000061, "dur": -2},  # dropped
    ]
    ev.append(dict(ev[4]))  # an exact duplicate: dropped
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_hand_made_trace_with_odd_types_and_damage(tmp_path):
    path = _odd_trace(tmp_path)
    tables = load(path)
    _same(tables, read(path))
    assert "hex" in set(tables.gpu_ops["name"]) and tables.gpu_ops.set_index("name").at["hex", "stream"] == 3
    assert "aten::old" in set(tables.cpu_ops["name"]) and "old" in set(tables.gpu_ops["name"])
    assert any("duplicated" in p for p in tables.meta["problems"])
    comms = tables.comms.set_index("name")
    assert list(tables.comms["name"]) == ["record_param_comms", "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                                          "gloo:all_reduce", "c10d::allreduce_"]
    assert list(tables.comms["table"]) == ["cpu_ops", "gpu_ops", "cpu_ops", "cpu_ops"]
    param, kernel = comms.loc["record_param_comms"], comms.loc["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    assert (param["pg_ranks"], param["seq"], param["out_msg_nelems"], param["external_id"]) == ("[0, 1]", 3, 1024, 90)
    assert (kernel["pg_ranks"], kernel["seq"], kernel["group_size"], kernel["correlation"]) == ("[0, 1]", 3, 1, 91)
    assert comms.loc["c10d::allreduce_", "dtype"] == "7" and comms.loc["c10d::allreduce_", "pid"] == "1"


@pytest.mark.parametrize("indent", [None, 2])
def test_odd_trace_in_parallel_chunks_matches(tmp_path, monkeypatch, indent):
    """The strict decoding fails on some chunks and not others: the tables are the same."""
    t = TraceBuilder()
    for i in range(300):
        t.kernel(f"k{i % 7}", start=i * 20.0, dur=10, stream=7 + i % 2, launch_at=i * 20.0 - 5)
        t.cpu_op(f"aten::op{i % 5}", i * 20.0 - 6, 3)
    doc = t.build()
    doc["traceEvents"][250]["args"]["stream"] = "0x7"     # one chunk decodes leniently
    doc["traceEvents"][500]["dur"] = None
    path = tmp_path / "t.pt.trace.json"
    path.write_text(json.dumps(doc, indent=indent))
    monkeypatch.setattr(stream, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(stream, "_WINDOW", 2000)
    parallel = load(path, workers=2)
    _same(parallel, read(path))
    _same(load(path, workers=1), read(path))
    assert np.all(np.diff(parallel.gpu_ops["ts"].to_numpy()) >= 0)


def test_string_columns_are_categorical_with_sorted_categories(fixtures):
    tables = load(fixtures / "h100" / "vit16x6x384_eager.pt.trace.json.gz")
    for df, col in ((tables.gpu_ops, "name"), (tables.cpu_ops, "name"), (tables.host_calls, "tid")):
        cats = list(df[col].cat.categories)
        assert cats == sorted(cats) and set(cats) == set(df[col].astype(str))

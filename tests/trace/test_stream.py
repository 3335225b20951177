"""Chunked and parallel reading give exactly what one whole decode gives."""

import json

import pandas as pd
import pytest
from owndata import h100_trace
from tracebuilder import TraceBuilder

from tracekit.trace import chunks, reader, stream


def _trace(tmp_path, n=400, name="t.pt.trace.json", indent=None, tricky=True):
    """Kernels and CPU ops; if ``tricky``, names and args hold the bytes of an event boundary ("}, {")."""
    t = TraceBuilder()
    odd = " }, { odd name" if tricky else ""
    for i in range(n):
        t.kernel(f"k{i}{odd}", start=i * 20.0, dur=10, stream=7 + i % 2, launch_at=i * 20.0 - 5)
        t.cpu_op(f"aten::op{i}", i * 20.0 - 6, 3)
    doc = t.build()
    for e in doc["traceEvents"][::7] if tricky else []:
        e.setdefault("args", {})["nested"] = [{"a": 1}, {"b": "}, {"}]
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=indent))
    return path


def _same(a, b):
    for name in ("gpu_ops", "host_calls", "cpu_ops", "markers"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_dtype=False)


@pytest.mark.parametrize("indent", [None, 2])
def test_small_chunks_match_one_decode(tmp_path, monkeypatch, indent):
    path = _trace(tmp_path, indent=indent)
    whole = reader.load(path, workers=1)
    assert len(whole.gpu_ops) == 400 and whole.gpu_ops["name"].iloc[0] == "k0 }, { odd name"
    monkeypatch.setattr(stream, "CHUNK_BYTES", 1000)
    _same(reader.load(path, workers=1), whole)


@pytest.mark.parametrize("indent", [None, 2])
def test_parallel_read_matches_serial(tmp_path, monkeypatch, indent):
    path = _trace(tmp_path, indent=indent, tricky=False)
    serial = reader.load(path, workers=1)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(stream, "_WINDOW", 2000)
    ranges, _, _ = stream.split_file(path)
    assert len(ranges) > 5
    for module in (reader, chunks):
        monkeypatch.setattr(module, "read_serial", lambda *a: pytest.fail("fell back to the serial read"))
    _same(reader.load(path, workers=2), serial)


@pytest.mark.parametrize("indent", [None, 2])
def test_parallel_read_of_tricky_text_matches_serial(tmp_path, monkeypatch, indent):
    """Fake boundaries inside strings and nested args: bad cuts are caught and read again."""
    path = _trace(tmp_path, indent=indent)
    serial = reader.load(path, workers=1)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(stream, "_WINDOW", 2000)
    _same(reader.load(path, workers=2), serial)


def test_parallel_read_of_gzip_matches_serial(tmp_path, monkeypatch):
    import gzip
    plain = _trace(tmp_path, indent=1)
    path = tmp_path / "t.pt.trace.json.gz"
    path.write_bytes(gzip.compress(plain.read_bytes()))
    serial = reader.load(path, workers=1)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 3000)
    _same(reader.load(path, workers=2), serial)


def test_real_trace_in_chunks(monkeypatch):
    path = h100_trace("vit16x6x384/eager")
    whole = reader.load(path, workers=1)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 50_000)
    _same(reader.load(path, workers=2), whole)
    assert (whole.gpu_ops["kind"] == "kernel").sum() == 660

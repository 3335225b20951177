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


def test_reader_worker_killed_mid_read_loses_nothing(tmp_path, monkeypatch):
    """A worker process that dies (the OOM killer, a signal) ends the parallel read, which is then
    done serially: the same tables, no hang."""
    import os

    from tracekit.trace import pool

    path = _trace(tmp_path, indent=2, tricky=False)
    serial = reader.load(path, workers=1)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(stream, "_WINDOW", 2000)
    real = pool.build_chunk

    def dies_on_the_last(data):
        if isinstance(data, tuple) and len(data) == 2:  # (path, where the tail starts): the file's end
            os._exit(9)
        return real(data)
    monkeypatch.setattr(pool, "build_chunk", dies_on_the_last)  # the forked workers inherit it
    monkeypatch.setattr(pool, "POLL_S", 0.05)
    fell_back = []
    monkeypatch.setattr(reader, "read_serial", lambda p: fell_back.append(p) or chunks.read_serial(p))
    _same(reader.load(path, workers=2), serial)
    assert fell_back == [path]


def test_reader_worker_error_is_raised_not_waited_on(tmp_path, monkeypatch):
    """Anything but a bad cut going wrong in a worker reaches the reading process as an error."""
    from tracekit.trace import pool

    path = _trace(tmp_path, indent=2, tricky=False)
    monkeypatch.setattr(stream, "CHUNK_BYTES", 3000)
    monkeypatch.setattr(stream, "_WINDOW", 2000)

    def broken(data):
        raise ValueError("a bug in tabulate")
    monkeypatch.setattr(pool, "build_chunk", broken)
    with pytest.raises(RuntimeError, match="ValueError: a bug in tabulate"):
        reader.load(path, workers=2)

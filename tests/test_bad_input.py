"""Every kind of bad input: a one-line error naming the file and the problem, its own
exit code (tracekit.errors.ExitCode), no traceback; good files still analyzed."""

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from owndata import FIXTURES, H100_RUNS, h100_trace
from tracebuilder import TraceBuilder

from tracekit import io
from tracekit.cli import main
from tracekit.errors import ExitCode


def _analyze(path, tmp_path, *extra):
    r = CliRunner().invoke(main, ["analyze", str(path), "--out", str(tmp_path / "reports"), *extra])
    assert "Traceback" not in r.output
    return r


def _good(tmp_path, name="good.pt.trace.json"):
    t = TraceBuilder()
    t.kernel("a", 0, 10, launch_at=-5)
    t.kernel("b", 20, 10, launch_at=12)
    return t.write(tmp_path / name)


def _doc(tmp_path, events, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _file(name, text):
    def make(d):
        (d / name).write_text(text)
        return d / name
    return make


def _kernel(ts, dur, corr=1):
    return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr}}


@pytest.mark.parametrize("make, code, problem", [
    (lambda d: d / "missing.json", ExitCode.NOT_FOUND, "no such file"),
    (lambda d: (d / "empty").mkdir() or d / "empty", ExitCode.NO_TRACES, "no traces found"),
    (_file("e.json", ""), ExitCode.NOT_JSON, "empty file"),
    (_file("n.json", "hello, world"), ExitCode.NOT_JSON, "not valid JSON"),
    (_file("t.json", '{"traceEvents": [{"ph": "X", "ts": 1'), ExitCode.TRUNCATED, "truncated JSON"),
    (_file("o.json", '{"displayTimeUnit": "ms"}'), ExitCode.NOT_A_TRACE, "without 'traceEvents'"),
    (_file("chrome.json", json.dumps({"traceEvents": [
        {"ph": "X", "cat": "devtools.timeline", "name": "RunTask", "pid": 1, "tid": 2, "ts": 5, "dur": 3}]})),
     ExitCode.NOT_A_TRACE, "another tool"),
])
def test_fatal_bad_input(tmp_path, make, code, problem):
    path = make(tmp_path)
    r = _analyze(path, tmp_path)
    assert r.exit_code == code, r.output
    assert problem in r.output and str(path) in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_corrupt_and_truncated_gzip(tmp_path):
    data = gzip.compress(json.dumps(TraceBuilder().build()).encode() * 1)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    flipped = tmp_path / "flip.json.gz"
    flipped.write_bytes(data[:20] + bytes(b ^ 0xFF for b in data[20:40]) + data[40:])
    for path in (cut, flipped):
        r = _analyze(path, tmp_path)
        assert r.exit_code == ExitCode.CORRUPT_GZIP, r.output
        assert "gzip" in r.output and str(path) in r.output


def test_json_array_from_another_tool(tmp_path):
    path = _file("chrome_array.json", json.dumps([{"ph": "X", "cat": "v8", "name": "Compile", "pid": 1, "tid": 1,
                                                   "ts": 1, "dur": 2}]))(tmp_path)
    r = _analyze(path, tmp_path)
    assert r.exit_code == ExitCode.NOT_A_TRACE and "nor an ONNX Runtime profile" in r.output


@pytest.mark.parametrize("events, problem, kernels", [
    ([_kernel(0, 10, 1), {**_kernel(20, 5, 2), "dur": None}], "without a numeric dur", 2),
    ([_kernel(0, 10, 1), _kernel(20, -5, 2)], "negative dur dropped", 1),
    ([_kernel(0, 10, 1), _kernel("soon", 5, 2)], "without a numeric ts dropped", 1),
    ([_kernel(0, 10, 1), _kernel(20, 5, 2), _kernel(20, 5, 2)], "duplicated events dropped", 2),
])
def test_damaged_events_are_mended_and_reported(tmp_path, events, problem, kernels):
    r = _analyze(_doc(tmp_path, events), tmp_path, "--json")
    assert r.exit_code == ExitCode.PARTIAL
    row = json.loads(r.stdout)["runs"][0]
    assert row["kernels"] == kernels
    assert problem in row["note"]


def test_cpu_only_trace_is_not_an_error(tmp_path):
    t = TraceBuilder(device_name=None)
    t.cpu_op("aten::mm", 0, 10)
    r = _analyze(t.write(tmp_path / "cpu.json"), tmp_path)
    assert r.exit_code == ExitCode.OK and "no GPU activity" in r.output


def test_enormous_single_line(tmp_path, monkeypatch):
    """A minified trace on one line, read in many small chunks."""
    from tracekit.trace import stream
    monkeypatch.setattr(stream, "CHUNK_BYTES", 4096)
    t = TraceBuilder()
    for i in range(2000):
        t.kernel(f"k{i}", start=i * 20.0, dur=10, launch_at=i * 20.0 - 5)
    path = tmp_path / "one_line.json"
    path.write_text(json.dumps(t.build(), separators=(",", ":")))
    assert path.read_text().count("\n") == 0 and path.stat().st_size > 100 * 4096
    r = _analyze(path, tmp_path, "--json")
    assert r.exit_code == ExitCode.OK
    assert json.loads(r.stdout)["runs"][0]["kernels"] == 2000


def test_one_bad_file_among_good_ones(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    _good(folder, "a.pt.trace.json")
    _good(folder, "b.pt.trace.json")
    (folder / "c.pt.trace.json").write_text('{"traceEvents": [')
    r = _analyze(folder, tmp_path)
    assert r.exit_code == ExitCode.PARTIAL
    assert "a.pt.trace.json" in r.output and "b.pt.trace.json" in r.output
    assert "c.pt.trace.json" in r.output and "truncated JSON" in r.output
    summary = (tmp_path / "reports" / "summary.md").read_text()
    assert "c.pt.trace.json" in summary and "truncated" in summary


def test_unreadable_run_manifest_keeps_the_trace(tmp_path):
    run = tmp_path / "traces" / "mlp" / "eager"
    run.mkdir(parents=True)
    _good(run, "w.1.pt.trace.json")
    (run / "run.json").write_text("{not json")
    r = _analyze(tmp_path / "traces", tmp_path)
    assert r.exit_code == ExitCode.PARTIAL
    assert "unreadable run manifest" in r.output and "mlp/eager" in r.output


def test_internal_errors_are_one_line_unless_debug(tmp_path, monkeypatch):
    import tracekit.analysis.runs as runs
    monkeypatch.setattr(runs, "analyze", lambda *a, **k: 1 / 0)
    path = _good(tmp_path)
    r = _analyze(path, tmp_path)
    assert r.exit_code == ExitCode.INTERNAL and "ZeroDivisionError" in r.output and "--debug" in r.output
    r = CliRunner().invoke(main, ["--debug", "analyze", str(path), "--out", str(tmp_path / "o")])
    # issue 31: --debug shows the traceback and keeps the documented exit code (it was 1)
    assert r.exit_code == ExitCode.INTERNAL and "Traceback (most recent call last)" in r.output
    assert "ZeroDivisionError" in r.output


def test_report_files_are_replaced_atomically(tmp_path, monkeypatch):
    target = tmp_path / "runs.json"
    target.write_text("old, good report")

    class Exploding:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[:10])
            raise OSError("disk full")

    real_fdopen = io.os.fdopen
    monkeypatch.setattr(io.os, "fdopen", lambda fd, mode: Exploding(real_fdopen(fd, mode)))
    with pytest.raises(OSError):
        io.write_json(target, {"runs": [1, 2, 3]})
    assert target.read_text() == "old, good report"
    assert [p.name for p in tmp_path.iterdir()] == ["runs.json"]  # no temporary file left behind


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_reports_keep_the_umask_mode(tmp_path, monkeypatch, umask, mode):
    """Written as open(path, "w") would: 0666 less the umask (mkstemp alone gives 0600)."""
    import os

    from tracebuilder import eager_trace, write_run

    from tracekit.analysis.result import Result
    from tracekit.analysis.runs import analyze
    from tracekit.report import write_reports
    old = os.umask(umask)
    try:
        write_run(tmp_path / "traces" / "w" / "eager", eager_trace())
        written = write_reports(Result.of(analyze(tmp_path / "traces")), tmp_path / "reports", source="t")
        assert {p.name for p in written} >= {"summary.md", "index.html", "runs.csv", "comparison.csv", "runs.json"}
        assert {oct(p.stat().st_mode & 0o777) for p in written if p.suffix != ".png"} == {oct(mode)}
        existing = tmp_path / "reports" / "summary.md"
        existing.chmod(0o640)
        io.write_atomic(existing, "again")
        assert existing.stat().st_mode & 0o777 == 0o640  # an existing file keeps its mode
    finally:
        os.umask(old)


def test_real_traces_plus_damaged_copies(tmp_path):
    """Every good real trace is reported, every damaged copy is named with its problem. The real
    traces: ours (tests/data), and HolisticTraceAnalysis' where the shared fixtures are here."""
    import shutil

    folder = tmp_path / "mixed"
    good = sorted([h100_trace(run) for run in H100_RUNS] + list((FIXTURES / "hta").glob("*/*.gz")),
                  key=lambda p: p.name)
    folder.mkdir()
    for i, src in enumerate(good):
        shutil.copy(src, folder / src.name)
        data = src.read_bytes()
        damaged = {
            f"cut_{i}.json.gz": data[: len(data) // 3],
            f"truncated_{i}.json": gzip.decompress(data)[:-200],
        }
        for name, content in damaged.items():
            (folder / name).write_bytes(content)
    r = CliRunner().invoke(main, ["analyze", str(folder), "--json", "--out", str(tmp_path / "r")])
    assert r.exit_code == ExitCode.PARTIAL
    out = json.loads(r.stdout)
    assert sorted(Path(row["trace"]).name for row in out["runs"]) == sorted(p.name for p in good)
    named = {Path(e["path"]).name: e for e in out["errors"]}
    assert len(named) == 2 * len(good)
    assert all(e["code"] == ExitCode.CORRUPT_GZIP for n, e in named.items() if n.startswith("cut_"))
    assert all(e["code"] == ExitCode.TRUNCATED for n, e in named.items() if n.startswith("truncated_"))


@pytest.mark.parametrize("args, code", [(["--json"], ExitCode.PARTIAL), (["--json", "--iterations", "0"], 2)])
def test_console_script_output_whole_and_exit_code_kept(tmp_path, args, code):
    """`python -m tracekit analyze` ends without the interpreter's clean-up (cli.FAST_EXIT): its
    stdout is still whole and its exit code the command's, for a damaged trace and a usage error."""
    import subprocess
    import sys

    path = _doc(tmp_path, [_kernel(0, 10, 1), _kernel(20, -5, 2)])
    r = subprocess.run([sys.executable, "-m", "tracekit", "analyze", str(path), "--out", str(tmp_path / "r"), *args],
                       capture_output=True, text=True)
    assert r.returncode == code and "Traceback" not in r.stderr
    if code == ExitCode.PARTIAL:
        assert json.loads(r.stdout)["runs"][0]["kernels"] == 1
        assert "1 damaged trace(s)" in r.stderr

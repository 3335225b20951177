"""Issue 40's reproductions, each run as the issue ran it (our MLP training step, the issue's ``F``,
damaged one way), and what each does now: its exit code and the line that names the cause."""

import gzip
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from owndata import DATA

from tracekit.cli import main
from tracekit.errors import ExitCode

F = next((DATA / "h100" / "mlp-train-step" / "eager").glob("*.pt.trace.json.gz"))


def _run(*args) -> tuple[int, str]:
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    return r.exit_code, " ".join(r.output.split())   # rich wraps long lines: compared as words


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> Path:
    """A folder of copies of F, each damaged as one reproduction says (``<damage>.pt.trace.json``)."""
    folder = tmp_path_factory.mktemp("issue40")
    doc = json.loads(gzip.decompress(F.read_bytes()))

    def write(name, change):
        copy = json.loads(json.dumps(doc))
        for e in copy["traceEvents"]:
            change(e)
        (folder / f"{name}.pt.trace.json").write_text(json.dumps(copy))

    marked = []
    write("marker", lambda e: (not marked and str(e.get("name", "")).startswith("ProfilerStep#")
                               and (marked.append(e), e.update(name="ProfilerStep#9223372036854775808"))))
    write("zero", lambda e: "dur" in e and e.update(dur=0))
    write("relabel", lambda e: e.get("cat") == "kernel" and e.update(cat="gpu_op"))
    seen = []
    write("dropped", lambda e: "ts" in e and (seen.append(e), len(seen) % 10 == 0 and e.update(ts="x")))
    write("shifted", lambda e: isinstance(e.get("ts"), (int, float)) and e.update(ts=e["ts"] + 1e19))
    raw = json.dumps(doc).encode()
    at = raw.index(b'"name": "', 2 * len(raw) // 3) + len(b'"name": "')
    (folder / "bytes.pt.trace.json").write_bytes(raw[:at] + b"\xff" + raw[at:])
    (folder / "offset").write_text(str(at))
    os.mkfifo(folder / "fifo.pt.trace.json")
    return folder


def test_a_broken_link_beside_a_good_trace(tmp_path):
    """Exit 70 and the good trace lost before (analyze, compare, --json): now its row, exit 10."""
    (tmp_path / "j").mkdir()
    good, broken = tmp_path / "j" / "good.pt.trace.json.gz", tmp_path / "j" / "broken.pt.trace.json"
    good.write_bytes(F.read_bytes())
    broken.symlink_to("/nonexistent/x.pt.trace.json")
    code, out = _run("analyze", tmp_path / "j", "--out", tmp_path / "r")
    reason = "a broken symbolic link (to /nonexistent/x.pt.trace.json, which does not exist)"
    assert code == ExitCode.PARTIAL and f"unreadable {broken}: {reason}" in out
    assert "good.pt.trace.json.gz: integrity ok" in out
    r = CliRunner().invoke(main, ["analyze", str(tmp_path / "j"), "--json", "--out", str(tmp_path / "r")])
    data = json.loads(r.stdout)
    assert r.exit_code == ExitCode.PARTIAL and [row["trace"] for row in data["runs"]] == ["good.pt.trace.json.gz"]
    assert data["errors"] == [{"path": str(broken), "problem": reason, "code": ExitCode.NOT_FOUND}]
    code, out = _run("compare", good, broken)
    assert code == ExitCode.PARTIAL and "good.pt.trace.json.gz: integrity ok" in out and f"unreadable {broken}" in out


def test_a_marker_numbered_past_int64(damaged):
    """Exit 70 in analyze, whatif and diff before: now counted, not taken as a step, exit 10."""
    said = "1 ProfilerStep markers numbered past int64 (not taken as iterations)"
    for args in (["analyze", damaged / "marker.pt.trace.json", "--out", damaged / "r"],
                 ["whatif", damaged / "marker.pt.trace.json", "--cuda-graphs"],
                 ["diff", F, damaged / "marker.pt.trace.json"]):
        code, out = _run(*args)
        assert code == ExitCode.PARTIAL and f"integrity warning: {said}" in out, (args[0], out)


def test_all_durations_0(damaged):
    """analyze --critical-path exit 70, whatif exit 2 (pandas' merge error) before: now integrity
    FAILED (exit 0), and whatif's own code, 13, with the reason."""
    zero = damaged / "zero.pt.trace.json"
    code, out = _run("analyze", zero, "--critical-path", "--out", damaged / "r")
    assert code == ExitCode.OK and "integrity FAILED: 96 of 96 GPU ops are 0 µs long" in out
    code, out = _run("whatif", zero, "--cuda-graphs")
    assert code == ExitCode.CANNOT_MODEL and "integrity FAILED" in out
    assert "cannot model the trace: no iteration of the model is longer than 0 µs" in out


def test_a_fifo_is_said_to_be_one(damaged):
    """whatif exit 70 NotADirectoryError, analyze "unreadable folder (not a directory)" before."""
    for verb in (["whatif", "--cuda-graphs"], ["analyze", "--out", damaged / "r"]):
        code, out = _run(verb[0], damaged / "fifo.pt.trace.json", *verb[1:])
        assert code == ExitCode.NOT_FOUND and out.endswith("fifo.pt.trace.json: a FIFO (named pipe), not a trace file")


def test_kernels_relabelled_fail_integrity(damaged):
    """"integrity ok", 0 kernels, launch-bound and "nan% of kernels" before."""
    code, out = _run("analyze", damaged / "relabel.pt.trace.json", "--out", damaged / "r")
    assert code == ExitCode.OK and "undetermined" in out and "nan%" not in out and "integrity ok" not in out
    assert ("integrity FAILED: 93 of 93 kernel launch calls have no GPU op" in out
            and "93 device events (a device or stream arg) under categories Kineto does not write (gpu_op)" in out)


def test_diff_says_what_was_dropped(damaged, tmp_path):
    """diff exit 0 and no word of the dropped events before: now each input's integrity line on
    the terminal, in diff.md and diff.json, and exit 10."""
    code, out = _run("diff", F, damaged / "dropped.pt.trace.json", "--out", tmp_path)
    line = "B (dropped.pt.trace.json): integrity warning: "
    assert code == ExitCode.PARTIAL and "A (" in out and line in out.replace(str(damaged) + "/", "")
    assert "events without a numeric ts dropped" in out
    assert "events without a numeric ts dropped" in (tmp_path / "diff.md").read_text()
    checks = json.loads((tmp_path / "diff.json").read_text())["integrity"]
    assert any(c["check"] == "events" and "without a numeric ts" in c["detail"] for c in checks)


def test_messages_name_the_real_cause(damaged):
    """Non-UTF-8 bytes "at position 0"; FIFOs, /dev/zero and /proc/self/mem "empty file"; a trace
    shifted near 1e19 "a trace from another tool?" before."""
    at = int((damaged / "offset").read_text())
    code, out = _run("analyze", damaged / "bytes.pt.trace.json", "--out", damaged / "r")
    assert code == ExitCode.NOT_JSON and f"byte 0xff at offset {at:,} of the file's text" in out
    code, out = _run("analyze", "/dev/zero", "--out", damaged / "r")
    assert code == ExitCode.NOT_FOUND and out.endswith("/dev/zero: a character device, not a trace file")
    if Path("/proc/self/mem").exists():
        code, out = _run("analyze", "/proc/self/mem", "--out", damaged / "r")
        assert code == ExitCode.NOT_FOUND and "empty file" not in out
    code, out = _run("analyze", damaged / "shifted.pt.trace.json", "--out", damaged / "r")
    assert "another tool" not in out and "timestamps so large that float64 holds them only to 2048 µs" in out

"""Our traces in the viewers users open them with.

* TensorBoard with the profiler plugin (torch-tb-profiler) serves a traces folder that
  ``tracekit trace`` wrote: over its HTTP API (loopback) the run is listed and its
  overview loads, with the same steps and step times as our ProfilerStep markers. An
  annotated copy (``tracekit analyze --annotate``) loads as one more worker with the
  original's figures, and its trace view holds tracekit's tracks.
* Every trace the runner writes (here on the CPU, and the committed H100 traces) follows
  the Chrome Trace Event Format that ui.perfetto.dev reads (tests/chrome_trace.py).
  Loading them in Perfetto's trace processor is not tested: the ``perfetto`` package on
  PyPI downloads its trace_processor binary at run time, which these machines do not allow.
"""

import gzip
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from chrome_trace import problems
from click.testing import CliRunner
from owndata import H100_STUDY

from tracekit.analysis.annotation_tracks import annotate
from tracekit.cli import main
from tracekit.trace import load
from tracekit.trace.annotate import PID

# Our H100 traces: those committed for tests, and any others under reports/h100 in this checkout.
H100_TRACES = sorted({*H100_STUDY.rglob("*.pt.trace.json.gz"),
                      *(Path(__file__).resolve().parents[2] / "reports" / "h100").rglob("*.pt.trace.json.gz")})


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    """A traces folder written by `tracekit trace` (mlp, eager, CPU, 3 profiled iterations)."""
    out = tmp_path_factory.mktemp("traces")
    r = CliRunner().invoke(main, ["trace", "--model", "mlp", "--mode", "eager", "--device", "cpu", "--warmup", "1",
                                  "--iters", "3", "--profile-iters", "3", "--out", str(out)])
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.slow
def test_runner_traces_follow_the_chrome_trace_event_format(traces):
    paths = sorted(traces.rglob("*.pt.trace.json.gz")) + H100_TRACES
    assert len(paths) >= 7
    for path in paths:
        assert problems(json.loads(gzip.decompress(path.read_bytes()))) == [], path


def test_the_format_check_finds_broken_events():
    bad = {"displayTimeUnit": "s", "traceEvents": [
        {"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 0},                     # no dur
        {"ph": "Q", "name": "q", "pid": 1, "tid": 1, "ts": 0},                     # unknown phase
        {"ph": "B", "name": "open", "pid": 1, "tid": 2, "ts": 5},                  # never closed
        {"ph": "s", "name": "ac2g", "cat": "ac2g", "id": 7, "pid": 1, "tid": 9, "ts": 3},  # not inside a slice
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {}},        # no args.name
        {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": "soon", "s": "x"},
    ]}
    found = problems(bad)
    for text in ("displayTimeUnit", "complete event without a dur", "unknown phase", "begin event(s) without an end",
                 "not inside a slice", "metadata event", "ts missing", "instant scope"):
        assert any(text in p for p in found), text
    assert problems({"events": []}) == ["not the JSON Object Format: no traceEvents array"]


def _get(port: int, route: str, **params):
    url = f"http://127.0.0.1:{port}/data/plugin/pytorch_profiler/{route}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read()
    return json.loads(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)   # the trace view is gzipped


@contextmanager
def _tensorboard(logdir: Path, tmp_path: Path):
    """TensorBoard serving ``logdir`` on a free loopback port, once its runs are loaded: yields the port."""
    pytest.importorskip("tensorboard", reason="tensorboard is not installed (make setup installs it)")
    pytest.importorskip("torch_tb_profiler", reason="torch-tb-profiler is not installed (make setup installs it)")
    log = tmp_path / "tensorboard.log"
    with log.open("w") as sink:
        tb = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
                               "--host", "127.0.0.1", "--port", "0"], stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        port = None
        while port is None:
            assert tb.poll() is None and time.monotonic() < deadline, f"TensorBoard did not start:\n{log.read_text()}"
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", log.read_text())
            port = int(m.group(1)) if m else time.sleep(0.5)
        runs = _get(port, "runs")
        while runs["loading"] or not runs["runs"]:
            assert time.monotonic() < deadline, f"the run never appeared: {runs}"
            time.sleep(0.5)
            runs = _get(port, "runs")
        yield port
    finally:
        tb.terminate()
        tb.wait(30)


@pytest.mark.slow
def test_tensorboard_profiler_plugin_lists_and_loads_the_run(traces, tmp_path):
    with _tensorboard(traces / "mlp", tmp_path) as port:
        assert _get(port, "runs")["runs"] == ["eager"]          # one run per mode folder
        assert "Overview" in _get(port, "views", run="eager")
        trace = next((traces / "mlp" / "eager").glob("*.pt.trace.json.gz"))
        worker = trace.name.split(".")[0]
        assert _get(port, "workers", run="eager", view="Overview") == [worker]
        span = _get(port, "spans", run="eager", worker=worker)[0]
        overview = _get(port, "overview", run="eager", worker=worker, span=span)
    # TensorBoard's steps are our ProfilerStep markers: same count, same lengths.
    markers = load(trace).markers
    steps = overview["steps"]["rows"]
    assert len(steps) == len(markers) == 3
    for row, dur in zip(steps, markers["dur"]):
        assert sum(v for v in row[1:] if isinstance(v, (int, float))) == pytest.approx(dur, rel=0.01)
    assert any(p["name"] == "Average Step Time" for p in overview["performance"])


@pytest.mark.slow
def test_tensorboard_opens_an_annotated_copy_as_the_original(tmp_path):
    """``tracekit analyze --annotate``'s copy beside an H100 trace is one more worker of the run,
    with the original's overview and kernels, and its trace view holds tracekit's tracks."""
    run = tmp_path / "logs" / "vit"
    run.mkdir(parents=True)
    trace = Path(shutil.copy(next((H100_STUDY / "vit16x6x384" / "eager").glob("*.pt.trace.json.gz")), run))
    copy = annotate(trace)["annotated"][0]
    ours = sum(e.get("cat") == "tracekit" for e in json.loads(gzip.decompress(copy.read_bytes()))["traceEvents"])
    with _tensorboard(tmp_path / "logs", tmp_path) as port:
        workers = _get(port, "workers", run="vit", view="Overview")
        assert sorted(workers) == sorted([trace.name.split(".")[0], copy.name.removesuffix(".pt.trace.json.gz")])
        seen = {}
        for worker in workers:
            span = _get(port, "spans", run="vit", worker=worker)[0]
            seen[worker.endswith(".annotated")] = [_get(port, route, run="vit", worker=worker, span=span, **params)
                                                   for route, params in (("overview", {}),
                                                                         ("kernel/table", {"group_by": "Kernel"}),
                                                                         ("trace", {}))]
    (overview, kernels, view), (overview_a, kernels_a, view_a) = seen[False], seen[True]
    assert overview_a == overview and kernels_a == kernels
    assert {row[0] for row in overview["steps"]["rows"]} == {str(s) for s in load(trace).markers["step"]}
    assert len(kernels["data"]["rows"]) > 0
    tracks = [e for e in view_a["traceEvents"] if e.get("cat") == "tracekit"]
    assert len(tracks) == ours > 0
    assert [e for e in view_a["traceEvents"] if e.get("pid") != PID] == view["traceEvents"]

"""Issue 31: one file's failure never sinks the others, and inside one trace one analysis's
failure never sinks the other analyses; an internal error stays visible (its line, the
traceback under --debug) but loses nothing: exit 10 for the run since issue 40 (70 only where
nothing could be reported)."""

import json
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool

import pytest
from click.testing import CliRunner
from owndata import h100_trace
from tracebuilder import TraceBuilder, eager_trace

import tracekit
from tracekit.analysis import runs, trace_analysis, trace_file
from tracekit.analysis.attribution import gpu_ops, modules
from tracekit.analysis.distributed import collectives, communication, job
from tracekit.analysis.metrics import cpu_ops, idle, integrity, kernels, launches, summary, timeline, transfers, verdict
from tracekit.cli import main
from tracekit.errors import ExitCode
from tracekit.report.job_text import finding_text
from tracekit.report.run_lines import evidence_text, integrity_text
from tracekit.trace import TraceError, load

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _boom(*args, **kwargs):
    raise RuntimeError("boom")


def _nccl_trace() -> TraceBuilder:
    """eager_trace with an all-reduce launched inside record_param_comms, and one more whose
    launch call is not in the trace (the shape of HTA's trace_diff/test trace)."""
    t = eager_trace()
    t.cpu_op("record_param_comms", 60, 20, **{"Collective name": "allreduce", "Seq": 1})
    t.kernel(NCCL, start=70, dur=20, stream=20, launch_at=62)
    t.kernel(NCCL, start=170, dur=20, stream=20, launch_at=None)
    return t


def _analyze(path, tmp_path, *extra, debug=False):
    r = CliRunner().invoke(main, [*(["--debug"] if debug else []), "analyze", str(path), "--out",
                                  str(tmp_path / "reports"), *extra])
    assert debug or "Traceback" not in r.output
    return r


# (module, function, the analysis named in failed_analyses)
ANALYSES = [(collectives, "calls", "collectives"), (gpu_ops, "attribute", "attribution"),
            (integrity, "checks", "integrity"), (modules, "scope_times", "modules"), (cpu_ops, "by_op", "cpu_ops"),
            (idle, "gaps", "idle"), (launches, "launch_table", "launches"), (communication, "breakdown",
                                                                                "communication"),
            (kernels, "top_kernels", "kernels"), (transfers, "by_direction", "transfers"),
            (timeline, "iteration_timeline", "timeline"), (verdict, "verdict", "verdict"),
            (summary, "per_iteration", "iterations")]


@pytest.mark.parametrize("module, function, name", ANALYSES, ids=[a[2] + "." + a[1] for a in ANALYSES])
def test_an_analysis_that_raises_loses_only_its_own_figures(tmp_path, monkeypatch, module, function, name):
    path = _nccl_trace().write(tmp_path / "t.json")
    good = trace_analysis.analyze_trace(load(path))
    assert good.row["failed_analyses"] == "" and good.failures == []
    monkeypatch.setattr(module, function, _boom)
    r = trace_analysis.analyze_trace(load(path))
    assert r.row["failed_analyses"] == f"{name} failed: RuntimeError: boom"
    assert [f["analysis"] for f in r.failures] == [name] and "_boom" in r.failures[0]["traceback"]
    for key in ("kernels", "host_launches", "gpu_busy_us", "active_span_us", "iterations"):
        assert r.row[key] == good.row[key], key
    if name not in ("idle", "launches", "verdict", "integrity"):
        assert (r.row["verdict"], r.row["idle_host_wait_us"]) == (good.row["verdict"], good.row["idle_host_wait_us"])
    if name not in ("kernels",):
        assert r.tables["kernels"].equals(good.tables["kernels"])
    if name not in ("collectives",):
        assert r.row["collectives"] == good.row["collectives"] == 2
    if name == "verdict" or name == "idle":   # not judged, and says why
        assert r.row["verdict"] == "undetermined" and "boom" in r.row["verdict_reason"]
        assert evidence_text(r.row).startswith("not judged: ") and "boom" in evidence_text(r.row)
    if name == "integrity":                   # unchecked: not vouched for
        [check] = r.tables["integrity"].to_dict("records")
        assert r.row["integrity"] == "failed" and "boom" in integrity_text(check)


def test_a_failed_analysis_is_a_report_line_and_exit_10(tmp_path, monkeypatch):
    folder = tmp_path / "traces"
    _nccl_trace().write(folder / "a.pt.trace.json")
    eager_trace().write(folder / "b.pt.trace.json")
    alone = _analyze(folder, tmp_path, "--json")
    assert alone.exit_code == 0
    before = {r["trace"]: r for r in json.loads(alone.stdout)["runs"]}
    monkeypatch.setattr(collectives, "calls", _boom)
    r = _analyze(folder, tmp_path, "--json")
    assert r.exit_code == ExitCode.PARTIAL
    assert "internal error: " in r.stderr and "collectives failed: RuntimeError: boom" in r.stderr
    out = json.loads(r.stdout)
    after = {row["trace"]: row for row in out["runs"]}
    assert sorted(after) == sorted(before)
    for trace, row in after.items():
        assert row["gpu_busy_us"] == before[trace]["gpu_busy_us"] and row["verdict"] == before[trace]["verdict"]
    assert [(f["path"].endswith("a.pt.trace.json"), f["analysis"]) for f in out["failures"]][:1] == [
        (True, "collectives")]
    r = _analyze(folder, tmp_path)
    assert r.exit_code == ExitCode.PARTIAL
    # one line for the failure both traces share (the terminal groups a text said of several runs)
    assert "collectives failed: RuntimeError: boom (a bug in tracekit" in r.output
    assert "a.pt.trace.json, b.pt.trace.json" in r.output
    assert "collectives failed: RuntimeError: boom" in (tmp_path / "reports" / "summary.md").read_text()
    r = _analyze(folder, tmp_path, debug=True)   # the traceback, and still exit 10
    assert r.exit_code == ExitCode.PARTIAL and "Traceback (most recent call last)" in r.stderr
    assert "_boom" in r.stderr and (tmp_path / "reports" / "runs.json").exists()


def test_a_file_tracekit_fails_on_loses_only_that_file(tmp_path, monkeypatch):
    """An internal error on one file (here summarize, the base of every figure) is that file's
    row with its reason; the other files' figures are those they have alone."""
    folder = tmp_path / "traces"
    eager_trace().write(folder / "good.pt.trace.json")
    poison = eager_trace()
    poison.kernel("poison", start=300, dur=5, launch_at=290)
    poison.write(folder / "poison.pt.trace.json")
    (folder / "cut.pt.trace.json").write_text('{"traceEvents": [')
    real = summary.summarize

    def summarize(tables, iterations=None):
        if (tables.gpu_ops["name"] == "poison").any():
            raise KeyError("poison")
        return real(tables, iterations)
    monkeypatch.setattr(summary, "summarize", summarize)
    r = _analyze(folder, tmp_path, "--json")
    assert r.exit_code == ExitCode.PARTIAL
    out = json.loads(r.stdout)
    assert [row["trace"] for row in out["runs"]] == ["good.pt.trace.json"]
    alone = trace_analysis.analyze_trace(load(folder / "good.pt.trace.json")).row
    assert out["runs"][0]["gpu_busy_us"] == alone["gpu_busy_us"] and out["runs"][0]["verdict"] == alone["verdict"]
    errors = {e["path"].rsplit("/", 1)[1]: (e["problem"], e["code"]) for e in out["errors"]}
    assert errors == {"poison.pt.trace.json": ("internal error: KeyError: 'poison'", ExitCode.INTERNAL),
                      "cut.pt.trace.json": (errors["cut.pt.trace.json"][0], ExitCode.TRUNCATED)}
    # the Python API: the same rows, and the error listed
    result = tracekit.analyze(folder)
    assert list(result.runs["trace"]) == ["good.pt.trace.json"] and len(result.errors) == 2
    assert [f[1] for f in result.failures] == ["trace"]
    # alone, the bad file is an error of its own: exit 70, one line, no report
    r = _analyze(folder / "poison.pt.trace.json", tmp_path / "alone")
    assert r.exit_code == ExitCode.INTERNAL and "internal error: KeyError: 'poison'" in r.output
    # compare: the same isolation
    r = CliRunner().invoke(main, ["compare", str(folder / "good.pt.trace.json"), str(folder / "poison.pt.trace.json")])
    assert r.exit_code == ExitCode.PARTIAL and "Traceback" not in r.output and "poison" in r.output
    # no file readable: the CLI and the API say so by one rule, and a bug in tracekit wins over bad input
    (folder / "good.pt.trace.json").unlink()
    r = _analyze(folder, tmp_path / "none")
    with pytest.raises(TraceError) as err:
        tracekit.analyze(folder)
    assert r.exit_code == err.value.code == ExitCode.INTERNAL and r.output == f"Error: {err.value}\n"
    assert "cut.pt.trace.json: truncated JSON" in r.output and "poison.pt.trace.json: internal error" in r.output


def test_the_job_analysis_failing_keeps_the_ranks(tmp_path, monkeypatch):
    folder = tmp_path / "job"
    for rank in (0, 1):
        t = TraceBuilder(distributed={"rank": rank, "world_size": 2, "backend": "nccl"})
        t.events += _nccl_trace().events
        t.write(folder / f"rank{rank}.pt.trace.json")
    monkeypatch.setattr(job, "analyze_jobs", _boom)
    a = runs.analyze(folder)
    assert sorted(a.runs["rank"]) == [0, 1] and a.runs["kernels"].tolist() == [6, 6]
    assert list(a.table("jobs")["finding"]) == [{"code": job.FAILED, "reason": "jobs failed: RuntimeError: boom"}]
    assert finding_text(a.table("jobs")["finding"].iloc[0]) == "distributed jobs: jobs failed: RuntimeError: boom"
    assert [(p, name) for p, name, *_ in a.failures] == [("", "jobs")]
    r = _analyze(folder, tmp_path)
    assert r.exit_code == ExitCode.PARTIAL and "distributed jobs: jobs failed: RuntimeError: boom" in r.output


def test_a_worker_process_that_dies_is_that_files_error():
    future = Future()
    future.set_exception(BrokenProcessPool("a process in the process pool was terminated abruptly"))
    r = trace_file.outcome(future)
    assert r.error == ("internal error: BrokenProcessPool: a process in the process pool was terminated abruptly",
                       ExitCode.INTERNAL)


def test_hta_shaped_traces_and_a_good_one_in_a_folder(tmp_path):
    """The acceptance case of issue 31, with hand-made traces of the HTA traces' shapes (NCCL
    kernels with record_param_comms, some launched before the trace began; a sampled trace
    where most GPU ops have no launch call) beside a real trace of ours: all analyzed, the
    real trace's figures those it has alone, exit 0 (nothing unreadable or damaged)."""
    folder = tmp_path / "traces"
    _nccl_trace().write(folder / "nccl.pt.trace.json")
    sampled = eager_trace()
    for i in range(6):
        sampled.kernel("sampled", start=300 + 20 * i, dur=10)   # no launch call: a sampled trace
    sampled.write(folder / "sampled.pt.trace.json")
    good = h100_trace("vit16x6x384/eager")
    (folder / good.name).write_bytes(good.read_bytes())
    r = _analyze(folder, tmp_path, "--json")
    assert r.exit_code == 0, r.output
    rows = {row["trace"]: row for row in json.loads(r.stdout)["runs"]}
    alone = trace_analysis.analyze_trace(load(good)).row
    for key in ("kernels", "host_launches", "gpu_busy_us", "idle_us", "idle_host_wait_us", "verdict"):
        assert rows[good.name][key] == alone[key], key
    assert rows["nccl.pt.trace.json"]["collectives"] == 2
    assert rows["sampled.pt.trace.json"]["verdict"] == "undetermined"
    assert rows["sampled.pt.trace.json"]["integrity_detail"].startswith(
        "6 of 10 GPU ops have no launch call in the trace")


def test_a_run_without_a_trace_has_no_failed_analyses_line(tmp_path):
    from tracebuilder import write_run

    from tracekit.report.run_lines import integrity_lines

    write_run(tmp_path / "w" / "eager", eager_trace(), mode="eager")
    write_run(tmp_path / "w" / "default", None, mode="default", status="failed", reason="compile error")
    lines = integrity_lines(runs.analyze(tmp_path).runs)
    assert lines == ["w/eager: integrity ok"]

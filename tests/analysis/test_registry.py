"""Analyses register (issue 37): an analysis added in one place (here, a test's own, no tracekit file
touched) runs on every trace: its column in the run row, its table in the result; one that raises
is one failure line; declarations are checked when registered and when their analysis runs."""

import math
import weakref

import pytest
from owndata import H100_STUDY, h100_trace

import tracekit
from tracekit.analysis import registry, trace_analysis
from tracekit.analysis.registry import ANALYSES, Output, register
from tracekit.trace import load

EAGER = "vit16x6x384/eager"


@pytest.fixture
def own():
    """Register analyses for one test, and take them out after it."""
    before = set(ANALYSES)
    yield register
    for name in set(ANALYSES) - before:
        del ANALYSES[name]


def test_a_toy_analysis_added_in_one_place_is_in_every_result(own):
    @own("toy", reads=("gpu_ops",), needs=("launches",), order=95, tables=("toy_longest",),
         columns={"longest_kernel_us": "µs", "launch_calls": "count"})
    def toy(x):
        kernels = x.tables.gpu_ops[x.tables.gpu_ops["kind"] == "kernel"]
        return Output(row={"longest_kernel_us": float(kernels["dur"].max()), "launch_calls": len(x["launches"])},
                      tables={"toy_longest": kernels.nlargest(3, "dur")[["name", "dur"]]})

    result = tracekit.analyze(H100_STUDY, only={EAGER})
    run = result.runs.iloc[0]
    ops = load(h100_trace(EAGER)).gpu_ops
    longest = ops.loc[ops["kind"] == "kernel", "dur"]
    assert run["longest_kernel_us"] == longest.max() > 0
    assert run["launch_calls"] == result["launch_apis"]["launches"].sum() == run["host_launches"]
    assert list(result["toy_longest"]["dur"]) == sorted(longest, reverse=True)[:3]
    assert result["toy_longest"]["run"].unique().tolist() == [EAGER]
    # its columns where its order puts them: after every built-in analysis's, before failed_analyses
    columns = list(result.runs.columns)
    assert columns.index("attributed_busy_share") < columns.index("longest_kernel_us") \
        < columns.index("launch_calls") < columns.index("failed_analyses")
    assert run["failed_analyses"] == "" and result.failures == []


def test_a_toy_analysis_that_raises_is_one_failure_line_and_its_dependents_keep_their_default(own):
    plain = tracekit.analyze(H100_STUDY, only={EAGER}).runs.iloc[0]

    @own("toy", reads=("gpu_ops",), columns={"toy_us": "µs"}, default=Output(row={"toy_us": math.nan}))
    def toy(x):
        raise RuntimeError("boom")

    @own("toy_after", needs=("toy",), columns={"toy_after": ""},
         default=lambda x, why: Output(row={"toy_after": f"not run: {why}"}))
    def toy_after(x):
        return Output(row={"toy_after": "ran"})

    result = tracekit.analyze(H100_STUDY, only={EAGER})
    run = result.runs.iloc[0]
    assert run["failed_analyses"] == "toy failed: RuntimeError: boom"
    assert [(name, reason) for _, name, reason, _ in result.failures] == [("toy", "RuntimeError: boom")]
    assert "raise RuntimeError" in result.failures[0][3]
    assert math.isnan(run["toy_us"]) and run["toy_after"] == "not run: toy failed: RuntimeError: boom"
    for key in ("kernels", "gpu_busy_us", "idle_host_wait_us", "verdict", "cuda_graphs_predicted_ms"):
        assert run[key] == plain[key], key


def test_an_analysis_gives_only_what_it_declares(own):
    plain = trace_analysis.analyze_trace(load(h100_trace(EAGER))).row

    @own("toy", columns={"toy_us": "µs"})
    def toy(x):
        return Output(row={"toy_us": 1.0, "toy_ms": 0.001})

    r = trace_analysis.analyze_trace(load(h100_trace(EAGER)))
    assert r.row["failed_analyses"] == "toy failed: ValueError: toy gave toy_ms, which it does not declare"
    assert "toy_us" not in r.row and r.row["kernels"] == plain["kernels"] > 0


@pytest.mark.parametrize("kwargs, problem", [
    (dict(reads=("gpu_op",)), "reads 'gpu_op': not a table"),
    (dict(columns={"busy": "µs"}), "column busy in 'µs': its name does not say so"),
    (dict(columns={"wait_us": "count"}), "column wait_us in 'count': its name does not say so"),
    (dict(columns={"wait_ms": "minutes"}), "unit 'minutes' not one of"),
    (dict(needs=("toy",)), "toy needs or uses itself"),
    (dict(uses=("idle",), required=True), "toy is required: it runs first"),
])
def test_a_declaration_is_checked_when_registered(own, kwargs, problem):
    with pytest.raises(ValueError, match=problem):
        own("toy", **kwargs)(lambda x: Output())
    assert "toy" not in ANALYSES
    with pytest.raises(ValueError, match="idle is registered already"):
        own("idle")(lambda x: Output())


def test_every_registered_column_says_its_unit_and_every_row_column_is_declared():
    """The built-in declarations: each unit known and said by its column's name (register checks
    it), and the row of a real trace, with the critical path, holds only declared columns."""
    declared = {c for a in ANALYSES.values() for c in a.columns}
    assert all(u in registry.UNITS for a in ANALYSES.values() for u in a.columns.values())
    assert {"gpu_busy_us", "iteration_ms", "idle_host_wait_share", "cuda_graphs_saving_ms"} <= declared
    row = trace_analysis.analyze_trace(load(h100_trace(EAGER)), tracekit.AnalysisOptions(critical_path=True)).row
    assert set(row) - declared == {"failed_analyses"} and "cp_kernel_share" in row
    tables = {t for a in ANALYSES.values() for t in a.tables}
    assert {"iterations", "attribution", "critical_path_top", "collective_idle"} <= tables


def test_the_runner_orders_analyses_by_what_they_read():
    """The summary first; the readers of the CPU-op nest next, so that it is freed before the
    others run; every analysis after those it needs and uses."""
    plan = [a.name for a in trace_analysis.run_order(list(ANALYSES.values()))]
    assert plan[0] == "summary"
    readers = {a.name for a in ANALYSES.values() if "nest" in a.reads}
    assert readers == {"cpu_ops", "modules", "attribution"} and set(plan[1:4]) == readers
    for a in ANALYSES.values():
        assert all(plan.index(d) < plan.index(a.name) for d in a.needs + a.uses), a.name
    with pytest.raises(ValueError, match="analyses not registered: toy reads nothing_such"):
        trace_analysis.run_order([registry.TraceAnalysis("toy", lambda x: Output(), needs=("nothing_such",))])
    circle = [registry.TraceAnalysis("a", lambda x: Output(), needs=("b",)),
              registry.TraceAnalysis("b", lambda x: Output(), uses=("a",))]
    with pytest.raises(ValueError, match="analyses that depend on each other: a, b"):
        trace_analysis.run_order(circle)


def test_shared_tables_and_results_are_freed_after_their_last_reader(own, monkeypatch):
    """The nest is built once and dropped; a result is dropped as soon as the last analysis
    that reads it has run (here one seen from a later analysis, through a weak reference)."""
    from tracekit.trace.reader import EventTables

    made = []
    memo = EventTables.memo

    def counted(self, key, source, make):
        return memo(self, key, source, lambda: (made.append(key), make())[1])
    monkeypatch.setattr(EventTables, "memo", counted)

    class Held:
        pass

    seen = {}

    @own("toy_held")
    def held(x):
        return Output(value=Held())

    @own("toy_reader", needs=("toy_held",))
    def reader(x):
        seen["ref"] = weakref.ref(x["toy_held"])
        return Output(value="read")

    @own("toy_later", needs=("toy_reader",), columns={"toy_held_alive": ""})
    def later(x):
        return Output(row={"toy_held_alive": seen["ref"]() is not None})

    tables = load(h100_trace(EAGER))
    r = trace_analysis.analyze_trace(tables)
    assert r.row["toy_held_alive"] is False and r.row["failed_analyses"] == ""
    assert made.count("nest") == 1 and "nest" not in tables.derived

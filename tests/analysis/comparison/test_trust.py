"""How far a comparison can be trusted (issue 17 part 4), on hand-made runs with known answers."""

import math

import pytest
from tracebuilder import eager_trace, graph_trace, write_run

from tracekit.analysis.comparison.compare import compare
from tracekit.analysis.result import Result
from tracekit.analysis.runs import analyze
from tracekit.report import write_reports
from tracekit.report.column_specs import OVERHEAD, SPEEDUP
from tracekit.report.comparison_text import finding
from tracekit.report.draw import headline
from tracekit.report.views import comparison_view, overhead_view
from tracekit.report.worded import suite_results, worded


def _pair(tmp_path, base=(0.08, 0.07, 0.09), other=(0.04, 0.035, 0.05), **extra):
    write_run(tmp_path / "w" / "eager", eager_trace(), mode="eager", latency_ms=base, **extra.get("eager", {}))
    write_run(tmp_path / "w" / "ro", graph_trace(), mode="reduce-overhead", latency_ms=other, **extra.get("ro", {}))
    return analyze(tmp_path)


def test_overlapping_ranges_make_an_inconclusive_speedup(tmp_path):
    """eager p10-p90 0.07-0.09 ms, the other 0.065-0.085 ms: they overlap."""
    c = compare(_pair(tmp_path, other=(0.075, 0.065, 0.085)).runs).set_index("mode")
    ro = c.loc["reduce-overhead"]
    assert ro["inconclusive"] and not c.loc["eager", "inconclusive"]
    assert (ro["speedup_low"], ro["speedup_high"]) == pytest.approx((0.07 / 0.085, 0.09 / 0.065))
    assert finding(ro).startswith("inconclusive: the p10-p90 latency ranges overlap (speedup 0.82-1.38x), "
                                  "so this may be noise: ")
    headers, rows = headline(comparison_view(compare(analyze(tmp_path).runs)), SPEEDUP)
    speedups = [r[headers.index("speedup (p10-p90 range)")] for r in rows]
    assert speedups == ["1.00x (0.78-1.29)", "inconclusive (0.82-1.38x)"]   # not printed as 1.07x
    from tracekit.report.charts import _speedups
    assert _speedups(compare(analyze(tmp_path).runs)) == ["1.00x", "inconclusive"]  # the plots' labels too


def test_separate_ranges_give_a_number(tmp_path):
    c = compare(_pair(tmp_path).runs).set_index("mode")
    assert not c.loc["reduce-overhead", "inconclusive"] and c.loc["reduce-overhead", "speedup"] == pytest.approx(2.0)
    assert not finding(c.loc["reduce-overhead"]).startswith("inconclusive")


def test_a_profiled_iteration_faster_than_the_unprofiled_one_is_an_unreliable_timing(tmp_path):
    """eager_trace's profiled iterations take 0.1 ms; an unprofiled latency of 0.55 ms cannot be
    right (the profiler only adds work): no "profiler overhead -82%"."""
    t = worded(Result.of(_pair(tmp_path, base=(0.55, 0.5, 0.6))))
    o = t.overhead.set_index("run")
    assert o.loc["w/eager", "unreliable_unprofiled"] and not o.loc["w/eager", "flagged"]
    assert o.loc["w/eager", "profiler_overhead"] == pytest.approx(0.1 / 0.55 - 1)   # kept in the data
    headers, rows = headline(overhead_view(t.overhead), OVERHEAD)
    cells = dict(zip(headers, rows[0]))
    assert cells["flag"] == "unreliable unprofiled timing" and cells["profiler overhead"] == "-"
    w = t.comparison.set_index("mode")["warning"]
    assert w["eager"] == ("unreliable unprofiled timing: a profiled iteration took 0.100 ms, 82% less than the "
                          "unprofiled latency 0.550 ms, though the profiler only adds work")
    assert w["reduce-overhead"] == ("the eager baseline's unprofiled timing is unreliable (its profiled iteration "
                                    "was shorter)")


def test_timing_doubts_and_thread_counts_are_warnings(tmp_path):
    busy = {"start": {"loadavg_1m": 5.9, "loadavg_5m": 5.8, "cpus": 2}, "end": {"loadavg_1m": 1.0, "cpus": 2}}
    env = {"device_name": "AMD EPYC", "cpu_threads": 1}
    extra = {"eager": dict(device_type="cpu", requested_device="cpu", environment=env,
                           wall_ms={"median": 0.088}, host_load=busy),
             "ro": dict(device_type="cpu", requested_device="cpu", environment={**env, "cpu_threads": 2},
                        wall_ms={"median": 0.041}, repeats={"n": 3, "spread": 0.12})}
    a = _pair(tmp_path, **extra)
    c = worded(Result.of(a)).comparison.set_index("mode")
    assert c.loc["eager", "warning"] == "host busy at the start: load 5.9 on 2 CPUs"
    # +10% apart with no block size recorded: the GPU tail cannot explain it; the report names the run once
    assert c.loc["eager", "timer_gap"] == "no known reason" and c.loc["reduce-overhead", "timer_gap"] == ""
    assert c.loc["reduce-overhead", "warning"] == (
        "ran with 2 CPU threads, the eager baseline with 1: the speedup compares thread counts too; "
        "the 3 processes' latency medians spread by 12%")
    assert c.loc["reduce-overhead", "timer_agreement"] == pytest.approx(0.041 / 0.04 - 1)
    assert math.isnan(c.loc["eager", "process_spread"]) and c.loc["eager", "processes"] == 1
    write_reports(Result.of(a), tmp_path / "r", source="t")
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert "## How far the timing can be trusted" in summary
    assert "| vit16x6x384 b8 fp32 cpu | reduce-overhead | 0.040 | 0.035-0.050 | 0.041 | +2.5% |  | 3 | 12.0% | 2 |" \
        in summary
    assert ("- **Timing**: On 1 run the two timers are more than 5% apart for no known reason: w/eager (+10%)."
            in summary.splitlines())


def test_suite_findings_count_inconclusive_speedups_apart(tmp_path):
    from tracekit.analysis.comparison.suite_comparison import comparison
    from tracekit.report.findings import suite_findings
    write_run(tmp_path / "a" / "eager", eager_trace(), mode="eager", latency_ms=(0.08, 0.07, 0.09))
    write_run(tmp_path / "a" / "default", eager_trace(), mode="default", latency_ms=(0.04, 0.035, 0.05))
    write_run(tmp_path / "b" / "eager", eager_trace(), mode="eager", latency_ms=(0.08, 0.07, 0.09), batch=1)
    write_run(tmp_path / "b" / "default", eager_trace(), mode="default", latency_ms=(0.09, 0.08, 0.1), batch=1)
    cmp = suite_results(comparison(analyze(tmp_path).runs)).set_index("run")
    assert cmp.loc["b/default", "speedup_inconclusive"] and cmp.loc["b/default", "speedup_text"] == \
        "inconclusive (0.70-1.12x)"
    assert cmp.loc["a/default", "speedup_text"] == "2.00x (1.40-2.57)"
    text = [f for f in suite_findings(cmp.reset_index()) if f.startswith("default vs eager")]
    assert text == ["default vs eager: faster on 1 of 2 workloads, speedup 2x (median 2x); inconclusive on 1 "
                    "(the p10-p90 latency ranges overlap or the timers contradict: vit16x6x384 b1 fp32 cuda)."]


def test_timers_that_contradict_make_an_inconclusive_speedup(tmp_path):
    """CUDA events: 0.14 ms against eager's 0.09 (0.64x, ranges apart); the wall clock: 0.08 against
    0.10 (1.25x). As issue 21's lm-large-512 forward (14.85 ms by events, 8.11 ms by the wall clock)."""
    extra = {"eager": dict(wall_ms={"median": 0.10}), "ro": dict(wall_ms={"median": 0.08})}
    a = _pair(tmp_path, base=(0.09, 0.085, 0.095), other=(0.14, 0.135, 0.145), **extra)
    c = compare(a.runs).set_index("mode")
    ro = c.loc["reduce-overhead"]
    assert ro["speedup_high"] < 1 and ro["wall_speedup"] == pytest.approx(1.25)
    assert ro["inconclusive"] and not c.loc["eager", "inconclusive"]
    assert finding(ro).startswith("inconclusive: the timers contradict each other (CUDA events 0.64x, the "
                                  "synchronised wall clock 1.25x): ")
    headers, rows = headline(comparison_view(c.reset_index()), SPEEDUP)
    assert rows[1][headers.index("speedup (p10-p90 range)")] == "inconclusive (0.59-0.70x; wall clock 1.25x)"
    # a wall clock that agrees on the direction leaves the speedup as it was
    extra["ro"] = dict(wall_ms={"median": 0.15})
    c = compare(_pair(tmp_path / "2", base=(0.09, 0.085, 0.095), other=(0.14, 0.135, 0.145), **extra).runs)
    assert not c.set_index("mode").loc["reduce-overhead", "inconclusive"]
    # the suite's comparison: the same rule
    from tracekit.analysis.comparison.suite_comparison import comparison
    s = suite_results(comparison(a.runs)).set_index("mode").loc["reduce-overhead"]
    assert s["speedup_inconclusive"] and s["wall_speedup_vs_eager"] == pytest.approx(1.25)
    assert s["speedup_text"] == "inconclusive (0.59-0.70x; wall clock 1.25x)"


def _wall(median, p10, p90, calls_per_block=1):
    return {"median": median, "p10": p10, "p90": p90, "calls_per_block": calls_per_block, "n": 10,
            "timer": "synchronised perf_counter blocks, interleaved"}


def _two_workloads(tmp_path, eager_wall, ro_wall):
    """vit16x6x384 at batch 8 and 1, eager and reduce-overhead each; CUDA events 0.08 (0.07-0.09) and
    0.04 (0.035-0.05) ms; each trace's GPU is busy 0.02 ms an iteration."""
    for batch in (8, 1):
        write_run(tmp_path / f"b{batch}" / "eager", eager_trace(), mode="eager", latency_ms=(0.08, 0.07, 0.09),
                  batch=batch, wall_ms=eager_wall)
        write_run(tmp_path / f"b{batch}" / "ro", graph_trace(), mode="reduce-overhead",
                  latency_ms=(0.04, 0.035, 0.05), batch=batch, wall_ms=ro_wall)
    return analyze(tmp_path)


def test_timers_apart_by_the_gpu_tail_are_said_once_per_report(tmp_path):
    """Wall clock +12.5% and +25% over CUDA events, in blocks of 1 call: 0.01 ms more, within the GPU tail
    a synchronised block waits for (0.02 ms of GPU work an iteration). Both timers say faster: no row warns."""
    a = _two_workloads(tmp_path, _wall(0.09, 0.085, 0.095), _wall(0.05, 0.045, 0.055))
    assert list(a.runs["timer_gap"]) == ["GPU tail"] * 4
    t = Result.of(a)
    assert not worded(t).comparison["warning"].str.contains("timer").any()
    write_reports(t, tmp_path / "r", source="t")
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert "timers disagree" not in summary and "different verdicts" not in summary
    lines = [line for line in summary.splitlines() if line.startswith("- **Timing**")]
    assert lines == ["- **Timing**: On 4 runs the synchronised wall clock reads 12-25% more than the per-call "
                     "timer, no more than the GPU tail each synchronised block waits for (the GPU work still queued "
                     "when the host has enqueued the block's last call: at most one iteration's GPU busy time, over "
                     "the block's calls): a known difference of the two timers, not a noisy host. Speedups use the "
                     "per-call timer."]
    assert "| vit16x6x384 b1 fp32 cuda | eager | 0.080 | 0.070-0.090 | 0.090 | 0.085-0.095 | +12.5% | GPU tail |" \
        in summary
    # The same gap in blocks of 10 calls is 10x the tail a block can add: no known reason, each run named.
    b = _two_workloads(tmp_path / "10", _wall(0.09, 0.085, 0.095, 10), _wall(0.05, 0.045, 0.055, 10))
    assert list(b.runs["timer_gap"]) == ["no known reason"] * 4
    from tracekit.report.run_lines import timer_gap_lines
    assert timer_gap_lines(compare(b.runs)) == ["On 4 runs the two timers are more than 5% apart for no known reason: "
                                                "b1/eager (+12%), b1/ro (+25%), b8/eager (+12%), b8/ro (+25%)."]


def test_a_row_warns_of_its_timers_where_they_reach_different_verdicts(tmp_path):
    """CUDA events: 2.00x (1.40-2.57), faster. Wall clock: 0.08 (0.07-0.09) against 0.075 (0.06-0.09):
    1.07x (0.78-1.50), inconclusive. The medians are on the same side of 1: the speedup stands, with a warning."""
    a = _two_workloads(tmp_path, _wall(0.08, 0.07, 0.09), _wall(0.075, 0.06, 0.09))
    c = worded(Result.of(a)).comparison
    ro = c[c["mode"] == "reduce-overhead"]
    sentence = ("the timers reach different verdicts: CUDA events faster (2.00x, 1.40-2.57), the synchronised wall "
                "clock inconclusive (1.07x, 0.78-1.50)")
    assert list(ro["warning"]) == [sentence] * 2 and not ro["inconclusive"].any()
    assert (c[c["mode"] == "eager"]["warning"] == "").all()
    from tracekit.analysis.comparison.suite_comparison import comparison
    s = suite_results(comparison(a.runs)).set_index("run")
    assert s.loc["b1/ro", "timing_warning"] == sentence and s.loc["b1/eager", "timing_warning"] == ""
    assert s.loc["b1/ro", "speedup_text"] == "2.00x (1.40-2.57)"


def test_runs_timed_before_interleaving_still_analyze(tmp_path):
    """A version-4 run.json (the wall clock by blocked_autorange after the events, no interleaving) and a
    version-2 one (no wall clock at all) are read, compared and reported."""
    old_wall = {"median": 0.09, "mean": 0.09, "p10": 0.085, "p90": 0.095, "iqr": 0.004, "n": 7, "calls_per_block": 1,
                "timer": "torch.utils.benchmark.Timer.blocked_autorange"}
    write_run(tmp_path / "w" / "eager", eager_trace(), mode="eager", latency_ms=(0.08, 0.07, 0.09),
              manifest_version=4, wall_ms=old_wall, timer_agreement=0.125)
    write_run(tmp_path / "w" / "ro", graph_trace(), mode="reduce-overhead", latency_ms=(0.04, 0.035, 0.05),
              manifest_version=2)
    from tracekit.manifest import Manifest
    assert Manifest.read(tmp_path / "w" / "eager").interleaving is None
    a = analyze(tmp_path)
    assert dict(zip(a.runs["mode"], a.runs["timer_gap"])) == {"eager": "GPU tail", "reduce-overhead": ""}
    t = Result.of(a)
    assert t.comparison.set_index("mode").loc["reduce-overhead", "speedup"] == pytest.approx(2.0)
    write_reports(t, tmp_path / "r", source="t")
    assert "On 1 run the synchronised wall clock reads 12% more" in (tmp_path / "r" / "summary.md").read_text()

"""Timing you can trust (issue 17 part 4): the two timers, their agreement, the host's load."""

import time

import pytest

from tracekit import timing


def test_wall_clock_is_torch_benchmark_timers_per_call_time():
    w = timing.wall_clock(lambda: time.sleep(0.002), budget_s=0.2)
    assert w["timer"] == "torch.utils.benchmark.Timer.blocked_autorange"
    assert w["n"] >= 1 and w["calls_per_block"] >= 1
    assert 2.0 <= w["p10"] <= w["median"] <= w["p90"] < 50  # a 2 ms sleep takes at least 2 ms a call


def test_wall_clock_with_fixed_calls_makes_exactly_that_many():
    """The ranks of a distributed run each call the step the same number of times."""
    calls = []
    w = timing.wall_clock(lambda: calls.append(time.sleep(0.001)), budget_s=5.0, calls=7)
    assert w["n"] == 1 and w["calls_per_block"] == 7 and w["iqr"] == 0
    assert 7 <= len(calls) <= 9    # and at most the Timer's two warm-up calls
    assert w["timer"] == "torch.utils.benchmark.Timer.timeit" and 1.0 <= w["p10"] <= w["median"] <= w["p90"]


def test_time_calls_on_the_cpu_is_perf_counter_per_call():
    samples, timer = timing.time_calls(lambda: time.sleep(0.001), 5, "cpu")
    assert timer == "perf_counter" and len(samples) == 5 and min(samples) >= 1.0
    stats = timing.latency_stats(samples)
    assert stats["n"] == 5 and stats["samples"] == samples and stats["min"] == min(samples)


@pytest.mark.parametrize("latency, wall, problems", [
    (2.00, 2.08, []),                                    # 4% apart: agree
    (2.00, 2.20, ["timers disagree: cuda_events median 2.000 ms, synchronised wall clock 2.200 ms (+10%, over 5%)"]),
    (2.00, 1.80, ["timers disagree: cuda_events median 2.000 ms, synchronised wall clock 1.800 ms (-10%, over 5%)"]),
    (2.00, float("nan"), []),                            # no wall clock recorded (an older run): not judged
])
def test_timers_more_than_5_percent_apart_are_a_doubt(latency, wall, problems):
    assert timing.problems(latency, wall, "cuda_events", None) == problems


def test_a_host_with_more_runnable_tasks_than_cpus_is_a_doubt():
    load = {"start": {"loadavg_1m": 5.9, "loadavg_5m": 5.8, "cpus": 2}, "end": {"loadavg_1m": 1.2, "cpus": 2}}
    assert timing.problems(1.0, 1.01, "perf_counter", load) == ["host busy at the start: load 5.9 on 2 CPUs"]
    assert not timing.busy_host({"loadavg_1m": 2.0, "cpus": 2}) and not timing.busy_host({})
    here = timing.host_load()
    assert here["cpus"] >= 1 and here["loadavg_1m"] >= 0


def test_agreement_is_wall_over_latency_less_one():
    assert timing.agreement(2.0, 2.5) == pytest.approx(0.25)

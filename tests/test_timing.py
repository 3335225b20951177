"""Timing you can trust (issue 17 part 4): the two timers, their agreement, the host's load."""

import time

import pytest

from tracekit.analysis.comparison import trust
from tracekit.capture import timers
from tracekit.report.formats.run_status import timing_problems


class FakeHost:
    """A host whose calls take ``call_ms`` (``slow`` times that from call ``slow_from`` on), a
    clock that moves only with them, and a log of every call and clock read, in order."""

    def __init__(self, call_ms=1.0, slow=1.0, slow_from=None):
        self.now, self.calls, self.log = 0.0, 0, []
        self.call_ms, self.slow, self.slow_from = call_ms, slow, slow_from

    def fn(self):
        slowed = self.slow_from is not None and self.calls >= self.slow_from
        self.now += self.call_ms * (self.slow if slowed else 1) / 1e3
        self.calls += 1
        self.log.append("call")

    def clock(self):
        self.log.append("clock")
        return self.now


def _blocks(log):
    """The log cut into blocks: ("untimed", 1), ("per-call", k) and ("wall", m)."""
    out, i = [], 0
    while i < len(log):
        if log[i:i + 3] == ["clock", "call", "clock"]:
            k = 0
            while log[i:i + 3] == ["clock", "call", "clock"]:
                k, i = k + 1, i + 3
            out.append(("per-call", k))
        elif log[i] == "clock":
            end = log.index("clock", i + 1)
            out.append(("wall", end - i - 1))
            i = end + 1
        else:
            out.append(("untimed", 1))
            i += 1
    return out


def test_interleaved_alternates_per_call_and_wall_clock_blocks():
    """23 calls over 10 rounds (3, 3, 3, 2, ...); a 1 ms call makes a 10 ms wall-clock block of 10 calls."""
    host = FakeHost(call_ms=1.0)
    latency, wall, how = timers.interleaved(host.fn, 23, "cpu", clock=host.clock)
    per_round = [3, 3, 3, 2, 2, 2, 2, 2, 2, 2]
    assert _blocks(host.log) == [b for k in per_round for b in (("untimed", 1), ("per-call", k), ("wall", 10))]
    assert how == {"rounds": 10, "latency_calls": per_round, "wall_calls": 10, "schedule": "sized"}
    assert latency["n"] == 23 and latency["timer"] == "perf_counter" and latency["median"] == pytest.approx(1.0)
    assert wall["n"] == 10 and wall["calls_per_block"] == 10 and wall["calls"] == 100
    assert wall["median"] == pytest.approx(1.0) and wall["timer"] == timers.WALL_TIMER


def test_a_host_that_slows_midway_is_seen_by_both_timers_alike():
    """The host runs 3x slower from round 5 on (call 55: each round is 1 + 5 + 5 calls of 4 ms).
    One timer after the other would give 4 ms and 12 ms; interleaved, both see both halves."""
    host = FakeHost(call_ms=4.0, slow=3.0, slow_from=55)
    latency, wall, how = timers.interleaved(host.fn, 50, "cpu", clock=host.clock)
    assert how["wall_calls"] == 5   # 5 calls of 4 ms is already a 20 ms block
    assert sorted(set(round(x, 6) for x in latency["samples"])) == [4.0, 12.0]
    assert sorted(round(x, 6) for x in wall["samples"]) == [4.0] * 5 + [12.0] * 5
    assert latency["median"] == pytest.approx(8.0) and wall["median"] == pytest.approx(8.0)
    assert (wall["p10"], wall["p90"]) == pytest.approx((4.0, 12.0))


def test_ranks_follow_a_fixed_schedule_whatever_their_speed():
    """Distributed ranks: the same calls in the same order on a fast and a slow rank."""
    fast, slow = FakeHost(call_ms=0.01), FakeHost(call_ms=30.0)
    runs = [timers.interleaved(h.fn, 23, "cpu", fixed=True, clock=h.clock) for h in (fast, slow)]
    assert fast.log == slow.log and fast.calls == slow.calls == 10 + 23 + 10 * 3
    assert runs[0][2] == runs[1][2] == {"rounds": 10, "latency_calls": [3, 3, 3] + [2] * 7, "wall_calls": 3,
                                        "schedule": "fixed"}
    sized = FakeHost(call_ms=0.01)
    assert timers.interleaved(sized.fn, 23, "cpu", clock=sized.clock)[2]["wall_calls"] == 1000


def test_fewer_calls_than_rounds_make_one_call_a_round():
    host = FakeHost(call_ms=2.0)
    latency, wall, how = timers.interleaved(host.fn, 3, "cpu", clock=host.clock)
    assert _blocks(host.log) == [("untimed", 1), ("per-call", 1), ("wall", 5)] * 3
    assert how["rounds"] == 3 and latency["n"] == 3 and wall["n"] == 3


def test_wall_clock_blocks_last_at_least_10_ms():
    assert timers.wall_block_calls(5, 0.001) == 10_000 and timers.wall_block_calls(5, 0.3) == 34
    assert timers.wall_block_calls(5, 40.0) == 5 and timers.wall_block_calls(5, 0.0) == 5


def test_interleaved_on_the_real_clock():
    latency, wall, how = timers.interleaved(lambda: time.sleep(0.002), 6, "cpu")
    assert latency["n"] == 6 and wall["n"] == 6 and how["rounds"] == 6 and 2 <= how["wall_calls"] <= 5
    assert 2.0 <= wall["p10"] <= wall["median"] <= wall["p90"] < 50  # a 2 ms sleep takes at least 2 ms a call
    assert 2.0 <= latency["min"]


def test_time_calls_on_the_cpu_is_perf_counter_per_call():
    samples, timer = timers.time_calls(lambda: time.sleep(0.001), 5, "cpu")
    assert timer == "perf_counter" and len(samples) == 5 and min(samples) >= 1.0
    stats = timers.latency_stats(samples)
    assert stats["n"] == 5 and stats["samples"] == samples and stats["min"] == min(samples)


@pytest.mark.parametrize("latency, wall, problems", [
    (2.00, 2.08, []),                                    # 4% apart: agree
    (2.00, 2.20, ["timers disagree: cuda_events median 2.000 ms, synchronised wall clock 2.200 ms (+10%, over 5%)"]),
    (2.00, 1.80, ["timers disagree: cuda_events median 2.000 ms, synchronised wall clock 1.800 ms (-10%, over 5%)"]),
    (2.00, float("nan"), []),                            # no wall clock recorded (an older run): not judged
])
def test_timers_more_than_5_percent_apart_are_a_doubt(latency, wall, problems):
    assert timing_problems(latency, wall, "cuda_events", None) == problems


def test_a_host_with_more_runnable_tasks_than_cpus_is_a_doubt():
    load = {"start": {"loadavg_1m": 5.9, "loadavg_5m": 5.8, "cpus": 2}, "end": {"loadavg_1m": 1.2, "cpus": 2}}
    assert timing_problems(1.0, 1.01, "perf_counter", load) == ["host busy at the start: load 5.9 on 2 CPUs"]
    assert not trust.busy_host({"loadavg_1m": 2.0, "cpus": 2}) and not trust.busy_host({})
    here = timers.host_load()
    assert here["cpus"] >= 1 and here["loadavg_1m"] >= 0


def test_agreement_is_wall_over_latency_less_one():
    assert timers.agreement(2.0, 2.5) == pytest.approx(0.25)


def test_host_times_time_each_call_from_its_start_to_its_return():
    from tracekit.capture import timers

    ticks = iter(range(1000))
    calls = []
    stats = timers.host_times(lambda: calls.append(1), "cpu", calls=5, clock=lambda: next(ticks) * 0.002)
    assert len(calls) == 5 and stats["n"] == 5 and stats["median"] == pytest.approx(2.0)


def test_a_ranks_host_times_wait_at_a_barrier_before_each_call():
    """The ranks of a job make the same calls in the same order, each after a barrier of the process group."""
    from tracekit.capture import timers

    ticks = iter(range(1000))
    events = []
    stats = timers.host_times(lambda: events.append("call"), "cpu", calls=3, clock=lambda: next(ticks) * 0.002,
                              barrier=lambda: events.append("barrier"))
    assert events == ["barrier", "call"] * 3 and stats["n"] == 3 and stats["median"] == pytest.approx(2.0)


def test_a_step_clock_times_each_step_from_one_boundary_to_the_next():
    """A recorded loop's steps: a stretch starts, each step is a lap; two stretches (before and after
    the profiled window) do not count the time between them."""
    from tracekit.capture import timers

    now = iter([0.0, 0.001, 0.003, 0.010, 0.0105])
    clock = timers.StepClock("cpu", clock=lambda: next(now))
    clock.start()
    clock.lap()
    clock.lap()
    clock.start()
    clock.lap()
    times, timer = clock.times_ms()
    assert timer == "perf_counter" and times == pytest.approx([1.0, 2.0, 0.5])

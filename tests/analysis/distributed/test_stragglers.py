"""Matching collectives across ranks: arrival skew, the last rank, the wait it caused."""

import pandas as pd
import pytest

from tracekit.analysis.distributed import stragglers
from tracekit.report.job_text import no_straggler_text


def _calls(rows):
    """rows: (rank, collective, seq, ts, end[, process_group[, message_bytes]])"""
    out = []
    for i, r in enumerate(rows):
        rank, coll, seq, ts, end, *rest = r
        pg = rest[0] if rest else "0"
        size = rest[1] if len(rest) > 1 else float("nan")
        out.append({"rank": rank, "call": i, "collective": coll, "process_group": pg, "seq": seq, "ts": ts,
                    "end": end, "dur_us": end - ts, "message_bytes": size, "iteration": 1})
    return pd.DataFrame(out)


def test_the_last_rank_and_the_wait_it_caused():
    calls = _calls([(0, "all_reduce", 1, 100, 400), (1, "all_reduce", 1, 300, 400), (2, "all_reduce", 1, 150, 400),
                    (0, "all_reduce", 2, 500, 800), (1, "all_reduce", 2, 700, 800), (2, "all_reduce", 2, 520, 800)])
    per_call, matched = stragglers.match(calls)
    assert list(matched["last_rank"]) == [1, 1] and list(matched["skew_us"]) == [200, 200]
    assert list(matched["wait_caused_us"]) == [200 + 150, 200 + 180] and matched["consistent"].all()
    assert per_call.groupby("rank")["wait_us"].sum().to_dict() == {0: 400, 1: 0, 2: 330}
    s = stragglers.stragglers(per_call, matched, window_us=1000)
    top = s.iloc[0]
    assert (top["rank"], top["times_last"], top["last_share"], top["wait_caused_us"], top["straggler"]) == (
        1, 2, 1.0, 730, True)
    assert s["straggler"].sum() == 1
    assert s.set_index("rank")["mean_lateness_us"].to_dict() == pytest.approx({0: -35.0, 1: 165.0, 2: 0.0})


def test_a_wait_is_at_most_the_call_itself():
    # rank 0's call is short (it ends at 450, after rank 1 arrived at 400): it waited 250 of its 350 µs
    per_call, matched = stragglers.match(_calls([(0, "all_reduce", 1, 100, 450), (1, "all_reduce", 1, 400, 460)]))
    assert per_call.set_index("rank")["wait_us"].to_dict() == {0: 300, 1: 0}
    per_call, _ = stragglers.match(_calls([(0, "all_reduce", 1, 100, 380), (1, "all_reduce", 1, 300, 460)]))
    assert per_call.set_index("rank")["wait_us"].to_dict() == {0: 200, 1: 0}


def test_a_small_balanced_wait_names_no_straggler():
    calls = _calls([(0, "all_reduce", s, 100 * s + (5 if s % 2 else 0), 100 * s + 50) for s in range(1, 9)]
                   + [(1, "all_reduce", s, 100 * s + (0 if s % 2 else 5), 100 * s + 50) for s in range(1, 9)])
    per_call, matched = stragglers.match(calls)
    assert matched["wait_caused_us"].sum() == 40
    assert not stragglers.stragglers(per_call, matched, window_us=1000)["straggler"].any()


def test_without_sequence_numbers_calls_match_by_order_within_group_and_collective():
    calls = _calls([(0, "all_to_all", None, 100, 300, ""), (0, "all_reduce", None, 150, 350, ""),
                    (0, "all_to_all", None, 400, 600, ""),
                    # rank 1 issues the all_reduce (another group) before its first all_to_all
                    (1, "all_reduce", None, 120, 350, ""), (1, "all_to_all", None, 200, 300, ""),
                    (1, "all_to_all", None, 450, 600, "")])
    _, matched = stragglers.match(calls)
    got = matched.set_index(["collective", "ordinal"])[["last_rank", "skew_us"]].to_dict("index")
    assert got == {("all_to_all", 0): {"last_rank": 1, "skew_us": 100},
                   ("all_reduce", 0): {"last_rank": 0, "skew_us": 30},
                   ("all_to_all", 1): {"last_rank": 1, "skew_us": 50}}


def test_an_impossible_match_counts_for_no_wait():
    # rank 0's call ended (300) long before rank 1 arrived (5000): not the same collective
    calls = _calls([(0, "all_reduce", None, 100, 300), (1, "all_reduce", None, 5000, 5200),
                    (0, "all_gather", None, 6000, 6500, "0", 64.0), (1, "all_gather", None, 6100, 6500, "0", 128.0)])
    per_call, matched = stragglers.match(calls)
    assert not matched["consistent"].any()        # the first by time, the second by size
    assert matched["wait_caused_us"].sum() == 0 and per_call["wait_us"].sum() == 0
    s = stragglers.stragglers(per_call, matched, window_us=1000)
    assert s["calls"].sum() == 0 and not s["straggler"].any()


def test_calls_of_one_rank_only_are_not_matched():
    per_call, matched = stragglers.match(_calls([(0, "all_reduce", 1, 100, 200), (0, "all_reduce", 2, 300, 400),
                                                 (1, "all_reduce", 2, 350, 400)]))
    assert len(matched) == 1 and matched["seq"].iloc[0] == 2
    assert per_call.set_index(["rank", "seq"])["wait_us"].to_dict() == {(0, 1): 0, (0, 2): 50, (1, 2): 0}


def test_idle_while_waiting_for_another_rank():
    per_call, _ = stragglers.match(_calls([(0, "all_reduce", 1, 100, 400), (1, "all_reduce", 1, 300, 400)]))
    pieces = pd.DataFrame({"rank": [0, 0, 1], "call": [0, 0, 1], "start": [150, 320, 310], "end": [250, 380, 390],
                           "cause": ["host_wait", "other", "host_wait"]})
    got = stragglers.rank_wait_idle(per_call, pieces).set_index(["rank", "cause"])["idle_us"].to_dict()
    # rank 0 waited [100, 300): its host-wait piece lies inside, its "other" piece after
    assert got == {(0, "host_wait"): 100, (0, "other"): 0, (1, "host_wait"): 0}


def test_two_ranks_that_waited_for_each_other_are_no_straggler_pair():
    """Issue 31: ranks 0 and 1 waited 784 and 866 ms for each other (each last once): the
    waiting is balanced within noise, so no straggler, and the reason gives the figures."""
    calls = _calls([(0, "all_reduce", 1, 0, 800_000), (1, "all_reduce", 1, 784_000, 800_000),
                    (1, "all_reduce", 2, 1_000_000, 1_900_000), (0, "all_reduce", 2, 1_866_000, 1_900_000)])
    per_call, matched = stragglers.match(calls)
    s = stragglers.stragglers(per_call, matched, window_us=2_000_000)
    assert s.set_index("rank")["wait_caused_us"].to_dict() == {0: 866_000, 1: 784_000}
    assert not s["straggler"].any()
    because = stragglers.no_straggler_because(s, 2_000_000)
    assert because == {"code": stragglers.IN_TURNS, "ranks": (0, 1), "caused_us": (866_000, 784_000)}
    assert no_straggler_text(because) == (
        "rank 0 caused 866.000 ms of wait, rank 1 784.000 ms: 1.10x, within the 2x of noise between ranks "
        "(they waited for each other in turn)")
    # twice as much wait caused is beyond that: rank 0 is the straggler
    calls.loc[calls["seq"] == 1, "ts"] = [0, 400_000]
    per_call, matched = stragglers.match(calls)
    s = stragglers.stragglers(per_call, matched, window_us=2_000_000)
    assert s.set_index("rank")["straggler"].to_dict() == {0: True, 1: False}
    assert stragglers.no_straggler_because(s, 2_000_000) is None


def test_collectives_on_one_rank_only_name_no_straggler():
    """Issue 31: a job where one rank's trace holds collectives and the other's none (a
    CPU-only rank) raised in the job analysis (an empty match table masked the calls)."""
    per_call, matched = stragglers.match(_calls([(0, "all_reduce", 1, 100, 200), (0, "all_reduce", 2, 300, 400)]))
    assert matched.empty
    s = stragglers.stragglers(per_call, matched, window_us=1000)
    assert list(s["rank"]) == [0] and not s["straggler"].any()
    assert stragglers.no_straggler_because(s, 1000) == {"code": stragglers.NO_WAIT}
    assert no_straggler_text(stragglers.no_straggler_because(s, 1000)) == "no rank waited for another"


def test_unsequenced_calls_line_up_where_one_rank_s_window_holds_one_call_more():
    # rank 0's profiled window begins one all_to_all earlier: by order alone its k-th call would meet
    # rank 1's k-th (impossible matches, and a false wait); lined up, the calls whose ends agree meet
    calls = _calls([(0, "all_to_all", None, 0, 300, ""), (0, "all_to_all", None, 310, 900, ""),
                    (0, "all_to_all", None, 2000, 2500, ""),
                    (1, "all_to_all", None, 350, 900, ""), (1, "all_to_all", None, 1900, 2500, "")])
    per_call, matched = stragglers.match(calls)
    got = matched.set_index("ordinal")[["consistent", "last_rank", "skew_us"]].to_dict("index")
    assert got == {1: {"consistent": True, "last_rank": 1, "skew_us": 40},
                   2: {"consistent": True, "last_rank": 0, "skew_us": 100}}
    assert per_call.groupby("rank")["wait_us"].sum().to_dict() == {0: 40, 1: 100}


def test_the_real_job_lines_up_its_all_to_alls(fixtures):
    """The real 2-rank NCCL fixture: rank 0's window holds one all_to_all more before the first both
    ranks ran (whose SendRecv kernels end at the same µs on both): matched by order alone, rank 1's
    first met rank 0's first, impossibly, and its third rank 0's third, with a false wait of 39.6 ms."""
    from tracekit.analysis.distributed import collectives
    from tracekit.trace import load

    folder = fixtures / "dist" / "hta-trace-filter-sampled-2rank"
    frames = [collectives.calls(load(folder / f"sampled_rank-{r}.json.gz")).assign(rank=r) for r in (0, 1)]
    calls = pd.concat([f.assign(call=range(len(f))) for f in frames], ignore_index=True)
    per_call, matched = stragglers.match(calls)
    a2a = matched[matched["collective"] == "all_to_all"].set_index("ordinal")
    assert a2a["consistent"].tolist() == [True, False, False] and a2a.loc[1, "wait_caused_us"] == 4859
    ends = per_call[per_call["key"] == "|all_to_all #1"].groupby("rank")["end"].first()
    assert ends[0] == ends[1]
    assert matched["wait_caused_us"].sum() == 4859 + 3302 + 84 + 22328 + 1292

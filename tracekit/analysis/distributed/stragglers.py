"""Collectives matched across the ranks of a job: arrival skew, the last rank, the wait it caused.

A collective completes on no rank before every rank of its group has arrived (called
it: NCCL's kernels spin until their peers join, gloo's algorithms exchange data with
every peer), so a rank that arrives early waits for the last one. Per matched call:

* the call is found on each rank by its process group and sequence number (torch's
  per-group ``Seq``, written by record_param_comms from torch 2.2 on); without one, by
  its order among the calls of the same process group and collective on that rank
  (ranks issue a group's collectives in one order; restricting to one collective keeps
  the match right when the group is unknown and several groups interleave), each rank's
  order lined up with the lowest rank's where the profiled windows begin at another call on
  each rank (on the real 2-rank fixture rank 0's window holds one all_to_all more before
  the first they share, whose kernels end at the same µs on both);
* arrival: the call's start on each rank (:mod:`tracekit.analysis.distributed.collectives`);
  skew = last arrival - first arrival;
* each rank's wait = last arrival - its own arrival, at most the call's own duration
  (the wait happens inside the call; the bound also keeps clock offsets between hosts
  from inventing waits); the wait the last rank caused = the sum of the others' waits;
* a match is *consistent* when it is physically possible: no rank's call ended more
  than ``MATCH_SLACK_US`` before the last rank arrived (a collective completes on no
  rank before all have joined) and the ranks' message sizes agree where known. An
  inconsistent match (ranks of different groups, a window that cuts a group's calls
  differently on each rank) is listed but counts for no wait and no straggler.

Arrivals on different ranks are compared on the traces' clocks (Kineto writes µs since
a common epoch; ranks of one host share the clock, ranks of different hosts agree as
well as their clocks are synchronized).

The straggler: the rank that caused the most wait, when the waiting is imbalanced beyond
noise: it caused at least ``STRAGGLER_WAIT_SHARE`` of the job's wait, at least
``STRAGGLER_IMBALANCE`` times the wait any other rank caused, and that wait is at least
``STRAGGLER_MIN_SHARE`` of the median rank's profiled window per other rank. Thresholds
are ours: a rank that is last half the time by chance in a balanced job causes about its
share of a small wait; and identical processes on one lent host ran up to 1.6x apart in
speed (README, "Timing you can trust on a noisy host": eager's process medians 1.33-2.93
ms, reports/h100/repeats), so two ranks whose caused waits are within 2x of each other
(784 and 866 ms: 1.1x) waited for each other in turn, and neither is named. Without a
straggler, :func:`no_straggler_because` says which rule failed, with the figures.
HolisticTraceAnalysis' ``get_potential_stragglers`` ranks ranks by the late start of
their communication kernels in the same spirit (hta/analyzers/straggler.py), with no
noise threshold: it names its top k ranks whatever the spread.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

STRAGGLER_WAIT_SHARE = 0.5
STRAGGLER_MIN_SHARE = 0.05
STRAGGLER_IMBALANCE = 2.0
# Clocks of different ranks' traces, and CUPTI's GPU times converted to the host clock,
# disagree by microseconds; a call ending this much before the last arrival is no match.
MATCH_SLACK_US = 100.0
MATCH_COLUMNS = ["process_group", "collective", "seq", "ordinal", "ranks", "message_bytes", "consistent",
                 "first_arrival", "last_arrival", "skew_us", "last_rank", "wait_caused_us", "iteration"]
# Why no rank is the straggler (no_straggler_because): no rank waited; the top two caused wait within
# STRAGGLER_IMBALANCE of each other; the top's under STRAGGLER_WAIT_SHARE of the job's wait; or under
# STRAGGLER_MIN_SHARE of the window per other rank.
NO_WAIT, IN_TURNS, SMALL_SHARE, SHORT = "no wait", "in turns", "small share", "short"
STRAGGLER_COLUMNS = ["rank", "calls", "times_last", "last_share", "wait_caused_us", "mean_lateness_us",
                     "rank_wait_us", "straggler"]


def _shift(ref: pd.DataFrame, other: pd.DataFrame) -> int:
    """How far ``other``'s calls (ts, end in order) are numbered from ``ref``'s: the shift s that
    pairs other's i-th call with ref's (i + s)-th in the most consistent pairs (neither ended more
    than ``MATCH_SLACK_US`` before the other arrived), then with the least total difference of their
    ends (a collective completes on its ranks together), then the smallest |s|."""
    a_ts, a_end = ref["ts"].to_numpy(float), ref["end"].to_numpy(float)
    b_ts, b_end = other["ts"].to_numpy(float), other["end"].to_numpy(float)
    best, pick = None, 0
    for s in range(-(len(b_ts) - 1), len(a_ts)):
        i = np.arange(max(0, -s), min(len(b_ts), len(a_ts) - s))
        ok = (a_end[i + s] >= b_ts[i] - MATCH_SLACK_US) & (b_end[i] >= a_ts[i + s] - MATCH_SLACK_US)
        score = (-int(ok.sum()), float(np.abs(a_end[i + s] - b_end[i])[ok].sum()), abs(s))
        if best is None or score < best:
            best, pick = score, s
    return pick


def _ordinals(c: pd.DataFrame) -> pd.Series:
    """The order of each call within its rank, group and collective, each rank's numbering shifted
    to line up with the lowest rank's (:func:`_shift`): a window that starts or ends at another
    call on each rank (a trace cut on each rank at its own time) does not misalign the rest."""
    ordinal = c.groupby(["rank", "process_group", "collective"]).cumcount()
    for _, grp in c.groupby(["process_group", "collective"], sort=False):
        ranks = sorted(grp["rank"].unique())
        ref = grp[grp["rank"] == ranks[0]]
        for r in ranks[1:]:
            mine = grp[grp["rank"] == r]
            ordinal[mine.index] += _shift(ref, mine)
        ordinal[grp.index] -= min(0, int(ordinal[grp.index].min()))   # numbered from 0
    return ordinal


def _keys(calls: pd.DataFrame) -> pd.DataFrame:
    """``calls`` with ordinal (order within rank, group and collective, lined up across ranks:
    :func:`_ordinals`; -1 where seq is known) and key (the call's identity across ranks)."""
    c = calls.sort_values(["rank", "ts"], kind="stable").copy()
    has_seq = c["seq"].notna()
    c["ordinal"] = _ordinals(c[~has_seq]).reindex(c.index).fillna(-1).astype(np.int64) if (~has_seq).any() else -1
    c["key"] = np.where(has_seq, c["process_group"] + "|seq " + c["seq"].astype(str),
                        c["process_group"] + "|" + c["collective"] + " #" + c["ordinal"].astype(str))
    return c


def match(calls: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Match the collective calls of a job's ranks.

    Args:
        calls: the calls of every rank (:func:`tracekit.analysis.distributed.collectives.calls`
            plus ``rank`` and ``call``, the row within its rank's table).

    Returns:
        (per_call, matched). per_call: ``calls`` plus ordinal, key, counted (matched on
        two ranks or more, consistently), last_arrival (µs, of the call's key across
        ranks), wait_us (this rank's wait for the last) and
        last (bool: it arrived last); calls seen on one rank only, or matched
        inconsistently, get wait 0. matched: one row per call found on at least two
        ranks: process_group, collective, seq, ordinal, ranks, message_bytes (median over
        ranks), consistent (see the module docstring), first_arrival, last_arrival,
        skew_us, last_rank, wait_caused_us (0 when inconsistent), iteration (the last
        rank's).
    """
    c = _keys(calls)
    # A call of several kernels (grouped point-to-point) arrives with its first and ends with its last.
    g = c.groupby(["rank", "key"])
    per_key = c.assign(arrival=g["ts"].transform("min"), finish=g["end"].transform("max")).drop_duplicates(
        ["rank", "key"])
    k = per_key.groupby("key")
    keys = pd.DataFrame({"ranks": k["rank"].nunique(), "first_arrival": k["arrival"].min(),
                         "last_arrival": k["arrival"].max(), "first_end": k["finish"].min(),
                         "message_bytes": k["message_bytes"].median(), "sizes": k["message_bytes"].nunique()})
    keys["consistent"] = (keys["first_end"] >= keys["last_arrival"] - MATCH_SLACK_US) & (keys["sizes"] <= 1)
    counted = c["key"].map(keys["consistent"] & (keys["ranks"] > 1)).astype(bool)
    c["counted"] = counted
    c["last_arrival"] = c["key"].map(keys["last_arrival"])
    c["wait_us"] = np.clip(c["last_arrival"] - c["ts"], 0, c["dur_us"]).where(counted, 0.0)
    last = per_key[per_key["key"].map(keys["ranks"]) > 1].sort_values(["key", "arrival", "rank"]).drop_duplicates(
        "key", keep="last").set_index("key")
    c["last"] = counted & (c["rank"] == c["key"].map(last["rank"]))
    m = keys.loc[last.index].join(last[["process_group", "collective", "seq", "ordinal", "rank", "iteration"]])
    m["skew_us"] = m["last_arrival"] - m["first_arrival"]
    m["wait_caused_us"] = c.groupby("key")["wait_us"].sum().reindex(m.index)   # (on an empty m, no rows added)
    matched = m.rename(columns={"rank": "last_rank"}).sort_values("last_arrival").reset_index(drop=True)
    return c, matched[MATCH_COLUMNS]


def rank_wait_idle(per_call: pd.DataFrame, pieces: pd.DataFrame) -> pd.DataFrame:
    """GPU idle time while a rank waited in a collective for a later rank.

    Args:
        per_call: :func:`match`'s first table (rank, call, ts, wait_us).
        pieces: idle pieces inside calls (:func:`tracekit.analysis.distributed.collectives.idle_in_calls`
            plus ``rank``).

    Returns:
        One row per (rank, cause): idle_us, the part of that cause's idle pieces that
        lies in [arrival, arrival + wait_us) of its call.
    """
    if pieces.empty:
        return pd.DataFrame(columns=["rank", "cause", "idle_us"])
    w = per_call[["rank", "call", "ts", "wait_us"]]
    p = pieces.merge(w, on=["rank", "call"], how="inner")
    length = np.minimum(p["end"], p["ts"] + p["wait_us"]) - np.maximum(p["start"], p["ts"])
    p = p.assign(idle_us=length.clip(lower=0))
    return p.groupby(["rank", "cause"], as_index=False)["idle_us"].sum()


def stragglers(per_call: pd.DataFrame, matched: pd.DataFrame, window_us: float) -> pd.DataFrame:
    """Per rank: how often it arrived last and the wait it caused; the straggler flagged.

    Args:
        per_call: :func:`match`'s first table.
        matched: :func:`match`'s second table.
        window_us: the median rank's profiled window (µs), for ``STRAGGLER_MIN_SHARE``.

    Returns:
        rank, calls (consistently matched calls it took part in), times_last, last_share,
        wait_caused_us, mean_lateness_us (arrival minus the median arrival of each call,
        averaged), rank_wait_us (the time it waited for others), straggler (bool; at most
        one rank, see the module docstring); sorted by wait caused, largest first.
    """
    shared = per_call[per_call["counted"]].drop_duplicates(["rank", "key"])
    lateness = shared["ts"] - shared.groupby("key")["ts"].transform("median")
    counted = matched[matched["consistent"]]
    out = pd.DataFrame({"calls": shared.groupby("rank").size(),
                        "times_last": counted.groupby("last_rank").size(),
                        "wait_caused_us": counted.groupby("last_rank")["wait_caused_us"].sum(),
                        "mean_lateness_us": lateness.groupby(shared["rank"]).mean(),
                        "rank_wait_us": per_call.groupby("rank")["wait_us"].sum()})
    out = out.fillna({"calls": 0, "times_last": 0, "wait_caused_us": 0.0, "rank_wait_us": 0.0})
    out.index.name = "rank"
    out = out.reset_index().astype({"calls": np.int64, "times_last": np.int64})
    out["last_share"] = out["times_last"] / out["calls"].where(out["calls"] > 0)
    out = out.sort_values(["wait_caused_us", "rank"], ascending=[False, True]).reset_index(drop=True)
    flagged = no_straggler_because(out, window_us) is None
    out["straggler"] = [flagged and i == 0 for i in range(len(out))]
    return out[STRAGGLER_COLUMNS]


def no_straggler_because(table: pd.DataFrame, window_us: float) -> dict | None:
    """Why no rank is the straggler (None when the top rank is one): the rule it fails, a reason
    (``code``: ``NO_WAIT``, ``IN_TURNS``, ``SMALL_SHARE`` or ``SHORT``) with the figures of the two
    ranks that caused most wait (``ranks``, ``caused_us``) and the rule's own (``share`` of the job's
    wait; ``window_share``: of the profiled window per other rank).

    Args:
        table: :func:`stragglers`' table (rank, wait_caused_us; sorted by wait caused,
            largest first).
        window_us: the median rank's profiled window (µs).
    """
    waits = table["wait_caused_us"].to_numpy(dtype=float)
    total = float(waits.sum()) if len(waits) else 0.0
    if len(waits) < 2 or total <= 0:
        return {"code": NO_WAIT}
    top, second = waits[0], waits[1]
    ranks = table["rank"].to_numpy()
    figures = {"ranks": (int(ranks[0]), int(ranks[1])), "caused_us": (float(top), float(second))}
    if top < STRAGGLER_IMBALANCE * second:
        return {"code": IN_TURNS, **figures}
    if top < STRAGGLER_WAIT_SHARE * total:
        return {"code": SMALL_SHARE, **figures, "share": top / total}
    if top / (len(waits) - 1) < STRAGGLER_MIN_SHARE * window_us:
        return {"code": SHORT, **figures, "window_share": top / (len(waits) - 1) / window_us}
    return None

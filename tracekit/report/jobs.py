"""What the reports show of distributed jobs: the job, rank and straggler tables, and a
few sentences per job, from the tables of :mod:`tracekit.analysis.job`."""

from __future__ import annotations

import pandas as pd

from tracekit.analysis.runs import Analysis

JOBS = [
    ("job", "job", "{}"),
    ("ranks", "ranks", "{:.0f}"),
    ("backend", "backend", "{}"),
    ("verdict", "verdict", "{}"),
    ("comm_comp_overlap_median", "comm-comp overlap p50", "{:.0%}"),
    ("collectives_matched", "collectives matched", "{:.0f}"),
    ("straggler", "straggler", "{:.0f}"),
    ("straggler_wait_caused_us", "wait it caused (ms)", "ms3"),
    ("overlap_could_save_us_per_iter", "overlap could save (ms/iter)", "ms3"),
    ("balance_could_save_us_per_iter", "balancing could save (ms/iter)", "ms3"),
    ("cuda_graphs_could_save_us_per_iter", "CUDA graphs could save (ms/iter)", "ms3"),
]

BALANCE = [
    ("job", "job", "{}"),
    ("metric", "per rank", "{}"),
    ("median_us", "median (ms)", "ms3"),
    ("max_us", "max (ms)", "ms3"),
    ("imbalance", "max/median", "{:.2f}"),
]

RANKS = [
    ("job", "job", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("verdict", "verdict", "{}"),
    ("window_us", "window (ms)", "ms"),
    ("active_span_us", "GPU span (ms)", "ms"),
    ("gpu_busy_us", "GPU busy (ms)", "ms"),
    ("computation_us", "compute (ms)", "ms"),
    ("communication_us", "comm (ms)", "ms"),
    ("comm_comp_overlap", "overlap", "{:.0%}"),
    ("exposed_communication_us", "exposed comm (ms)", "ms"),
    ("rank_wait_us", "waited for ranks (ms)", "ms"),
    ("idle_host_wait_us", "idle: host wait (ms)", "ms"),
    ("idle_rank_wait_us", "idle: rank wait (ms)", "ms"),
    ("collectives", "collectives", "{:.0f}"),
    ("overlap_could_save_us_per_iter", "overlap saves (ms/iter)", "ms3"),
    ("balance_could_save_us_per_iter", "balancing saves (ms/iter)", "ms3"),
    ("cuda_graphs_could_save_us_per_iter", "CUDA graphs save (ms/iter)", "ms3"),
]

STRAGGLERS = [
    ("job", "job", "{}"),
    ("rank", "rank", "{:.0f}"),
    ("calls", "calls", "{:.0f}"),
    ("times_last", "last", "{:.0f}"),
    ("last_share", "last share", "{:.0%}"),
    ("wait_caused_us", "wait caused (ms)", "ms3"),
    ("mean_lateness_us", "mean lateness (ms)", "ms3"),
    ("rank_wait_us", "waited for others (ms)", "ms3"),
    ("flag", "straggler", "{}"),
]


def job_tables(analysis: Analysis) -> list[tuple[str, pd.DataFrame, list]]:
    """(title, table, column spec) of each job table to show, in order; [] without jobs."""
    jobs = analysis.table("jobs")
    if jobs.empty:
        return []
    stragglers = analysis.table("stragglers")
    if len(stragglers):
        stragglers = stragglers.assign(flag=stragglers["straggler"].map({True: "yes", False: ""}))
    return [("Distributed jobs: verdict, straggler, what each remedy could save", jobs, JOBS),
            ("Ranks of each job: compute, communication and their overlap (HTA's definition), waits",
             analysis.table("ranks"), RANKS),
            ("Balance of each job over its ranks", analysis.table("job_balance"), BALANCE),
            ("Stragglers: who arrives last at the collectives, and the wait it causes", stragglers, STRAGGLERS)]


def _ms(us: float) -> str:
    return f"{us / 1e3:.3f} ms"


def job_lines(analysis: Analysis) -> list[str]:
    """A few sentences per job: its verdict, its straggler, inconsistent matches and remedies."""
    lines = []
    for r in analysis.table("jobs").to_dict("records"):
        text = f"{r['job']}: {r['ranks']} ranks ({r['backend'] or 'backend unknown'}), {r['verdict']} ({r['evidence']})"
        if r["straggler"] is not None and r["straggler"] == r["straggler"]:
            text += (f"; straggler rank {int(r['straggler'])}: last at {r['straggler_times_last']} of "
                     f"{r['collectives_matched'] - r['collectives_inconsistent']} collectives, the others waited "
                     f"{_ms(r['straggler_wait_caused_us'])} for it")
        else:
            text += "; no straggler"
        if r["collectives_inconsistent"]:
            text += (f"; {r['collectives_inconsistent']} of {r['collectives_matched']} collectives matched across "
                     "ranks are impossible as matches (a rank finished before another arrived, or sizes differ) "
                     "and count for no wait")
        lines.append(text)
    return lines

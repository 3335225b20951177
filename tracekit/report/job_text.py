"""The words of distributed jobs (:mod:`tracekit.analysis.distributed.job`): a rank's or a job's
evidence, why no rank is the straggler, the job in a sentence (its ``finding``), or why traces are
not analyzed as one job. :func:`worded_jobs` puts them in the ``jobs`` and ``ranks`` tables (for
:func:`tracekit.report.worded.worded`), each in place of the figures it is made of."""

from __future__ import annotations

import math

import pandas as pd

from tracekit.analysis.distributed.job import CLAIMED_TWICE, FAILED
from tracekit.analysis.distributed.step_noise import WITHIN_NOISE
from tracekit.analysis.distributed.stragglers import (IN_TURNS, NO_WAIT, SMALL_SHARE, STRAGGLER_IMBALANCE,
                                                      STRAGGLER_MIN_SHARE, STRAGGLER_WAIT_SHARE)
from tracekit.report.path_text import path_notes

# What a straggler within the noise changes in the step: the jobs row's figure it was judged by.
EFFECTS = {"balance_could_save_ms": "what balancing it saves",
           "straggler_excess_ms": "its work beyond the other ranks'"}


def evidence_text(evidence: tuple | None) -> str:
    """``compute 61%, communication 3%, launch 20% of the profiled window`` (``evidence``: (verdict,
    share) of each part the verdict weighs); "" without a window."""
    if evidence is None:
        return ""
    return ", ".join(f"{verdict.split('-')[0]} {share:.0%}" for verdict, share in evidence) + " of the profiled window"


def no_straggler_text(why: dict | None) -> str:
    """Why no rank is the straggler, with the figures ("" where one is:
    :func:`tracekit.analysis.distributed.stragglers.no_straggler_because`,
    :func:`tracekit.analysis.distributed.step_noise.beyond_noise`)."""
    if why is None:
        return ""
    if why["code"] == NO_WAIT:
        return "no rank waited for another"
    if why["code"] == WITHIN_NOISE:
        return (f"rank {why['rank']} caused most of the waiting, but {EFFECTS[why['effect']]} is "
                f"{why['effect_ms']:.3f} ms a step, within the run's noise of {why['noise_ms']:.3f} ms (p10-p90 of "
                "the job's step times)")
    (first, second), (top, next_) = why["ranks"], why["caused_us"]
    figures = f"rank {first} caused {top / 1e3:.3f} ms of wait, rank {second} {next_ / 1e3:.3f} ms"
    if why["code"] == IN_TURNS:
        return (f"{figures}: {top / next_:.2f}x, within the {STRAGGLER_IMBALANCE:g}x of noise between ranks "
                "(they waited for each other in turn)")
    if why["code"] == SMALL_SHARE:
        return f"{figures}: {why['share']:.0%} of the job's wait, under {STRAGGLER_WAIT_SHARE:.0%}"
    return (f"{figures}: {why['window_share']:.1%} of the profiled window per other rank, "
            f"under {STRAGGLER_MIN_SHARE:.0%}")


def finding_text(f: dict) -> str:
    """A ``jobs`` row's finding in a sentence: the job's ranks, verdict, straggler, impossible
    matches (``ONE_JOB``: its figures); or why its traces are not analyzed as one job (several
    claim a rank), or that the job analysis failed (its reason)."""
    if f["code"] == CLAIMED_TWICE:
        return (f"{f['job']}: not analyzed as one job: several traces claim rank {', '.join(map(str, f['claimed']))} "
                "(traces of several runs in one folder?)")
    if f["code"] == FAILED:
        return f"distributed jobs: {f['reason']}"
    text = (f"{f['job']}: {f['ranks']} ranks ({f['backend'] or 'backend unknown'}), {f['verdict']} "
            f"({evidence_text(f['evidence'])})")
    if f["ranks_missing"]:
        text += f"; lacks rank {f['ranks_missing']} of {f['world_size']}"
    if f["straggler"] is not None:
        text += (f"; straggler rank {f['straggler']}: last at {f['straggler_times_last']} of "
                 f"{f['collectives_matched'] - f['collectives_inconsistent']} collectives, the others waited "
                 f"{f['straggler_wait_caused_us'] / 1e3:.3f} ms for it in the profiled window")
        if math.isfinite(f["balance_could_save_ms"]):
            text += f"; balancing could save {f['balance_could_save_ms']:.3f} ms a step (predicted)"
        if not math.isfinite(f["noise_ms"]):
            text += " (no unprofiled timing: its effect on the step time is unknown)"
    else:
        text += f"; no straggler ({no_straggler_text(f['no_straggler_because'])})"
    if f["collectives_inconsistent"]:
        text += (f"; {f['collectives_inconsistent']} of {f['collectives_matched']} collectives matched across "
                 "ranks are impossible as matches (a rank finished before another arrived, or sizes differ) and "
                 "count for no wait")
    return text


def _each(values: pd.Series, text) -> list:
    """``text`` of each value of a column of the analysis' figures, a value from no row of theirs
    (NaN: a row of traces that are no job) as it is."""
    return [v if isinstance(v, float) else text(v) for v in values]


def worded_jobs(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``tables`` with the texts of the ranks' evidence, and of the jobs' evidence,
    no_straggler_because, cp_note (:func:`tracekit.report.path_text.path_notes`) and finding."""
    out = dict(tables)
    if "evidence" in (ranks := tables.get("ranks", pd.DataFrame())):
        out["ranks"] = ranks.assign(evidence=_each(ranks["evidence"], evidence_text))
    jobs = tables.get("jobs", pd.DataFrame())
    texts = {"evidence": evidence_text, "no_straggler_because": no_straggler_text, "cp_note": path_notes,
             "finding": finding_text}
    if len(jobs) and isinstance(jobs["finding"].iloc[0], dict):
        out["jobs"] = jobs.assign(**{col: _each(jobs[col], text) for col, text in texts.items() if col in jobs})
    return out

"""The lines a report says about each run, written from the run table's columns (``Analysis.runs``,
:mod:`tracekit.analysis.runs`) and its tables: ``run: text`` per run (``run (rank N): text`` for a
rank of a job) for its integrity, its verdict's evidence, its notes and its critical path; and the
lines on runs whose two timers are apart. The terminal, ``summary.md``, ``index.html`` and a
suite's ``report.md`` show them."""

from __future__ import annotations

import pandas as pd

from tracekit.analysis.comparison.trust import GPU_TAIL, TIMER_DISAGREEMENT, UNEXPLAINED, numeric
from tracekit.analysis.distributed.job import labelled
from tracekit.analysis.runs import Analysis
from tracekit.io import records


def integrity_lines(runs: pd.DataFrame) -> list[str]:
    """One line per analyzed trace of ``runs`` (the run table of :mod:`tracekit.analysis.runs`):
    ``run: integrity ok`` (``run (rank N): ...`` for a rank of a job), or its warnings / FAILED
    with the details (its ``integrity`` and ``integrity_detail``: every check is a row of the
    ``integrity`` table, :mod:`tracekit.analysis.metrics.integrity`); then, for a trace where an
    analysis raised, ``run: <analysis> failed: <reason>`` (its ``failed_analyses``: a bug in
    tracekit, the other figures stand)."""
    out = []
    for r in records(runs):
        status = r.get("integrity")
        if isinstance(status, str):
            detail = r.get("integrity_detail") or ""
            out.append(f"{labelled(r)}: integrity {status.upper() if status == 'failed' else status}"
                       + (f": {detail}" if detail else ""))
        if isinstance(failed := r.get("failed_analyses"), str) and failed:   # NaN: a run without a trace
            out.append(f"{labelled(r)}: {failed} (a bug in tracekit; the other figures stand)")
    return out


def evidence(runs: pd.DataFrame) -> list[str]:
    """One line per run with GPU activity: ``run: verdict: the figures behind it`` (``run
    (rank N): ...`` for a rank of a job)."""
    if "evidence" not in runs:
        return []
    return [f"{labelled(r)}: {r['verdict']}: {r['evidence']}" for r in records(runs)
            if isinstance(r.get("evidence"), str) and r.get("has_gpu")]


def notes(runs: pd.DataFrame) -> list[str]:
    """One line per run that has a note or a failure reason: ``run: text`` (``run (rank N):
    text`` for a rank of a job)."""
    out = []
    for r in records(runs):
        text = "; ".join(str(t) for t in (r.get("reason"), r.get("note")) if isinstance(t, str) and t)
        if text:
            out.append(f"{labelled(r)}: {text}")
    return out


def critical_path_notes(runs: pd.DataFrame) -> list[str]:
    """``run: note`` for each run whose critical path is uncalibrated, incomplete or missing."""
    if "critical_path_note" not in runs:
        return []
    return [f"{labelled(r)}: critical path: {r['critical_path_note']}" for r in records(runs)
            if isinstance(r.get("critical_path_note"), str) and r["critical_path_note"]]


def _clip(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


def critical_path_lines(analysis: Analysis, n: int = 3) -> list[str]:
    """One line per run with a critical path: what is on it most, by op, module and name
    (kernels by their short name): ``run: on the path most: op convolution 64%, ...``."""
    from tracekit.analysis.metrics.kernels import short_name

    t = analysis.table("critical_path_top")
    if t.empty:
        return []
    out = []
    for (run, trace), rows in t.groupby(["run", "trace"], sort=False):
        parts = []
        for by in ("op", "module", "name"):
            top = rows[(rows["by"] == by) & (rows["key"].astype(str) != "")].head(n)
            if len(top):
                keys = [_clip(short_name(k)) if by == "name" else k for k in top["key"].astype(str)]
                parts.append(f"{by if by != 'name' else 'kernel or call'} " + ", ".join(
                    f"{k} {share:.0%}" for k, share in zip(keys, top["share"])))
        if parts:
            out.append(f"{run}: on the critical path most: " + "; ".join(parts))
    return out


def timer_gap_lines(rows: pd.DataFrame) -> list[str]:
    """The report's lines on timers apart (rows: runs or comparison rows with ``run``,
    ``timer_gap`` and ``timer_agreement``: :func:`tracekit.analysis.comparison.trust.timer_gap`):
    one for the runs apart by the GPU tail, one for those apart for no known reason (named);
    none where no run is."""
    if "timer_gap" not in rows:
        return []
    runs = rows.drop_duplicates("run")
    out = []
    tail = runs[runs["timer_gap"] == GPU_TAIL]
    if len(tail):
        low, high = (f"{100 * v:.0f}" for v in (numeric(tail, "timer_agreement").agg(["min", "max"])))
        more = low if low == high else f"{low}-{high}"
        out.append(f"On {len(tail)} run{'s' if len(tail) > 1 else ''} the synchronised wall clock reads "
                   f"{more}% more than the per-call timer, no more than the GPU tail "
                   "each synchronised block waits for (the GPU work still queued when the host has enqueued the "
                   "block's last call: at most one iteration's GPU busy time, over the block's calls): a known "
                   "difference of the two timers, not a noisy host. Speedups use the per-call timer.")
    odd = runs[runs["timer_gap"] == UNEXPLAINED]
    if len(odd):
        out.append(f"On {len(odd)} run{'s' if len(odd) > 1 else ''} the two timers are more than "
                   f"{TIMER_DISAGREEMENT:.0%} apart for no known reason: " + ", ".join(
                       f"{r} ({a:+.0%})" for r, a in zip(odd["run"], numeric(odd, "timer_agreement"))) + ".")
    return out

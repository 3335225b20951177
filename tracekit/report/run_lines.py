"""What a report says about each run, written from the run table's columns (``Analysis.runs``,
:mod:`tracekit.analysis.runs`) and its tables: the texts of a run's row (its verdict's evidence, its
integrity checks, its notes, a busy host: :func:`tracekit.report.worded.worded` puts them in the
row); the lines ``run: text`` per run (``run (rank N): text`` for a rank of a job) for its
integrity, its verdict's evidence, its notes and its critical path; and the lines on runs whose
two timers are apart. The terminal, ``summary.md``, ``index.html`` and a suite's ``report.md``
show them."""

from __future__ import annotations

import math

import pandas as pd

from tracekit.analysis.comparison.trust import GPU_TAIL, TIMER_DISAGREEMENT, UNEXPLAINED, busy_host, numeric
from tracekit.analysis.metrics import verdict as rule
from tracekit.analysis.metrics.integrity import DROPPED_MAX_SHARE, LAUNCHLESS_MAX_SHARE
from tracekit.analysis.runs import Analysis
from tracekit.io import records

NO_GPU_NOTE = "no GPU activity in this trace (CPU ops only)"
ENABLE_GPU = ("torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) "
              "(ProfilerActivity.XPU / MTIA on those devices; Kineto needs CUPTI / roctracer)")
# What each figure of a verdict's evidence means, and the threshold it is held to (the verdict's:
# tracekit.analysis.metrics.verdict): the ``rule`` column of the verdict_evidence table.
EVIDENCE_RULES = {
    "host_wait_share": f">= {rule.LAUNCH_BOUND_HOST_WAIT:.0%} of the active span: launch-bound; "
                       f"< {rule.GPU_BOUND_HOST_WAIT:.0%} with utilization >= {rule.GPU_BOUND_UTILIZATION:.0%}: "
                       "gpu-bound",
    "utilization": f">= {rule.GPU_BOUND_UTILIZATION:.0%} with host wait < {rule.GPU_BOUND_HOST_WAIT:.0%}: gpu-bound",
    "feed_ratio": "GPU µs per launch / host µs between launches: < 1 the GPU drains each launch before the next "
                  "arrives, > 1 the host runs ahead (informs, not in the rule)",
    "mean_kernel_us": "the rate race: compare with launch_interval_us",
    "launch_interval_us": "host µs between launches, time blocked in syncs left out",
    "short_kernel_share": "share of kernels < 10 µs: shorter than launching them costs the host",
    "unprofiled_utilization": f">= {rule.GPU_BOUND_UTILIZATION:.0%}: gpu-bound whatever the profiled window says "
                              "(its host wait was the profiler's)",
    "cuda_graph_recoverable_us_per_iter": "host wait per profiled iteration: an uncalibrated bound on what a CUDA "
                                          "graph saves (the profiler stretches it; the calibrated prediction is the "
                                          "critical path's, cuda_graphs_saving_ms)",
}


def labelled(row: dict) -> str:
    """How a line of text names a run row: its run, with ``(rank N)`` for a ranked trace
    (the ranks of one job share a run name)."""
    rank = row.get("rank")
    return row["run"] + (f" (rank {int(rank)})" if rank is not None and rank == rank else "")


def host_problems(host_load: dict | None) -> list[str]:
    """A busy host at the start or the end of a run (:func:`tracekit.analysis.comparison.trust.busy_host`
    of ``host_load``'s "start" and "end" readings: run.json's), one sentence each."""
    out = []
    for when in ("start", "end"):
        load = (host_load or {}).get(when)
        if busy_host(load):
            out.append(f"host busy at the {when}: load {load['loadavg_1m']:.1f} on {load['cpus']:.0f} CPUs")
    return out


def timing_warning(row: dict) -> str:
    """A run row's busy host (:func:`host_problems` of its host_load_start, host_load_end, host_cpus
    and host_cpus_end), "; "-joined; "" where the host was not busy."""
    load = {"start": {"loadavg_1m": row.get("host_load_start"), "cpus": row.get("host_cpus")},
            "end": {"loadavg_1m": row.get("host_load_end"), "cpus": row.get("host_cpus_end")}}
    return "; ".join(host_problems({when: {k: v for k, v in r.items() if _known(v)} for when, r in load.items()}))


def _known(value) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def evidence_text(row: dict) -> str:
    """A run row's verdict in one line: the figures behind it (host wait, utilization, feed
    ratio, short kernels, and where run.json has the unprofiled latency, the GPU busy share of
    it), or why there is none (its ``verdict_reason``: :func:`tracekit.analysis.metrics.verdict.verdict`)."""
    reason = row.get("verdict_reason")
    if reason == rule.NO_GPU:
        return "the trace holds no GPU ops"
    if reason == rule.INTEGRITY_FAILED:
        return f"trace integrity failed: {row.get('integrity_detail') or ''}"
    if reason == rule.FEW_LAUNCHES:
        n = row["host_launches"]
        return f"{n:.0f} host launch{'' if n == 1 else 'es'}: no gap can show an op launched after the GPU went idle"
    if reason:
        return f"not judged: {reason}"
    util = row["utilization"] if row["active_span_us"] > 0 else 1.0
    short = row.get("short_kernel_share", math.nan)
    text = (f"host wait {row['host_wait_share']:.0%} of the GPU's active span, utilization {util:.0%}, "
            f"feed ratio {row.get('feed_ratio', math.nan):.2f} (GPU µs per launch / µs between launches), "
            + (f"{short:.0%} of kernels < 10 µs" if _known(short) else "no kernel (copies and sets only)"))
    unprofiled = row.get("unprofiled_utilization", math.nan)
    if _known(unprofiled):
        text += (f"; unprofiled: GPU busy {rule.busy_per_iteration(row) / 1e3:.2f} ms of a "
                 f"{row['latency_median_ms']:.2f} ms iteration ({unprofiled:.0%})")
        if row["verdict"] != row["verdict_profiled"]:
            text += " -- the host wait was the profiler's overhead"
    return text


def integrity_text(check: dict) -> str:
    """One check of a trace's ``integrity`` table (:func:`tracekit.analysis.metrics.integrity.checks`) in words."""
    name, n, total, what, failed = check["check"], check["count"], check["total"], check["what"], \
        check["status"] == "failed"
    if name == "events":
        return f"{n} {what}"
    if name == "events dropped":
        return (f"{n} of {total} events dropped: over {DROPPED_MAX_SHARE:.0%}, the figures do not describe the "
                "whole trace")
    if name == "correlation ids":
        return (f"{n} of {total} GPU ops have no correlation id: their launches are unknown"
                + (" (the trace's launches are unknown)" if failed else ""))
    if name == "launch calls":
        return (f"{n} of {total} GPU ops have no launch call in the trace (launched before the profiler started, "
                "or host calls not recorded): counted, attributed to no launch, the idle before them has no cause"
                + (f"; over {LAUNCHLESS_MAX_SHARE:.0%}: host wait is unmeasured" if failed else ""))
    if name == "GPU activity":
        return f"{n} launch calls but no GPU op: GPU activity was not recorded; profile with {ENABLE_GPU}"
    if name == "launches without GPU op":
        return (f"{n} of {total} kernel launch calls have no GPU op with their correlation id: their kernels are not "
                "in the trace (filtered out, or recorded under another category)"
                + (f"; over {LAUNCHLESS_MAX_SHARE:.0%}: the GPU's figures leave out most of its work"
                   if failed else ""))
    if name == "unknown device events":
        return (f"{n} device events (a device or stream arg) under categories Kineto does not write ({what}): GPU "
                "activity left out of every figure" + (f"; over {DROPPED_MAX_SHARE:.0%} of the device's events"
                                                        if failed else ""))
    if name == "0 µs GPU ops":
        return (f"{n} of {total} GPU ops are 0 µs long" + (": busy time and idle gaps say nothing" if failed else ""))
    if name == "timestamps":
        return (f"timestamps so large that float64 holds them only to {float(what):g} µs: shorter intervals are lost "
                "(were they shifted, or written in another unit?)")
    if name == "integrity":
        return f"the integrity checks failed ({what})"
    return str(what)


def integrity_detail(checks: pd.DataFrame) -> str:
    """A trace's integrity in one line: its failed checks' texts (:func:`integrity_text`), else
    its warnings', "; "-joined; "" where every check is ok."""
    for status in ("failed", "warning"):
        hit = checks[checks["status"] == status]
        if len(hit):
            return "; ".join(hit["detail"])
    return ""


def note(row: dict, checks: pd.DataFrame) -> str:
    """A run row's notes, "; "-joined: run.json's (its ``note``), then for a trace without GPU
    activity why (none recorded, or its failed integrity), then the damage the reader mended or
    dropped (the ``events`` checks of its ``checks``, with their ``detail``)."""
    parts = [row.get("note")]
    if isinstance(row.get("trace"), str) and row["trace"]:
        if pd.notna(row.get("has_gpu")) and not row["has_gpu"]:
            parts.append(row["integrity_detail"] if row.get("integrity") == "failed" else NO_GPU_NOTE)
        parts += [f"{d} (damaged trace)" for d in checks.loc[checks["check"] == "events", "detail"]]
    return "; ".join(p for p in parts if isinstance(p, str) and p)


def _status_line(label: str, status: str, detail: str) -> str:
    """``label: integrity ok``, ``label: integrity warning: detail`` or ``label: integrity FAILED: detail``."""
    return f"{label}: integrity {status.upper() if status == 'failed' else status}" + (f": {detail}" if detail else "")


def checks_lines(checks: pd.DataFrame, label=lambda trace, rows: trace, by="trace") -> list[str]:
    """One line per trace of an integrity table of several traces (``trace`` and the columns of
    :func:`tracekit.analysis.metrics.integrity.checks`, or their ``detail`` already worded): its status
    line (as :func:`integrity_lines` says a run's), ``label(key, its rows)`` naming it (default: the
    trace's path; ``by``: the column or columns that tell the traces apart, the key's)."""
    from tracekit.analysis.metrics.integrity import summary

    out = []
    for trace, rows in checks.groupby(by, sort=False):
        if "detail" not in rows:
            rows = rows.assign(detail=[integrity_text(c) for c in rows.to_dict("records")])
        out.append(_status_line(label(trace, rows), summary(rows)["integrity"], integrity_detail(rows)))
    return out


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
            out.append(_status_line(labelled(r), status, r.get("integrity_detail") or ""))
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

"""A prediction on the terminal (``tracekit whatif``; a :class:`Prediction` shown in Python):
the edits, the predicted iteration against the modelled one and how the model was calibrated,
the critical path before and after by part, notes and what the trace lacks. ``--json`` prints
:meth:`Prediction.to_dict` instead."""

from __future__ import annotations

from rich.console import Console

from tracekit.analysis.critical_path.path import PARTS
from tracekit.analysis.critical_path.prediction import Prediction
from tracekit.analysis.distributed.job import rank_ranges
from tracekit.report.base import Renderer, Report, register
from tracekit.report.decode_text import prediction_line
from tracekit.report.run_lines import checks_lines


def split_text(split: dict) -> str:
    """"cpu 2,610 µs (84%), launch 480 µs (15%), ..." for the parts over 0.5% of the iteration,
    the largest first (``split``: latency_us and ``<part>_us``, µs, as :meth:`Prediction.to_dict`
    gives the critical path); "-" for none."""
    total = split.get("latency_us") or 0.0
    parts = [(p, split.get(f"{p}_us", 0.0)) for p in PARTS]
    shown = [f"{p} {us:,.0f} µs ({us / total:.0%})" for p, us in sorted(parts, key=lambda pu: -pu[1])
             if total > 0 and us > 0.005 * total]
    return ", ".join(shown) or "-"


def _calibration_text(record: dict) -> str:
    """How the model was calibrated (a job's host factor per rank, or their range over more than 8
    ranks), or that it is an uncalibrated bound and why."""
    measured = record["measured_latency_ms"]
    if not record["calibrated"]:
        if measured is None:
            return ("UNCALIBRATED: no run.json with an unprofiled latency; the profiled window as it is (an upper "
                    "bound on host time)")
        return (f"UNCALIBRATED: the fit could not meet the unprofiled {measured:.3f} ms (note below); an "
                "uncalibrated bound")
    scales = record.get("host_scale_by_rank") or {}
    if not scales:
        return (f"calibrated to the unprofiled {measured:.3f} ms (host time x{record['host_scale']:.2f}, GPU time "
                f"x{record['gpu_scale']:.2f})")
    host = (", ".join(f"rank {r} x{f:.2f}" for r, f in scales.items()) if len(scales) <= 8
            else f"x{min(scales.values()):.2f}-{max(scales.values()):.2f} over {len(scales)} ranks")
    gpu = record["gpu_scale"]
    return f"calibrated to the unprofiled step {measured:.3f} ms (host time {host}, GPU time x{gpu:.2f})"


def _interval_text(record: dict) -> str:
    """" (0.050-0.056 ms)": the prediction's interval (:mod:`tracekit.analysis.critical_path.uncertainty`),
    "" where it has none; where the capture may run other kernels, the interval says it leaves them out
    (" (0.050-0.056 ms with eager's kernels)") and ", LOW CONFIDENCE (note below)" follows."""
    low, high = record.get("predicted_low_ms"), record.get("predicted_high_ms")
    kept = " with eager's kernels" if record.get("confidence") == "low" else ""
    shown = f" ({low:.3f}-{high:.3f} ms{kept})" if low is not None and high is not None else ""
    return shown + _low_confidence(record)


def _low_confidence(record: dict) -> str:
    """", LOW CONFIDENCE (note below)" where the capture may run other kernels, else ""."""
    return ", LOW CONFIDENCE (note below)" if record.get("confidence") == "low" else ""


def _job_lines(record: dict) -> list[str]:
    """A job's ranks, the ranks it lacks and what balancing took from each rank."""
    lines = []
    world = f" of {record['world_size']}" if record.get("world_size") else ""
    if record.get("ranks"):
        lines.append(f"  ranks {rank_ranges(record['ranks'])}{world}")
    if record.get("ranks_missing"):
        many = "s" if len(record["ranks_missing"]) > 1 else ""
        lines.append(f"  lacks rank{many} {rank_ranges(record['ranks_missing'])}{world}: predicted from the others, "
                     "whose collectives wait for no missing rank")
    for r in record.get("rank_excess", []):
        if r["host_excess_us"] or r["gpu_excess_us"]:
            lines.append(f"  balancing takes from rank {int(r['rank'])} {r['host_excess_us'] / 1e3:.3f} ms of host "
                         f"and {r['gpu_excess_us'] / 1e3:.3f} ms of GPU work per iteration")
    return lines


def _input_lines(prediction: Prediction) -> list[str]:
    """The integrity line of each trace read (``trace (rank N)`` for a job's), then a line per trace
    that could not be read."""
    job = prediction.is_job
    lines = [f"  {line}" for line in checks_lines(prediction.integrity, lambda trace, rows: trace + (
        f" (rank {int(rows['rank'].iloc[0])})" if job else ""))] if len(prediction.integrity) else []
    return lines + [f"  unreadable: {p}: {problem}" for p, problem, _ in prediction.unreadable]


def prediction_text(prediction: Prediction) -> str:
    """A few lines: ``path: edits``, a job's ranks (those it lacks, what balancing takes from each),
    the predicted iteration (ms; a decode run's per token, with its tokens/s:
    :func:`tracekit.report.decode_text.prediction_line`) from the modelled one and how it was calibrated
    (or UNCALIBRATED, an uncalibrated bound), the run's twin measured beside it where the edits make it
    (:attr:`Prediction.twin`), the critical path before and after (:func:`split_text`), then
    a line per note and per thing missing, and last each trace's integrity and those that could not be read; or ``path:
    cannot predict: why`` or ``path: cannot model the trace: why`` (and the ranks a job lacks, the
    traces' integrity). The figures are those of :meth:`Prediction.to_dict` (rounded as ``--json``
    prints them)."""
    record = prediction.to_dict()
    if prediction.cannot_predict or prediction.failure:
        head = (f"cannot predict: {prediction.cannot_predict}" if prediction.cannot_predict else
                f"cannot model the trace: {prediction.failure}")
        return "\n".join([f"{record['path']}: {head}", *_job_lines(record), *_input_lines(prediction)])
    lines = [f"{record['path']}: {', '.join(record['edits'])}", *_job_lines(record)]
    if tokens := record.get("tokens_per_step"):   # a decode run: an iteration is a decode step
        low, high = record.get("predicted_low_ms"), record.get("predicted_high_ms")
        predicted = prediction_line(record["predicted_latency_ms"], record["predicted_tokens_per_s"], tokens,
                                    (low, high) if low is not None and high is not None else None)
        lines.append(f"  {predicted}{_low_confidence(record)}, from {record['modelled_latency_ms']:.3f} ms per "
                     f"token modelled ({_calibration_text(record)})")
    else:
        lines.append(f"  predicted iteration {record['predicted_latency_ms']:.3f} ms{_interval_text(record)}, from "
                     f"{record['modelled_latency_ms']:.3f} ms modelled ({_calibration_text(record)})")
    if twin := record.get("twin"):
        error = f" (the prediction {twin['error']:+.1%})" if twin.get("error") is not None else ""
        lines.append(f"  measured in the same process (its twin: {twin['what']}): {twin['latency_ms']:.3f} ms{error}")
    step = " (per token)" if tokens else ""
    lines.append(f"  critical path before{step}: {split_text(record['critical_path_before'])}")
    lines.append(f"  critical path after{step}:  {split_text(record['critical_path_after'])}")
    lines += [f"  note: {n}" for n in record["notes"]] + [f"  missing: {m}" for m in record["missing"]]
    return "\n".join(lines + _input_lines(prediction))


@register
class WhatIfText(Renderer):
    name = "whatif"
    takes = Prediction

    def show(self, report: Report, console: Console) -> None:
        """:func:`prediction_text`, as it is (no wrapping, no markup)."""
        for line in prediction_text(report.data).splitlines():
            console.out(line, highlight=False)

"""A prediction on the terminal (``tracekit whatif``; a :class:`Prediction` shown in Python):
the edits, the predicted iteration against the modelled one and how the model was calibrated,
the critical path before and after by part, notes and what the trace lacks. ``--json`` prints
:meth:`Prediction.to_dict` instead."""

from __future__ import annotations

from rich.console import Console

from tracekit.analysis.critical_path.path import PARTS
from tracekit.analysis.critical_path.predict import Prediction
from tracekit.report.base import Renderer, Report, register


def split_text(split: dict) -> str:
    """"cpu 2,610 µs (84%), launch 480 µs (15%), ..." for the parts over 0.5% of the iteration,
    the largest first (``split``: latency_us and ``<part>_us``, µs, as :meth:`Prediction.to_dict`
    gives the critical path); "-" for none."""
    total = split.get("latency_us") or 0.0
    parts = [(p, split.get(f"{p}_us", 0.0)) for p in PARTS]
    shown = [f"{p} {us:,.0f} µs ({us / total:.0%})" for p, us in sorted(parts, key=lambda pu: -pu[1])
             if total > 0 and us > 0.005 * total]
    return ", ".join(shown) or "-"


def prediction_text(prediction: Prediction) -> str:
    """A few lines: ``path: edits``, the predicted iteration (ms) from the modelled one and how it
    was calibrated (or UNCALIBRATED), the critical path before and after (:func:`split_text`), then
    a line per note and per thing missing; or one line, ``path: cannot predict: why``. The figures
    are those of :meth:`Prediction.to_dict` (rounded as ``--json`` prints them)."""
    record = prediction.to_dict()
    if prediction.cannot_predict:
        return f"{record['path']}: cannot predict: {record['cannot_predict']}"
    lines = [f"{record['path']}: {', '.join(record['edits'])}"]
    measured = record["measured_latency_ms"]
    how = (f"calibrated to the unprofiled {measured:.3f} ms (host time x{record['host_scale']:.2f}, "
           f"GPU time x{record['gpu_scale']:.2f})" if record["calibrated"]
           else "UNCALIBRATED: no run.json with an unprofiled latency; the profiled window as it is (an upper bound "
                "on host time)")
    lines.append(f"  predicted iteration {record['predicted_latency_ms']:.3f} ms, from "
                 f"{record['modelled_latency_ms']:.3f} ms modelled ({how})")
    lines.append(f"  critical path before: {split_text(record['critical_path_before'])}")
    lines.append(f"  critical path after:  {split_text(record['critical_path_after'])}")
    lines += [f"  note: {n}" for n in record["notes"]] + [f"  missing: {m}" for m in record["missing"]]
    return "\n".join(lines)


@register
class WhatIfText(Renderer):
    name = "whatif"
    takes = Prediction

    def show(self, report: Report, console: Console) -> None:
        """:func:`prediction_text`, as it is (no wrapping, no markup)."""
        for line in prediction_text(report.data).splitlines():
            console.out(line, highlight=False)

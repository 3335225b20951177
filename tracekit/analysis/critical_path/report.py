"""A prediction as a record (``tracekit whatif --json``) and as text."""

from __future__ import annotations

import math

from tracekit.analysis.critical_path.path import PARTS


def _ms(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 4)


def prediction_record(result, path: str) -> dict:
    """The JSON object of a :class:`~tracekit.analysis.critical_path.predict.WhatIf`: path,
    edits, predicted_latency_ms, measured_latency_ms (the unprofiled eager median, None when
    unknown), modelled_latency_ms (the calibrated model before the edits), calibrated,
    host_scale, gpu_scale, critical_path_before and critical_path_after (µs per iteration
    of each part: :data:`~tracekit.analysis.critical_path.path.PARTS`, and latency_us),
    notes (what limits the prediction), missing (what the trace lacks)."""
    cal = result.calibration
    return {"path": str(path), "edits": result.edits, "predicted_latency_ms": _ms(result.predicted_ms),
            "measured_latency_ms": _ms(cal.measured_ms), "modelled_latency_ms": _ms(result.modelled_ms),
            "calibrated": cal.calibrated, "host_scale": round(cal.host_scale, 4), "gpu_scale": round(cal.gpu_scale, 4),
            "critical_path_before": _rounded(result.split_per_iteration("before")),
            "critical_path_after": _rounded(result.split_per_iteration("after")),
            "notes": result.notes + result.before.problems, "missing": result.before.missing}


def _rounded(split: dict) -> dict:
    return {k: round(v, 2) for k, v in split.items()}


def split_text(split: dict) -> str:
    """"cpu 2,610 µs (84%), launch 480 µs (15%), ..." for the parts over 0.5% of the iteration."""
    total = split.get("latency_us") or 0.0
    parts = [(p, split.get(f"{p}_us", 0.0)) for p in PARTS]
    shown = [f"{p} {us:,.0f} µs ({us / total:.0%})" for p, us in sorted(parts, key=lambda pu: -pu[1])
             if total > 0 and us > 0.005 * total]
    return ", ".join(shown) or "-"


def prediction_text(record: dict) -> str:
    """A few lines for the terminal."""
    lines = [f"{record['path']}: {', '.join(record['edits'])}"]
    measured = record["measured_latency_ms"]
    how = (f"calibrated to the unprofiled {measured:.3f} ms (host time x{record['host_scale']:.2f}, "
           f"GPU time x{record['gpu_scale']:.2f})" if record["calibrated"]
           else "UNCALIBRATED: no run.json with an unprofiled latency; the profiled window as it is (an upper bound "
                "on host time)")
    lines.append(f"  predicted iteration {record['predicted_latency_ms']:.3f} ms, from {record['modelled_latency_ms']:.3f} ms "
                 f"modelled ({how})")
    lines.append(f"  critical path before: {split_text(record['critical_path_before'])}")
    lines.append(f"  critical path after:  {split_text(record['critical_path_after'])}")
    lines += [f"  note: {n}" for n in record["notes"]] + [f"  missing: {m}" for m in record["missing"]]
    return "\n".join(lines)

"""A run as ``tracekit trace`` prints it when it ends (from its manifest, ``run.json``): its
status and latency (the per-call timer's median, the synchronised wall clock's, the spread of
``--repeats`` processes, the first call; its twin's), a warning per timing doubt (:func:`timing_problems`),
or the reason it did not run; then its note."""

from __future__ import annotations

import math

from rich.console import Console

from tracekit.analysis.comparison.trust import TIMER_DISAGREEMENT
from tracekit.manifest import Manifest
from tracekit.report.base import Renderer, Report, register
from tracekit.report.decode_text import status_line
from tracekit.report.run_lines import host_problems


def timing_problems(latency_median_ms: float, wall_median_ms: float, timer: str | None,
                    host_load: dict | None) -> list[str]:
    """What makes a run's timing doubtful, one sentence each: the two timers' medians (ms) more
    than ``TIMER_DISAGREEMENT`` apart (issue 17), then a busy host at the start or the end
    (:func:`tracekit.report.run_lines.host_problems` of ``host_load``, run.json's
    readings). NaN or None figures are not judged."""
    out = []
    if all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (latency_median_ms, wall_median_ms)):
        gap = wall_median_ms / latency_median_ms - 1   # run.json's timer_agreement (timers.agreement)
        if abs(gap) > TIMER_DISAGREEMENT:
            out.append(f"timers disagree: {timer or 'latency'} median {latency_median_ms:.3f} ms, synchronised "
                       f"wall clock {wall_median_ms:.3f} ms ({gap:+.0%}, over {TIMER_DISAGREEMENT:.0%})")
    return out + host_problems(host_load)


def run_status_lines(manifest: Manifest) -> list[str]:
    """``<label>/<mode>: ok, latency p50 0.044 ms (synchronised wall clock 0.045 ms), first call
    0.00 s`` (with ``, median of N processes (spread S%)`` for ``--repeats``), a decode run's figures
    per token (:func:`tracekit.report.decode_text.status_line`), its twin's where it timed one
    (:mod:`tracekit.capture.twins`) and a ``warning:`` line per timing doubt;
    or ``<label>/<mode>: <status>: <reason>`` (its first 500 characters);
    then ``note: <note>`` where the run has one."""
    run = f"{manifest.label}/{manifest.mode}"
    if manifest.status == "ok":
        wall = manifest.wall_ms.median if manifest.wall_ms and manifest.wall_ms.median is not None else float("nan")
        repeats = manifest.repeats
        spread = f", median of {repeats.n} processes (spread {repeats.spread:.0%})" \
            if repeats and repeats.spread is not None else ""
        lines = [f"{run}: ok, latency p50 {manifest.latency('median'):.3f} ms (synchronised wall clock {wall:.3f} ms)"
                 f"{spread}, first call {manifest.compile_s:.2f} s"]
        if decode := status_line(manifest.decode.to_dict() if manifest.decode else {}):
            lines.append(decode)
        if (twin := manifest.twin) and twin.latency_ms and twin.source_latency_ms:
            lines.append(f"its twin, timed in the same process ({'; '.join(twin.names or [])}): p50 "
                         f"{twin.latency_ms.median:.3f} ms, this run's {twin.source_latency_ms.median:.3f} ms in the "
                         "same rounds")
        lines += [f"warning: {problem}" for problem in timing_problems(
            manifest.latency("median"), wall, manifest.latency_ms.timer,
            manifest.host_load.to_dict() if manifest.host_load else None)]
    else:
        lines = [f"{run}: {manifest.status}: {manifest.reason[:500]}"]
    return lines + ([f"note: {manifest.note}"] if manifest.note else [])


@register
class RunStatus(Renderer):
    name = "run status"
    takes = Manifest

    def show(self, report: Report, console: Console) -> None:
        """:func:`run_status_lines`, as they are (no wrapping, no markup)."""
        for line in run_status_lines(report.data):
            console.out(line, highlight=False)

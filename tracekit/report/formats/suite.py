"""The suite report format: a suite's ``report.md``, what ran where, the results, speedups
ranked, decode runs per token, idle time by cause, achieved rates, claims checked, "what the traces show" and the
cells without a result, from :class:`tracekit.analysis.comparison.suite_comparison.SuiteTables`."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from tracekit.analysis.comparison.suite_comparison import SuiteTables
from tracekit.io import write_atomic
from tracekit.manifest import Manifest
from tracekit.report.base import Renderer, Report, register
from tracekit.report.column_specs import IDLE, TIMING
from tracekit.report.decode_text import DECODE_TEXT
from tracekit.report.draw import headline, markdown_table
from tracekit.report.findings import suite_findings
from tracekit.report.run_lines import timer_gap_lines
from tracekit.report.views import decode_view, timing_view

RESULTS = [
    ("run", "run", "{}"), ("status", "status", "{}"), ("latency_median_ms", "latency p50 (ms)", "{:.3f}"),
    ("speedup_text", "vs eager", "{}"), ("compile_s", "first call (s)", "{:.2f}"),
    ("peak_memory_MB", "peak mem (MB)", "{:.0f}"), ("max_abs_diff", "max abs diff", "{:.2g}"),
    ("kernels_per_iter", "kernels/iter", "{:.0f}"), ("launches_per_iter", "launches/iter", "{:.1f}"),
    ("busy_per_iter_us", "GPU busy/iter (ms)", "ms3"), ("idle_per_iter_us", "GPU idle/iter (ms)", "ms3"),
    ("utilization", "util", "{:.2f}"), ("verdict", "verdict", "{}"),
]
RANKED = [("workload", "workload", "{}"), ("contender", "contender", "{}"), ("eager_ms", "eager (ms)", "{:.3f}"),
          ("latency_median_ms", "this (ms)", "{:.3f}"), ("speedup_text", "speedup (p10-p90 range)", "{}"),
          ("regression", "", "{}")]
# Decode runs (phase decode) per token: a decode step makes one token of each sequence.
DECODE_RESULTS = [
    ("run", "run", "{}"), ("latency_median_ms", "ms/token p50", "{:.3f}"), ("latency_range", "ms/token p10-p90", "{}"),
    ("tokens_per_s", "tokens/s", "{:,.0f}"), ("speedup_text", "tokens/s vs eager", "{}"),
    ("prompt_tokens", "prompt", "{:.0f}"), ("prefill_ms", "prefill (ms)", "{:.2f}"),
    ("kv_cache_MB", "KV cache (MB)", "{:.1f}"), ("kernels_per_iter", "kernels/token", "{:.0f}"),
    ("launches_per_iter", "launches/token", "{:.1f}"), ("busy_per_iter_us", "GPU busy/token (ms)", "ms3"),
    ("idle_per_iter_us", "GPU idle/token (ms, profiled)", "ms3"),
]
RATES = [("workload", "workload", "{}"), ("contender", "contender", "{}"),
         ("latency_median_ms", "latency (ms)", "{:.4f}"), ("achieved_TFLOPs", "TFLOP/s", "{:.3g}"),
         ("pct_peak_compute", "% of peak FLOP/s", "{:.0f}"), ("achieved_GBps", "GB/s", "{:.3g}"),
         ("pct_peak_bw", "% of peak GB/s", "{:.0f}")]


def _table(df: pd.DataFrame, spec: list[tuple[str, str, str]]) -> str:
    headers, rows = headline(df, spec)
    return markdown_table(headers, rows) if rows else "(none)"


def _environment(manifests: dict[str, Manifest]) -> str:
    seen = []
    for m in manifests.values():
        env = m.environment
        if env and env.device_name:
            text = f"{env.device_name} (torch {env.torch}" + (
                f", CUDA {env.cuda_runtime}, driver {env.cuda_driver}" if env.cuda_driver else "") + ")"
            if text not in seen:
                seen.append(text)
    return "; ".join(seen) or "no run has finished yet"


def _status(manifest: Manifest | None) -> str:
    """A cell's status; "not run" without a run.json."""
    return "not run" if manifest is None else manifest.status or "not run"


def _variant_note(suite) -> str | None:
    if not suite.variant_of:
        return None
    full = "an unknown number of cells" if suite.variant_cells is None else f"{suite.variant_cells} cells"
    return (f"This is **{suite.name}**, a trimmed variant of the suite `{suite.variant_of}` "
            f"(`workloads/{suite.variant_of}.toml`, {full}): {len(suite.cells)} cells. Trimmed: {suite.trimmed}\n")


def suite_report(t: SuiteTables) -> str:
    """report.md of a suite: what ran where, the results table, speedups, decode runs per token, idle time by
    cause, achieved rates, claims checked, what the traces show, and the cells without a result."""
    suite, cmp, manifests, command, rewritten_by = t.suite, t.results, t.manifests, t.command, t.rewritten_by
    states = pd.Series([_status(manifests.get(name)) for name in t.cells], dtype=object)
    parts = [f"# {suite.name}\n", suite.description + "\n" if suite.description else None,
             f"Made by `{command or 'tracekit bench'}` on {_environment(manifests)}"
             + (f"; this report written from those runs by `{rewritten_by}`" if rewritten_by else "") + ".\n",
             _variant_note(suite),
             "Cells: " + ", ".join(f"{n} {s}" for s, n in states.value_counts().items()) + ".\n",
             "Latency: median of the unprofiled timed iterations; per-iteration trace figures come from the "
             "profiled window (the profiler adds host overhead there). Speedups compare with the eager run of the "
             "same workload.\n",
             "## Results\n", _table(cmp, RESULTS) if not cmp.empty else "No runs have results yet.", ""]
    if len(t.ranked):
        parts += ["## Speedup over eager, ranked\n", "A speedup whose p10-p90 latency range overlaps eager's, or "
                  "that the two timers contradict (one faster, the other slower), is inconclusive.\n",
                  _table(t.ranked, RANKED), ""]
    if len(decoding := decode_view(cmp)):
        parts += ["## Decode: per token\n", DECODE_TEXT + "\n", _table(decoding, DECODE_RESULTS), ""]
    if len(timed := timing_view(cmp)):
        parts += ["## How far the timing can be trusted\n", "Each run timed twice, in alternating short blocks of "
                  "one process: per call (CUDA events on a GPU, perf_counter on the CPU) and as a synchronised wall "
                  "clock per call (blocks of calls between two synchronizes); over 5% apart is explained where it "
                  "can be, and a host busier than its CPUs is a doubt. With `repeats`, the latency is the "
                  "median of the processes' medians and the spread is theirs.\n",
                  *[f"- {line}\n" for line in timer_gap_lines(cmp)], _table(timed, TIMING), ""]
    if len(t.idle):
        parts += ["## GPU idle time by cause\n", _table(t.idle, IDLE), ""]
    if len(t.rated):
        parts += ["## Achieved rates\n", "A call's minimum work over its median latency; peaks: "
                  + ("; ".join(t.peak_sources) or "none known for this device") + ".\n", _table(t.rated, RATES), ""]
    if len(t.claims):
        parts += ["## Published claims, checked\n", markdown_table(list(t.claims.columns), t.claims.values.tolist()),
                  ""]
    parts += ["## What the traces show\n", *[f"- {line}" for line in suite_findings(cmp)], ""]
    unfinished = [(name, manifests.get(name)) for name in t.cells]
    unfinished = [(n, m) for n, m in unfinished if m is None or m.status != "ok"]
    if unfinished:
        parts += ["## Cells without a result\n", markdown_table(
            ["run", "status", "reason"],
            [[n, _status(m), re.sub(r"\s+", " ", str(m.reason or "") if m else "")[:300]]
             for n, m in unfinished]), ""]
    return "\n".join(p for p in parts if p is not None) + "\n"


@register
class SuiteReport(Renderer):
    name = "report.md"
    takes = SuiteTables

    def write(self, report: Report) -> list[Path]:
        return [write_atomic(report.out / "report.md", suite_report(report.data))]

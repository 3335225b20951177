"""The markdown summary format: ``summary.md``, the comparison, profiler overhead, plots
and every run (each linked to its trace), as GitHub markdown, fit for a PR.

Option ``link_traces`` (default True): False leaves the runs unlinked (a report
published without its traces).
"""

from __future__ import annotations

import os
from pathlib import Path

from tracekit.analysis.result import Result
from tracekit.io import write_atomic
from tracekit.report.base import Renderer, Report, register
from tracekit.report.column_specs import (CPU_OPS, CPU_OPS_SHOWN, CRITICAL_PATH, CRITICAL_PATH_TEXT, DECODE, DETAILS,
                                          IDLE, MODULE_DIFF, OVERHEAD, PROFILED, SPEEDUP, TIMING)
from tracekit.report.decode_text import DECODE_TEXT
from tracekit.report.draw import headline, markdown_table
from tracekit.report.run_lines import (critical_path_lines, critical_path_notes, evidence, integrity_lines, notes,
                                       timer_gap_lines)
from tracekit.report.views import (MODULES_HINT, PERFETTO_HINT, SOURCES, comparison_view, cpu_op_view,
                                   critical_path_runs, decode_view, finding_rows, gpu_runs, job_tables, module_rows,
                                   overhead_view, timing_view, trace_links)

TIMING_TEXT = ("Each run's latency is timed twice, in alternating short blocks of one process so both see the "
               "same host: per call (CUDA events on a GPU, perf_counter on the CPU) and as a synchronised wall "
               "clock per call (blocks of calls between two synchronizes; p10-p90 over the blocks). More than 5% "
               "apart is explained where it can be (the GPU tail a synchronised block waits for), and a host with "
               "more runnable tasks than CPUs at the start or end of the run is a doubt. A run made "
               "in several processes (`--repeats`) gives the median process, and the spread of the processes' "
               "medians. A speedup whose p10-p90 latency ranges overlap, or that the two timers contradict (one "
               "faster, the other slower), is called inconclusive.")


def _linked(headers: list[str], rows: list[list[str]], links: dict[str, str]) -> list[list[str]]:
    """Rows whose "run" cell links to its trace file (markdown)."""
    if "run" not in headers:
        return rows
    i = headers.index("run")
    return [r[:i] + [f"[{r[i]}]({links[r[i]]})" if r[i] in links else r[i]] + r[i + 1:] for r in rows]


def summary_markdown(t: Result, source: str, plots: dict[str, list[Path]] | None = None,
                     out: Path | None = None, link_traces: bool = True) -> str:
    """summary.md: the comparison, profiler overhead, plots, every run, the distributed
    jobs and each trace's integrity, as GitHub markdown."""
    a, comp = t.analysis, comparison_view(t.comparison)
    out = Path(out) if out else Path(".")
    plots = plots or {}
    link = lambda p: os.path.relpath(Path(p).absolute(), out.absolute())  # noqa: E731
    parts = [f"# tracekit report\n\nTraces: `{source}`. Baseline mode: `{t.baseline}`.\n", SOURCES + "\n"]
    if len(comp):
        parts += [f"## Speedup over {t.baseline}, and why\n", markdown_table(*headline(comp, SPEEDUP)), ""]
        parts += [f"- **{w} {m}**: {f}" + (f" **Warning**: {warn}." if warn else "")
                  for w, m, f, warn in finding_rows(comp)]
        parts += [f"- **Timing**: {line}" for line in timer_gap_lines(comp)]
        if len(decoding := decode_view(comp)):
            parts += ["\n## Decode: per token\n", DECODE_TEXT + "\n", markdown_table(*headline(decoding, DECODE))]
        if "" in plots:
            parts.append(f"\n![GPU busy and idle per iteration, all workloads]({link(plots[''][0])})\n")
        if len(t.modules):
            parts += ["\n## Where the time went, module by module\n", MODULES_HINT + "\n",
                      markdown_table(*headline(module_rows(t.modules), MODULE_DIFF))]
        gpu = comp[comp["busy_per_iter_ms"].notna()]
        if len(gpu):
            parts += ["\n## Inside the profiled window: GPU busy and idle by cause (ms per iteration)\n",
                      markdown_table(*headline(gpu, PROFILED))]
        parts += ["\n## Work, compile time, memory, accuracy\n", markdown_table(*headline(comp, DETAILS))]
        if len(timed := timing_view(comp)):
            parts += ["\n## How far the timing can be trusted\n", TIMING_TEXT + "\n",
                      markdown_table(*headline(timed, TIMING))]
    if len(t.cpu_op_changes):
        parts += ["\n## CPU runs: what changed, op by op (profiled self time per iteration)\n",
                  f"The {CPU_OPS_SHOWN} ops of each run whose self time changed most against the baseline (all of "
                  "them in runs.json's `cpu_op_changes`). An op's self time leaves out the ops it calls.\n",
                  markdown_table(*headline(cpu_op_view(t.cpu_op_changes), CPU_OPS))]
    if len(t.overhead):
        parts += ["\n## Profiler overhead\n",
                  "The profiler records every op and launch, which slows the host: a profiled iteration is "
                  "longer than an unprofiled one. Runs where it is longer by more than 10% are flagged; "
                  "their profiled idle time (host wait above all) is inflated by the profiler. A profiled "
                  "iteration shorter than the unprofiled one by as much cannot be the profiler's doing: that "
                  "run's unprofiled timing is flagged unreliable.\n",
                  markdown_table(*headline(overhead_view(t.overhead), OVERHEAD))]
    per_workload = [(w, ps) for w, ps in plots.items() if w]
    if per_workload:
        parts.append("\n## Plots\n")
        for w, ps in per_workload:
            parts.append(f"### {w}\n")
            parts += [f"![{w}]({link(p)})\n" for p in ps]
    links = trace_links(a, out) if link_traces else {}
    headers, rows = headline(a.runs)
    parts += ["\n## All runs\n", PERFETTO_HINT + "\n",
              markdown_table(headers, _linked(headers, rows, links)) if rows else "No runs found."]
    gpu = gpu_runs(a.runs)
    if len(gpu):
        parts.append("\n### GPU idle time by cause (share of the active span) and verdict\n")
        parts.append(markdown_table(*headline(gpu, IDLE)))
        parts.append("")
        parts += [f"- {line}" for line in evidence(gpu)]
    if len(cp := critical_path_runs(a.runs)):
        parts += ["\n## Critical path\n", CRITICAL_PATH_TEXT + "\n", markdown_table(*headline(cp, CRITICAL_PATH))]
        parts += [f"- {line}" for line in critical_path_lines(a) + critical_path_notes(a.runs)]
    if jobs := job_tables(a):
        parts.append("\n## Distributed jobs\n")
        parts += [f"- {line}" for line in a.table("jobs")["finding"]]
        for title, df, spec in jobs:
            parts += [f"\n### {title}\n", markdown_table(*headline(df, spec))]
    if len(control := a.table("launch_vs_fusion")):
        parts.append("\n## Launch removal alone (plain CUDA graphs) vs reduce-overhead\n")
        parts += [f"- {finding}" for finding in control["finding"]]
    if checks := integrity_lines(a.runs):
        parts.append("\n## Trace integrity\n")
        parts += [f"- {line}" for line in checks]
    if run_notes := notes(a.runs):
        parts.append("\nNotes:\n")
        parts += [f"- {line}" for line in run_notes]
    if a.errors:
        parts.append("\n## Unreadable files\n")
        parts += [f"- `{p}`: {why}" for p, why, _ in a.errors]
    if a.skipped:
        parts.append("\nSkipped (not traces): " + ", ".join(f"`{p}`" for p, _ in a.skipped))
    return "\n".join(parts) + "\n"


@register
class Summary(Renderer):
    name = "summary.md"
    takes = Result
    order = 10  # the pages first among the files

    def write(self, report: Report) -> list[Path]:
        text = summary_markdown(report.data, report.source, report.plots, report.out,
                                link_traces=report.options.get("link_traces", True))
        return [write_atomic(report.out / "summary.md", text)]

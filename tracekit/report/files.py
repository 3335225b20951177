"""Report files: summary.md, index.html, plots/*.png, runs.csv, comparison.csv, runs.json.

Everything is made from an :class:`Analysis` and the comparison tables of
:mod:`tracekit.analysis.compare`; nothing re-reads a trace.
"""

from __future__ import annotations

import os
from pathlib import Path


from tracekit.analysis.runs import Analysis
from tracekit.io import write_atomic, write_json
from tracekit.report.columns import (DETAILS, IDLE, OVERHEAD, PROFILED, SPEEDUP, comparison_view, evidence,
                                     headline, notes, overhead_view)
from tracekit.report.content import PERFETTO_HINT, SOURCES, Tables, findings, trace_links
from tracekit.report.html import index_html
from tracekit.report.jobs import job_lines, job_tables


def _markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def launch_removal_sentence(r: dict) -> str:
    """One row of the launch_vs_fusion table in words (latencies in ms)."""
    share = r["launch_removal_share"]
    return (f"- {r['workload']}: eager {r['latency_eager_ms']:.3f} ms; plain CUDA graphs "
            f"{r['latency_cudagraphs_ms']:.3f} ms (saves {r['saved_by_cudagraphs_ms']:.3f} ms); default "
            f"{r['latency_default_ms']:.3f} ms; reduce-overhead {r['latency_reduce_overhead_ms']:.3f} ms "
            f"(saves {r['saved_by_reduce_overhead_ms']:.3f} ms). Launch removal alone gives "
            + (f"{share:.0%} of reduce-overhead's gain." if share == share else "no comparable gain "
               "(reduce-overhead saves nothing)."))


def _linked(headers: list[str], rows: list[list[str]], links: dict[str, str]) -> list[list[str]]:
    """Rows whose "run" cell links to its trace file (markdown)."""
    if "run" not in headers:
        return rows
    i = headers.index("run")
    return [r[:i] + [f"[{r[i]}]({links[r[i]]})" if r[i] in links else r[i]] + r[i + 1:] for r in rows]


def summary_markdown(t: Tables, source: str, plots: dict[str, list[Path]] | None = None,
                     out: Path | None = None) -> str:
    """summary.md: the comparison, profiler overhead, plots and every run, as GitHub markdown."""
    a, comp = t.analysis, comparison_view(t.comparison)
    out = Path(out) if out else Path(".")
    plots = plots or {}
    link = lambda p: os.path.relpath(Path(p).absolute(), out.absolute())  # noqa: E731
    parts = [f"# tracekit report\n\nTraces: `{source}`. Baseline mode: `{t.baseline}`.\n", SOURCES + "\n"]
    if len(comp):
        parts += [f"## Speedup over {t.baseline}, and why\n", _markdown_table(*headline(comp, SPEEDUP)), ""]
        parts += [f"- **{w} {m}**: {f}" + (f" **Warning**: {warn}." if warn else "")
                  for w, m, f, warn in findings(comp)]
        if "" in plots:
            parts.append(f"\n![GPU busy and idle per iteration, all workloads]({link(plots[''][0])})\n")
        gpu = comp[comp["busy_per_iter_ms"].notna()]
        if len(gpu):
            parts += ["\n## Inside the profiled window: GPU busy and idle by cause (ms per iteration)\n",
                      _markdown_table(*headline(gpu, PROFILED))]
        parts += ["\n## Work, compile time, memory, accuracy\n", _markdown_table(*headline(comp, DETAILS))]
    if len(t.overhead):
        parts += ["\n## Profiler overhead\n",
                  "The profiler records every op and launch, which slows the host: a profiled iteration is "
                  "longer than an unprofiled one. Runs where the two differ by more than 10% are flagged; "
                  "their profiled idle time (host wait above all) is inflated by the profiler.\n",
                  _markdown_table(*headline(overhead_view(t.overhead), OVERHEAD))]
    per_workload = [(w, ps) for w, ps in plots.items() if w]
    if per_workload:
        parts.append("\n## Plots\n")
        for w, ps in per_workload:
            parts.append(f"### {w}\n")
            parts += [f"![{w}]({link(p)})\n" for p in ps]
    links = trace_links(a, out)
    headers, rows = headline(a.runs)
    parts += ["\n## All runs\n", PERFETTO_HINT + "\n",
              _markdown_table(headers, _linked(headers, rows, links)) if rows else "No runs found."]
    gpu_runs = a.runs[a.runs["has_gpu"].fillna(False).astype(bool)] if "has_gpu" in a.runs else []
    if len(gpu_runs):
        parts.append("\n### GPU idle time by cause (share of the active span) and verdict\n")
        parts.append(_markdown_table(*headline(gpu_runs, IDLE)))
        parts.append("")
        parts += [f"- {line}" for line in evidence(gpu_runs)]
    if jobs := job_tables(a):
        parts.append("\n## Distributed jobs\n")
        parts += [f"- {line}" for line in job_lines(a)]
        for title, df, spec in jobs:
            parts += [f"\n### {title}\n", _markdown_table(*headline(df, spec))]
    if len(control := a.table("launch_vs_fusion")):
        parts.append("\n## Launch removal alone (plain CUDA graphs) vs reduce-overhead\n")
        parts += [launch_removal_sentence(r) for r in control.to_dict("records")]
    if run_notes := notes(a.runs):
        parts.append("\nNotes:\n")
        parts += [f"- {line}" for line in run_notes]
    if a.errors:
        parts.append("\n## Unreadable files\n")
        parts += [f"- `{p}`: {why}" for p, why, _ in a.errors]
    if a.skipped:
        parts.append("\nSkipped (not traces): " + ", ".join(f"`{p}`" for p, _ in a.skipped))
    return "\n".join(parts) + "\n"


def write_reports(analysis: Analysis, out: Path | str, source: str, baseline: str = "eager",
                  plots: bool = True) -> list[Path]:
    """Write the report under ``out`` and return the files written.

    summary.md (markdown), index.html (one self-contained page: plots inline,
    sortable tables), plots/*.png, runs.csv (every metric of every run, units
    in the column names, plus the profiler-overhead columns), comparison.csv
    (the comparison with ``baseline``), runs.json (every table).
    """
    out = Path(out)
    t = Tables.of(analysis, baseline)
    pngs = {}
    if plots and len(t.comparison):
        from tracekit.report.plots import write_plots  # matplotlib's import (~0.3 s) only when there is a plot

        pngs = write_plots(t.comparison, analysis.table("kernel_quantiles"), analysis.table("timeline"),
                           out / "plots", baseline)
    runs = analysis.runs
    if len(t.overhead):
        runs = runs.merge(t.overhead[["run", "profiler_overhead", "flagged"]].rename(
            columns={"flagged": "profiler_overhead_flagged"}), on="run", how="left")
    # The timeline table (one iteration's events, for the plot) is events, not metrics: left out.
    data = {**{k: v for k, v in analysis.to_dict().items() if k != "timeline"},
            "comparison": t.comparison.to_dict("records"),
            "profiler_overhead": t.overhead.to_dict("records"), "baseline": baseline}
    return [
        write_atomic(out / "summary.md", summary_markdown(t, source, pngs, out)),
        write_atomic(out / "index.html", index_html(t, source, pngs, out)),
        write_atomic(out / "runs.csv", runs.to_csv(index=False)),
        write_atomic(out / "comparison.csv", t.comparison.to_csv(index=False)),
        write_json(out / "runs.json", data),
        *[p for ps in pngs.values() for p in ps],
    ]

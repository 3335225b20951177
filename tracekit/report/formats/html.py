"""The HTML format: ``index.html``, the whole report in one page (sortable tables, each run
linked to its trace), from a Jinja2 template.

Options: ``html_plots`` "inline" (default: the plots inline as data URIs, so the page is
self-contained) or "link" (``<img>`` links to the PNGs beside it, so a report kept in a
repository holds each plot once); ``link_traces`` (default True) links each run to its
trace file (False for a report published without its traces).
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import jinja2

from tracekit import __version__
from tracekit.analysis.result import Result
from tracekit.io import write_atomic
from tracekit.report.base import Renderer, Report, register
from tracekit.report.column_specs import (CPU_OPS, CRITICAL_PATH, CRITICAL_PATH_TEXT, DECODE, DETAILS, HEADLINE, IDLE,
                                          MODULE_DIFF, OVERHEAD, PROFILED, SPEEDUP, TIMING)
from tracekit.report.decode_text import DECODE_TEXT
from tracekit.report.draw import headline
from tracekit.report.run_lines import (critical_path_lines, critical_path_notes, evidence, integrity_lines, notes,
                                       timer_gap_lines)
from tracekit.report.views import (MODULES_HINT, PERFETTO_HINT, SOURCES, comparison_view, cpu_op_view,
                                   critical_path_runs, decode_view, finding_rows, gpu_runs, job_tables, module_rows,
                                   overhead_view, timing_view, trace_links)

WRAP_CHARS = 60  # a text column with a longer cell wraps (CSS white-space: normal) instead of widening the table
_ENV = jinja2.Environment(loader=jinja2.PackageLoader("tracekit.report", "templates"),
                          autoescape=jinja2.select_autoescape(["html", "j2"]), trim_blocks=True, lstrip_blocks=True)


def data_uri(png: Path) -> str:
    """A PNG file as a ``data:image/png;base64,...`` URI."""
    return "data:image/png;base64," + base64.b64encode(Path(png).read_bytes()).decode("ascii")


def _table(df, spec, title: str, links: dict[str, str] | None = None) -> dict:
    headers, rows = headline(df, spec)
    # Columns of numbers (1.38x, +70%, 2.1e-05, "-") align right, text columns left.
    # Columns of sentences ("what changed", even where one starts with a figure) wrap, so the table fits the
    # page instead of running off it.
    wrap = [max(map(len, col)) > WRAP_CHARS for col in zip(*rows)] or [False] * len(headers)
    numeric = [not w and all(c == "-" or re.match(r"^[+-]?\d", c) for c in col)
               for w, col in zip(wrap, zip(*rows))] or [False] * len(headers)
    return {"title": title, "headers": headers, "rows": rows, "numeric": numeric, "wrap": wrap,
            "link_col": headers.index("run") if links is not None and "run" in headers else -1,
            "links": links or {}}


def _markdown_bold(text: str) -> str:
    """SOURCES and hints are written for markdown; the page shows them as plain text."""
    return text.replace("**", "").replace("`", "")


def index_html(t: Result, source: str, plots: dict[str, list[Path]], out: Path, inline: bool = True,
               link_traces: bool = True) -> str:
    """The page: the comparison tables and findings, the plots (``inline`` or linked),
    profiler overhead, and every run (with a link to its trace file if ``link_traces``)."""
    a, comp = t.analysis, comparison_view(t.comparison)
    src = data_uri if inline else (lambda p: os.path.relpath(Path(p).absolute(), Path(out).absolute()))
    gpu_comp = comp[comp["busy_per_iter_ms"].notna()] if len(comp) else comp
    gpu = gpu_runs(a.runs)
    tables = []
    if len(comp):
        tables.append(_table(comp, SPEEDUP, f"Speedup over {t.baseline}, and why"))
    context = {
        "version": __version__, "source": source, "baseline": t.baseline,
        "sources": _markdown_bold(SOURCES), "perfetto_hint": _markdown_bold(PERFETTO_HINT),
        "speedup": tables[0] if tables else None,
        "findings": finding_rows(comp) if len(comp) else [],
        "timing_lines": timer_gap_lines(comp),
        "overview": src(plots[""][0]) if "" in plots else None,
        "profiled": _table(gpu_comp, PROFILED, "Inside the profiled window: GPU busy and idle by cause "
                           "(ms per iteration)") if len(gpu_comp) else None,
        "details": _table(comp, DETAILS, "Work, compile time, memory, accuracy") if len(comp) else None,
        "decode": _table(decode_view(comp), DECODE, "Decode: per token") if len(decode_view(comp)) else None,
        "decode_text": DECODE_TEXT,
        "timing": _table(timing_view(comp), TIMING, "How far the timing can be trusted")
        if len(timing_view(comp)) else None,
        "cpu_ops": _table(cpu_op_view(t.cpu_op_changes), CPU_OPS, "CPU runs: what changed, op by op (profiled "
                          "self time per iteration)") if len(t.cpu_op_changes) else None,
        "modules": _table(module_rows(t.modules), MODULE_DIFF, "Where the time went, module by module")
        if len(t.modules) else None,
        "modules_hint": _markdown_bold(MODULES_HINT),
        "overhead": _table(overhead_view(t.overhead), OVERHEAD, "Profiler overhead") if len(t.overhead) else None,
        "workloads": [(w, [src(p) for p in ps]) for w, ps in plots.items() if w],
        "runs": _table(a.runs, HEADLINE, "All runs", trace_links(a, out) if link_traces else {}),
        "idle": _table(gpu, IDLE, "GPU idle time by cause (share of the active span) and verdict")
        if len(gpu) else None,
        "evidence": evidence(gpu) if len(gpu) else [],
        "critical_path": _table(critical_path_runs(a.runs), CRITICAL_PATH, "Critical path")
        if len(critical_path_runs(a.runs)) else None,
        "critical_path_text": CRITICAL_PATH_TEXT,
        "critical_path_notes": critical_path_lines(a) + critical_path_notes(a.runs),
        "jobs": [_table(df, spec, title) for title, df, spec in job_tables(a)],
        "job_lines": list(a.table("jobs").get("finding", [])),
        "integrity": integrity_lines(a.runs),
        "notes": notes(a.runs),
        "errors": [(p, why) for p, why, _ in a.errors],
        "skipped": [p for p, _ in a.skipped],
    }
    return _ENV.get_template("index.html.j2").render(**context)


@register
class Html(Renderer):
    name = "index.html"
    takes = Result
    order = 20

    def write(self, report: Report) -> list[Path]:
        page = index_html(report.data, report.source, report.plots, report.out,
                          inline=report.options.get("html_plots", "inline") == "inline",
                          link_traces=report.options.get("link_traces", True))
        return [write_atomic(report.out / "index.html", page)]

"""The diff formats (``tracekit diff``): two runs compared module by module, on the
terminal and as ``diff.md``, ``diff_modules.csv``, ``diff_ops.csv`` and ``diff.json``;
and every pair of modes of each workload (a :class:`DiffSet`): those files per pair
in ``<workload>/<mode A>-vs-<mode B>/``, and ``diffs.md``/``diffs.csv``, one line per
pair with the attributed share of each run and the check that the rows sum to the
runs' totals.

Options: ``top`` (default 20) rows of the module table on the terminal and of both
tables in diff.md (the CSV and JSON files hold every row).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
from rich.console import Console

from tracekit.analysis.attribution.run_diff import DiffSet, RunDiff
from tracekit.io import jsonable, write_atomic
from tracekit.report.base import Renderer, Report, register
from tracekit.report.comparison_text import top_modules
from tracekit.report.draw import headline, markdown_table
from tracekit.report.fit import Fit
from tracekit.report.run_lines import checks_lines
from tracekit.report.views import module_view
from tracekit.report.worded import worded

NO_GPU = "no GPU activity: diff attributes GPU ops"

MODULES = [
    ("module", "module", "{}"),
    ("busy_us_a", "busy A (µs/iter)", "{:.1f}"),
    ("busy_us_b", "busy B", "{:.1f}"),
    ("d_busy_us", "Δ busy", "{:+.1f}"),
    ("contribution", "share of Δ busy", "{:.0%}"),
    ("d_kernels", "Δ kernels", "{:+.3g}"),
    ("d_launches", "Δ launches", "{:+.3g}"),
    ("d_idle_us", "Δ idle before", "{:+.1f}"),
    ("change", "what changed", "{}"),
]
OPS = [("module", "module", "{}"), ("op", "op", "{}"), *MODULES[1:]]
CHECKS = [
    ("workload", "workload", "{}"),
    ("a", "A", "{}"),
    ("b", "B", "{}"),
    ("coverage_a", "attributed A", "{:.1%}"),
    ("coverage_b", "attributed B", "{:.1%}"),
    ("covered_text", "both >= min", "{}"),
    ("d_busy_us", "Δ busy (µs/iter)", "{:+.1f}"),
    ("d_kernels", "Δ kernels", "{:+.3g}"),
    ("d_launches", "Δ launches", "{:+.3g}"),
    ("sum_error", "rows - total", "{:.1e}"),
    ("top_modules", "top modules", "{}"),
]


def _totals_line(d: RunDiff) -> str:
    t = d.totals
    return (f"Per iteration, B - A: GPU busy {t['d_busy_us']:+.1f} µs ({t['busy_us_a']:.1f} -> {t['busy_us_b']:.1f}), "
            f"kernels {t['d_kernels']:+.3g}, launches {t['d_launches']:+.3g}, GPU idle {t['d_idle_us']:+.1f} µs; "
            f"the module rows sum to these exactly (largest difference {max(d.sum_error.values(), default=0):.1e}). "
            f"Attributed to a module (share of GPU busy time): A {_share(d.coverage_a)}, B {_share(d.coverage_b)}.")


def _share(x: float) -> str:
    """A share of GPU busy time, or what stands for it where a run has none (every GPU op 0 µs long)."""
    return f"{x:.1%}" if x == x else "none (its GPU ops take no time)"


def _title(d: RunDiff) -> str:
    n = lambda i: f"{i:g} iterations" if i == i else "iterations unknown: figures per trace"  # noqa: E731
    return f"A = {d.a} ({n(d.iterations_a)}), B = {d.b} ({n(d.iterations_b)}); modules at depth {d.depth}"


def mismatch_text(d: RunDiff) -> str:
    """The run.json fields two runs differ in (:func:`tracekit.analysis.attribution.run_diff.mismatch`),
    ``"batch 8 vs 1, device cuda vs cpu"``; "" where they differ in none."""
    plain = lambda v: f"{v:g}" if isinstance(v, float) else str(v)  # noqa: E731
    return ", ".join(f"{name} {plain(a)} vs {plain(b)}" for name, a, b in d.mismatch)


def _warning(d: RunDiff) -> str:
    """The warning of a diff of runs of different workloads, "" if they are of one."""
    return f"A and B differ in {mismatch_text(d)}: this diff compares workloads, not modes" if d.mismatch else ""


def integrity_lines(d: RunDiff) -> list[str]:
    """Each run's integrity line, ``A (run): integrity ok`` (as ``tracekit analyze`` says it), then a
    line per analysis of either run that raised (a bug in tracekit)."""
    lines = checks_lines(d.integrity, lambda key, rows: f"{key[0]} ({key[1]})", by=["side", "trace"]) \
        if len(d.integrity) else []
    return lines + [f"{path}: {analysis} failed: {reason} (a bug in tracekit; the other figures stand)"
                    for path, analysis, reason, *_ in d.failures]


def _no_gpu(d: RunDiff) -> str:
    return f"{NO_GPU}; neither trace holds one (CPU-only runs: `tracekit compare A B` compares their CPU ops)."


def diff_markdown(d: RunDiff, top: int = 20) -> str:
    """diff.md: the warning if the runs are of different workloads, the totals, then the top
    rows by module and by (module, op); for CPU-only runs, the line that there is nothing to attribute."""
    head = ["# tracekit diff\n", _title(d) + ".\n"] + ([f"**Warning**: {_warning(d)}.\n"] if d.mismatch else []) + (
        ["".join(f"- {line}\n" for line in integrity_lines(d))] if integrity_lines(d) else [])
    if not d.has_gpu:
        return "\n".join(head + [_no_gpu(d), ""])
    parts = head + [_totals_line(d) + "\n",
             f"## By module (top {top} by |Δ busy|)\n",
             markdown_table(*headline(module_view(d.modules.head(top)), MODULES)),
             f"\n## By module and op (top {top})\n", markdown_table(*headline(module_view(d.ops.head(top)), OPS)), ""]
    return "\n".join(parts)


def diff_dict(d: RunDiff) -> dict:
    """Everything, as JSON-ready data (its tables worded: :func:`tracekit.report.worded.worded`): the
    runs, the totals, modules and ops, each run's integrity checks and the analyses that raised."""
    d = worded(d)
    return jsonable({"a": d.a, "b": d.b, "has_gpu": d.has_gpu, "mismatch": mismatch_text(d), "depth": d.depth,
                     "iterations_a": d.iterations_a,
                     "iterations_b": d.iterations_b, "coverage_a": d.coverage_a, "coverage_b": d.coverage_b,
                     "totals": d.totals, "modules": d.modules.to_dict("records"), "ops": d.ops.to_dict("records"),
                     "integrity": d.integrity.to_dict("records"),
                     "failures": [{"path": p, "analysis": a, "reason": r} for p, a, r, *_ in d.failures]})


def _folder(d: RunDiff) -> str:
    """``<workload>/<mode A>-vs-<mode B>`` (the runs' last path parts), file-name safe."""
    safe = lambda t: re.sub(r"[^A-Za-z0-9._-]+", "-", t).strip("-")  # noqa: E731
    return f"{safe(d.workload) or 'runs'}/{safe(Path(d.a).name)}-vs-{safe(Path(d.b).name)}"


def checks(s: DiffSet) -> pd.DataFrame:
    """One row per pair (:meth:`DiffSet.checks`) with top_modules, the modules that contribute most
    to its Δ busy (:func:`tracekit.report.comparison_text.top_modules`): diffs.csv."""
    return s.checks().assign(top_modules=[top_modules(d.modules) for d in s.diffs])


def _checks(s: DiffSet) -> pd.DataFrame:
    """The checks of the pairs with GPU activity (:func:`checks`), for display."""
    c = checks(s).loc[[d.has_gpu for d in s.diffs]]
    return c.assign(covered_text=c["covered"].map({True: "yes", False: "NO"}))


def _cpu_pairs(s: DiffSet) -> str:
    """The line for the pairs of CPU-only runs (left out of the pairs' table), "" if none."""
    cpu = [d for d in s.diffs if not d.has_gpu]
    return (f"{NO_GPU}: {len(cpu)} pair(s) of CPU-only runs left out "
            f"({', '.join(dict.fromkeys(d.workload for d in cpu))})") if cpu else ""


def runs_lines(s: DiffSet) -> list[str]:
    """The integrity line of each run in a pair, once (``run: integrity ...``), a line per file
    that could not be read, and one per analysis that raised (a bug in tracekit)."""
    checks = pd.concat([d.integrity for d in s.diffs], ignore_index=True) if s.diffs else pd.DataFrame()
    lines = checks_lines(checks.drop_duplicates(["trace", "check"])) if len(checks) else []
    return (lines + [f"unreadable: {path}: {problem}" for path, problem, _ in s.errors]
            + [f"{path or 'the runs'}: {analysis} failed: {reason} (a bug in tracekit)"
               for path, analysis, reason, *_ in s.failures])


def diffs_markdown(s: DiffSet) -> str:
    """diffs.md: one line per pair with GPU activity, with a link to its diff.md, a line for the
    pairs of CPU-only runs, then the runs' integrity and the files that could not be read."""
    headers, rows = headline(_checks(s), CHECKS)
    for row, d in zip(rows, [d for d in s.diffs if d.has_gpu]):
        row[0] = f"[{row[0]}]({_folder(d)}/diff.md)"
    cpu = _cpu_pairs(s)
    return "\n".join(["# tracekit diff: every pair of modes\n",
                      f"Each run's GPU ops are attributed to modules; a pair's module rows sum to its runs' Δ busy, "
                      f"Δ kernels, Δ launches and Δ idle (\"rows - total\": the largest difference, float rounding "
                      f"only). \"both >= min\": both runs have at least {s.min_coverage:.0%} of their GPU busy time "
                      "attributed to a module.\n"] + ([markdown_table(headers, rows)] if rows else [])
                     + ([f"\n{cpu}."] if cpu else []) + [f"- {line}" for line in runs_lines(s)] + [""])


@register
class Diffs(Renderer):
    name = "diffs"
    takes = DiffSet

    def write(self, report: Report) -> list[Path]:
        s, out = report.data, report.out
        files = []
        for d in s.diffs:
            files += Diff().write(Report(d, out / _folder(d), options=report.options))
        return files + [write_atomic(out / "diffs.md", diffs_markdown(s)),
                        write_atomic(out / "diffs.csv", checks(s).to_csv(index=False))]

    def show(self, report: Report, console: Console) -> None:
        s, fit = report.data, Fit(report.options.get("wide", False))
        if len(pairs := _checks(s)):
            fit.print(console, "every pair of modes, module by module", *headline(pairs, CHECKS))
        if cpu := _cpu_pairs(s):
            console.print(cpu, highlight=False)
        for line in runs_lines(s):
            console.print(line, highlight=False)


@register
class Diff(Renderer):
    name = "diff"
    takes = RunDiff

    def write(self, report: Report) -> list[Path]:
        d, out = report.data, report.out
        top = report.options.get("top", 20)
        return [write_atomic(out / "diff.md", diff_markdown(d, top)),
                write_atomic(out / "diff_modules.csv", d.modules.to_csv(index=False)),
                write_atomic(out / "diff_ops.csv", d.ops.to_csv(index=False)),
                write_atomic(out / "diff.json", json.dumps(diff_dict(d), indent=1) + "\n")]

    def show(self, report: Report, console: Console) -> None:
        d, fit = report.data, Fit(report.options.get("wide", False))
        top = report.options.get("top", 20)
        if d.mismatch:
            console.print(f"warning: {_warning(d)}", style="bold red", highlight=False)
        if not d.has_gpu:
            console.print(_no_gpu(d), highlight=False)
        else:
            table = module_view(d.modules.head(top)) if len(d.modules) else pd.DataFrame()
            fit.print(console, _title(d), *headline(table, MODULES))
            console.print(_totals_line(d), highlight=False)
        for line in integrity_lines(d):   # last: what a reader checks the figures above against
            console.print(line, highlight=False)

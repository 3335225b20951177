"""The terminal format (rich): the answer for each workload first (its fastest mode's
speedup with its range, and why: Δ GPU busy + Δ idle), then the comparison with its
findings, the run table, idle time by cause with each verdict's evidence. Tables fit the
console's width (:mod:`tracekit.report.fit`: long names get a key in a legend).

Options (:func:`tracekit.report.print_reports`): ``runs`` (default True) prints the
runs; ``comparison`` (default True) the answers and the comparison; ``detail`` (default
False) adds the profiled-window split by cause, the details table and, for CPU runs, the
op-by-op changes; ``wide`` (default False) every column and every name in full.
"""

from __future__ import annotations

from rich.console import Console

from tracekit.analysis.result import Result
from tracekit.report.base import Renderer, Report, register
from tracekit.report.column_specs import CPU_OPS, CRITICAL_PATH, DECODE, DETAILS, IDLE, PROFILED, SPEEDUP, TIMING
from tracekit.report.draw import headline
from tracekit.report.fit import Fit, Legend
from tracekit.report.run_lines import (critical_path_lines, critical_path_notes, evidence, integrity_lines, notes,
                                       timer_gap_lines)
from tracekit.report.views import (answers, comparison_view, cpu_op_view, critical_path_runs, decode_view,
                                   finding_rows, gpu_runs, job_tables, timing_view)


def _grouped(lines: list[str]) -> list[str]:
    """``run: text`` lines with one text said once for all its runs: ``text: run, run``."""
    by_text: dict[str, list[str]] = {}
    for line in lines:
        run, _, text = line.partition(": ")
        by_text.setdefault(text, []).append(run)
    return [f"{runs[0]}: {text}" if len(runs) == 1 else f"{text}: {', '.join(runs)}" for text, runs in by_text.items()]


def print_answers(t: Result, console: Console, fit: Fit) -> None:
    """One answer per workload (:func:`tracekit.report.views.answers`), then the legend of
    the shortened names."""
    for first, why in answers(t.comparison, t.analysis.runs, t.baseline):
        console.print(first, style="bold", highlight=False)
        if why:
            console.print(f"  {why}", highlight=False)
    if lines := fit.legend.lines():
        console.print("short names in the tables:", style="dim", highlight=False)
        for line in lines:
            console.print(f"  {line}", style="dim", highlight=False)


def print_runs(t: Result, console: Console, fit: Fit) -> None:
    """The run table, the idle-time table with each verdict's evidence, the distributed
    jobs (their tables and findings), each trace's integrity (those ok in one line), then
    notes (one line for a note of several runs) and any unreadable files."""
    analysis = t.analysis
    fit.print(console, "tracekit: runs", *headline(analysis.runs))
    gpu = gpu_runs(analysis.runs)
    if len(gpu):
        fit.print(console, "GPU idle time by cause (share of the active span)", *headline(gpu, IDLE))
        for line in evidence(gpu):
            console.print(f"  {fit.legend.short(line.partition(': ')[0])}: {line.partition(': ')[2]}",
                          highlight=False)
    if len(cp := critical_path_runs(analysis.runs)):
        fit.print(console, "critical path: share of each part of an iteration's path", *headline(cp, CRITICAL_PATH))
    for line in critical_path_lines(analysis):
        console.print(f"  {line}", highlight=False)
    for line in _grouped(critical_path_notes(analysis.runs)):
        console.print(f"  {line}", highlight=False)
    for title, df, spec in job_tables(analysis):
        fit.print(console, title, *headline(df, spec))
    for line in analysis.table("jobs").get("finding", []):
        console.print(f"  {line}", highlight=False)
    print_problems(t, console, notes_too=True)


def print_problems(t: Result, console: Console, notes_too: bool = False) -> None:
    """Each trace's integrity (those ok in one line), with ``notes_too`` the notes, and the
    unreadable and skipped files: the end of the runs, and all of them ``compare`` prints (issue 40)."""
    analysis = t.analysis
    for line in _grouped(integrity_lines(analysis.runs)):
        console.print(f"  {line}", highlight=False)
    for line in _grouped(notes(analysis.runs)) if notes_too else []:
        console.print(f"  note: {line}", highlight=False)
    for path, problem, _ in analysis.errors:
        console.print(f"[red]unreadable[/red] {path}: {problem}", highlight=False)
    for path, why in analysis.skipped:
        console.print(f"[dim]skipped {path}: {why}[/dim]", highlight=False)


def print_comparison(t: Result, console: Console, fit: Fit, detail: bool = False) -> None:
    """The speedup table (each mode vs the baseline, with Δ busy / Δ idle), its findings
    and warnings, decode runs' figures per token, and the runs whose profiler overhead is over 10%; with ``detail``
    also the profiled-window split by cause and the details table."""
    comp = comparison_view(t.comparison)
    if comp.empty:
        console.print("no runs with a run.json to compare (model and mode unknown)", highlight=False)
        return
    fit.print(console, f"speedup over {t.baseline}, and why (latency unprofiled; Δ per iteration)",
              *headline(comp, SPEEDUP))
    for workload, mode, finding, warning in finding_rows(comp):
        warned = f" [bold red]warning:[/bold red] {warning}" if warning else ""
        console.print(f"  {workload} {mode}: {finding}" + warned, highlight=False)
    for line in timer_gap_lines(comp):
        console.print(f"  timing: {line}", highlight=False)
    if len(decoding := decode_view(comp)):
        fit.print(console, "decode: per token (a step makes one token of each sequence)", *headline(decoding, DECODE))
    if detail:
        gpu = comp[comp["busy_per_iter_ms"].notna()]
        if len(gpu):
            fit.print(console, "inside the profiled window (ms per iteration)", *headline(gpu, PROFILED))
        fit.print(console, "work, compile time, memory, accuracy", *headline(comp, DETAILS))
        if len(timed := timing_view(comp)):
            fit.print(console, "how far the timing can be trusted", *headline(timed, TIMING))
        if len(t.cpu_op_changes):
            fit.print(console, "CPU runs: what changed, op by op (profiled self time per iteration)",
                      *headline(cpu_op_view(t.cpu_op_changes), CPU_OPS))
    flagged = t.overhead[t.overhead["flagged"]]
    if len(flagged):
        console.print("  profiler overhead > 10% (profiled vs unprofiled iteration): "
                      + ", ".join(f"{r} {o:+.0%}" for r, o in zip(flagged["run"], flagged["profiler_overhead"]))
                      + "; their profiled figures (idle time above all) are inflated", highlight=False)
    unreliable = t.overhead[t.overhead["unreliable_unprofiled"]]
    if len(unreliable):
        console.print("  unreliable unprofiled timing (a profiled iteration was shorter): "
                      + ", ".join(f"{r} (profiled {p:.3f} ms, unprofiled {u:.3f} ms)" for r, p, u in zip(
                          unreliable["run"], unreliable["profiled_iter_ms"], unreliable["latency_median_ms"])),
                      highlight=False)


@register
class Terminal(Renderer):
    name = "terminal"
    takes = Result

    def show(self, report: Report, console: Console) -> None:
        options, t = report.options, report.data
        wide = options.get("wide", False)
        fit = Fit(wide, Legend() if wide else Legend.of(t.analysis.runs.get("run", ()),
                                                         t.comparison.get("workload", ())))
        if options.get("comparison", True):
            print_answers(t, console, fit)
            print_comparison(t, console, fit, detail=options.get("detail", False))
        if options.get("runs", True):
            print_runs(t, console, fit)
        else:   # the integrity of what was compared, and what could not be read
            print_problems(t, console)

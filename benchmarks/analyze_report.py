"""The text of ``reports/bench-analyze.md`` from the benchmark's rows (see loadbench.py)."""

from __future__ import annotations

# The targets of issue 18, on the 2-core machine.
MBPS_1G = 250          # end to end on the 1 GB trace
HTA_X_1G = 25          # times faster than HTA 0.5.0 (parse + temporal + idle-time breakdown) at 1 GB
MBPS_100M = 100        # end to end, start-up included, on the 100 MB trace
STARTUP_S = 0.15       # imports before the trace is read
PSS_OVER_SIZE = 0.4    # peak memory of the process tree over the uncompressed trace size, at 1 GB


def markdown(rows: list[dict], env: dict, big: dict | None) -> str:
    """The report: end-to-end table, HTA, phases before/after, the 10 GB run, the targets."""
    lines = ["# tracekit analyze: speed and memory on large traces", "",
             f"Made by `make bench-analyze` on {env['cores']} cores ({env['cpu']}), Python {env['python']}. "
             f"Synthetic traces replicate `{env['fixture']}` with shifted timestamps and ids (uncompressed "
             "Kineto JSON, its own layout: about 240 bytes an event); every run found the trace's known kernels "
             "and GPU busy time. Each figure is `tracekit analyze FILE --json` in a fresh process tree, end to "
             "end (start-up, read, decode, analyses, report files): times the median of "
             f"{env['repeats']} runs, each timed alone; CPU is user + system time of the whole tree. Peak memory, "
             f"from {env['repeats']} more runs under a probe (its sampling costs CPU, so it is kept out of the "
             "timed runs), is the largest sum over the tree's processes of PSS (shared pages counted once), RSS "
             "sum beside it (shared pages counted in every process: an upper bound), sampled every 20 ms.", "",
             f"Load average (1, 5, 15 min) at the start: {_load(env['load_start'])}; at the end: "
             f"{_load(env['load_end'])}. On a machine shared with other work, wall times stretch (CPU times much "
             "less): compare them with the load.", "",
             "| trace (MB) | events | kernels found | analyze (s) | runs (s) | MB/s | CPU (s) | peak PSS (MB) "
             "| PSS / trace size | peak RSS sum (MB) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['size_MB']:.0f} | {r['events']:,} | {r['kernels']:,} | {r['analyze_s']:.2f} | "
                     f"{' '.join(f'{w:.2f}' for w in r['walls'])} | {r['MBps']:.0f} | {r['cpu_s']:.2f} | "
                     f"{r['pss_MB']:.0f} | {r['pss_over_size']:.2f} | {r['rss_MB']:.0f} |")
    if any("before_s" in r for r in rows):
        lines += ["", "## End to end against the earlier commit", "",
                  f"The same `tracekit analyze FILE --json` of the tracekit in `{env['before']}`, each of its runs "
                  "right after one of this tracekit's (so that a change of the machine's speed during the "
                  "benchmark touches both alike); median of the runs, peak memory of all.", "",
                  "| trace (MB) | before (s) | before runs (s) | now (s) | faster | before peak PSS (MB) | now (MB) |",
                  "|---|---|---|---|---|---|---|"]
        for r in (r for r in rows if "before_s" in r):
            lines.append(f"| {r['size_MB']:.0f} | {r['before_s']:.2f} | {' '.join(f'{w:.2f}' for w in r['before_walls'])}"
                         f" | {r['analyze_s']:.2f} | **{r['before_s'] / r['analyze_s']:.2f}x** | "
                         f"{r['before_pss_MB']:.0f} | {r['pss_MB']:.0f} |")
    hta = [r for r in rows if "hta_s" in r or "hta_error" in r]
    if hta:
        lines += ["", "## HolisticTraceAnalysis 0.5.0 on the same trace", "",
                  "Timed once, in a fresh process, and run once more under the memory probe: parse "
                  "(`TraceAnalysis(trace_dir=...)`), "
                  "`get_temporal_breakdown`, `get_idle_time_breakdown`.", "",
                  "| trace (MB) | parse (s) | temporal (s) | idle time (s) | HTA end to end (s) | HTA peak PSS (MB) "
                  "| tracekit (s) | tracekit faster |", "|---|---|---|---|---|---|---|---|"]
        for r in hta:
            if "hta_s" in r:
                lines.append(f"| {r['size_MB']:.0f} | {r['hta_parse_s']:.1f} | {r['hta_temporal_s']:.2f} | "
                             f"{r['hta_idle_s']:.2f} | {r['hta_s']:.1f} | {r['hta_pss_MB']:.0f} | "
                             f"{r['analyze_s']:.2f} | **{r['hta_s'] / r['analyze_s']:.1f}x** |")
            else:
                lines.append(f"| {r['size_MB']:.0f} | HTA could not run: {r['hta_error']} | | | | | | |")
    lines += ["", "## Where the time goes, phase by phase", "",
              f"Start-up (a fresh interpreter importing what `tracekit analyze` imports before it reads a trace): "
              f"{env['startup_s']:.3f} s, median of {env['repeats']}; pandas and matplotlib "
              + (f"**imported** then ({env['startup_imports']})" if env["startup_imports"] else "not among them") + ".",
              "", "Each phase timed in a fresh process making the calls `tracekit analyze` makes (wall and CPU of "
              "the process and its workers; the median of the runs): start-up imports, read (decode and tabulate "
              "in the reader's worker processes, then the tables made of their columns), the analyses; the rest "
              "of the end-to-end time is the report files and process exit. Since the fast reader, pandas is "
              "imported during the read (while the workers decode), no longer at start-up: about 0.2 s of CPU "
              "moved from the one phase to the other, which shows most on the small traces."
              + (f" *Before*: the same on the tracekit checked out in `{env['before']}`." if env["before"] else ""),
              "", "| trace (MB) | code | workers | start-up (s) | read (s) | read CPU (s) | read MB/s | analyses (s) "
              "| analyses CPU (s) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for label, ph in (("before", r.get("before")), ("now", r["phases"])):
            if ph:
                lines.append(f"| {r['size_MB']:.0f} | {label} | {ph['workers']} | {ph['imports_s']:.2f} | "
                             f"{ph['read_s']:.2f} | {ph['read_cpu_s']:.2f} | {r['size_MB'] / ph['read_s']:.0f} | "
                             f"{ph['analysis_s']:.2f} | {ph['analysis_cpu_s']:.2f} |")
    if big:
        lines += ["", "## A 10 GB trace (`make bench-analyze-10g`)", "",
                  f"{big['size_MB']:,.0f} MB, {big['events']:,} events, {big['kernels']:,} kernels found (as many as "
                  f"the trace holds); one run, end to end: **{big['analyze_s']:.1f} s** ({big['MBps']:.0f} MB/s), "
                  f"CPU {big['cpu_s']:.1f} s, peak PSS of the tree **{big['pss_MB']:,.0f} MB** "
                  f"({big['pss_over_size']:.2f}x the trace), peak RSS sum {big['rss_MB']:,.0f} MB; load average "
                  f"{_load(big['load_start'])} at its start."]
    if any("critical_path" in r for r in rows):
        lines += ["", "## The critical path's cost (`--critical-path`, issue 30)", "",
                  "`tracekit analyze FILE --json` and the same with `--critical-path`, each run in turn in fresh "
                  "processes (the median wall time; the runs in brackets). Target: the critical path costs at most "
                  "as much again as the analysis without it.", "",
                  "| trace (MB) | analyze (s) | with --critical-path (s) | added | runs (s) |", "|---|---|---|---|---|"]
        for r in rows:
            if c := r.get("critical_path"):
                lines.append(f"| {r['size_MB']} | {c['plain_s']:.2f} | {c['critical_path_s']:.2f} | "
                             f"{c['critical_path_s'] / c['plain_s'] - 1:+.0%} | "
                             f"{' '.join(f'{x:.2f}' for x in c['plain_runs_s'])} / "
                             f"{' '.join(f'{x:.2f}' for x in c['critical_path_runs_s'])} |")
    lines += ["", "## Against the targets (issue 18)", ""] + verdicts(rows, env, big)
    return "\n".join(lines) + "\n"


def _load(avg) -> str:
    return ", ".join(f"{v:.2f}" for v in avg)


def verdicts(rows: list[dict], env: dict, big: dict | None) -> list[str]:
    """Each target checked against the rows."""
    mark = lambda ok: "met" if ok else "**NOT met**"  # noqa: E731
    out = []
    g1 = next((r for r in rows if 500 < r["size_MB"] < 2000), None)
    m100 = next((r for r in rows if 50 < r["size_MB"] < 500), None)
    if g1:
        out.append(f"- At least {MBPS_1G} MB/s end to end on the 1 GB trace: {g1['MBps']:.0f} MB/s, "
                   f"{mark(g1['MBps'] >= MBPS_1G)} (CPU {g1['cpu_s']:.1f} s on {env['cores']} cores).")
        if "hta_s" in g1:
            x = g1["hta_s"] / g1["analyze_s"]
            out.append(f"- At least {HTA_X_1G}x HTA (parse + temporal + idle-time breakdown) at 1 GB: {x:.1f}x, "
                       f"{mark(x >= HTA_X_1G)}.")
        out.append(f"- Peak memory of the process tree at most {PSS_OVER_SIZE}x the trace at 1 GB: "
                   f"{g1['pss_over_size']:.2f}x ({g1['pss_MB']:.0f} MB PSS), {mark(g1['pss_over_size'] <= PSS_OVER_SIZE)}.")
    if m100:
        out.append(f"- At least {MBPS_100M} MB/s on the 100 MB trace, start-up included: {m100['MBps']:.0f} MB/s, "
                   f"{mark(m100['MBps'] >= MBPS_100M)}.")
    out.append(f"- Start-up under {STARTUP_S} s, pandas and matplotlib imported only when used: "
               f"{env['startup_s']:.3f} s, {mark(env['startup_s'] < STARTUP_S and not env['startup_imports'])}.")
    out.append("- A 10 GB trace analyzed on this machine: " + (
        f"{big['analyze_s']:.0f} s, {big['pss_MB']:,.0f} MB peak PSS, met." if big else
        "not run here (`make bench-analyze-10g` runs it and this report then includes it)."))
    return out

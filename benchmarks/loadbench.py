"""``make bench-analyze``: speed and memory of ``tracekit analyze`` on large traces, against HTA.

Each measurement runs ``tracekit analyze FILE --json`` in a fresh process tree
(the reader's workers included), twice: once timed alone, for its wall time and
CPU time (user + system of the whole tree, from ``getrusage(RUSAGE_CHILDREN)``),
and once under a probe of its peak memory: the sum over the tree's processes of
PSS (proportional set size: a page shared by k processes counts 1/k in each, so
forked workers' shared pages are counted once) and of RSS (each process's
resident pages, shared ones again in every process: an upper bound), sampled
every 20 ms. The probe reads every process's smaps_rollup 50 times a second, CPU
that a 2-core machine busy with tracekit's workers does not have to spare (it
stretched the 1 GB run by about 0.25 s): times come from the runs without it.
HTA is measured alike. The machine's load average is recorded at the start and
the end: on a shared machine wall times stretch, CPU times much less.

Traces come from :mod:`synthetic` (copies of a real trace, answers known).
``--before DIR`` also times the phases of the tracekit checked out in DIR (an
older commit), so the report shows the profile before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(Path(__file__).resolve().parent), str(ROOT)]  # this checkout's tracekit, not an installed one
from synthetic import DEFAULT_FIXTURE, synthesize  # noqa: E402

REPEATS = 5  # tracekit's timings are the median of this many fresh processes (HTA runs once)

# Every command runs in the temporary folder, so that PYTHONPATH, not the current folder, picks tracekit.
# Runs argv[2:] as a child, sampling the memory of its process tree if argv[1] is "memory" (not if
# "time"); prints one JSON line.
_PROBE = """
import json, resource, subprocess, sys, threading, time, psutil
peak = {"pss": 0, "rss": 0}
def sample(p):
    while p.poll() is None:
        pss = rss = 0
        try:
            procs = [psutil.Process(p.pid)]
            procs += procs[0].children(recursive=True)
        except psutil.Error:
            continue
        for q in procs:
            try:
                m = q.memory_full_info()
                pss, rss = pss + m.pss, rss + m.rss
            except psutil.Error:
                pass
        peak["pss"], peak["rss"] = max(peak["pss"], pss), max(peak["rss"], rss)
        time.sleep(0.02)
t = time.perf_counter()
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
if sys.argv[1] == "memory":
    threading.Thread(target=sample, args=(p,), daemon=True).start()
out, err = p.communicate()
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall_s": dt, "cpu_s": ru.ru_utime + ru.ru_stime, "pss_MB": peak["pss"] / 1e6,
                  "rss_MB": peak["rss"] / 1e6, "maxrss_MB": ru.ru_maxrss / 1024, "rc": p.returncode,
                  "stdout": out[-2000000:], "stderr": err[-4000:]}))
"""


def measure(cmd: list[str], env: dict | None = None, memory: bool = True) -> dict:
    """Run ``cmd`` in a fresh process tree: wall_s, cpu_s (tree), pss_MB and rss_MB (tree peaks; 0
    without ``memory``, which also leaves the probe's sampling out of the timing), maxrss_MB
    (largest single process), rc, stdout, stderr."""
    out = subprocess.run([sys.executable, "-c", _PROBE, "memory" if memory else "time", *cmd], capture_output=True,
                         text=True, check=True, env=env, cwd=tempfile.gettempdir())
    return json.loads(out.stdout)


def timed_and_probed(cmd: list[str], env: dict | None = None) -> dict:
    """:func:`measure` of ``cmd`` twice: its wall_s, cpu_s, stdout and stderr from a run without the
    memory probe, and its pss_MB, rss_MB and maxrss_MB from one with it; rc is the first non-zero
    exit status of the two (with that run's stderr), probed_rc the probed run's."""
    probed, timed = measure(cmd, env), measure(cmd, env, memory=False)
    out = {**timed, **{k: probed[k] for k in ("pss_MB", "rss_MB", "maxrss_MB")}, "probed_rc": probed["rc"]}
    if timed["rc"] == 0 and probed["rc"] != 0:
        out.update(rc=probed["rc"], stderr=probed["stderr"])
    return out


# HolisticTraceAnalysis 0.5.0: parse, temporal breakdown, idle-time breakdown (each timed).
_HTA = """
import sys, time
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1])
parse = time.perf_counter() - t
t = time.perf_counter()
a.get_temporal_breakdown(visualize=False)
temporal = time.perf_counter() - t
t = time.perf_counter()
a.get_idle_time_breakdown(visualize=False)
print(parse, temporal, time.perf_counter() - t)
"""

# The phases of `tracekit analyze FILE`, in a fresh process: start-up (the imports made before
# the trace is read), read (decode and tabulate, in the reader's workers, and the tables made
# of their columns), the analyses; wall time, and CPU time of this process and its workers.
_PHASES = """
import json, resource, sys, time
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
t0, c0 = time.perf_counter(), cpu()
import tracekit.cli, tracekit.analysis.runs
preloaded = sorted(m for m in ("pandas", "matplotlib") if m in sys.modules)
t1, c1 = time.perf_counter(), cpu()
from tracekit.trace.reader import load
try:
    from tracekit.trace.chunks import workers_for
except ImportError:  # a tracekit from before trace/chunks.py
    from tracekit.trace.reader import _workers as workers_for
tables = load(sys.argv[1])
t2, c2 = time.perf_counter(), cpu()
from tracekit.analysis.trace_analysis import analyze_trace
analyze_trace(tables)
t3, c3 = time.perf_counter(), cpu()
print(json.dumps({"imports_s": t1 - t0, "read_s": t2 - t1, "analysis_s": t3 - t2, "imports_cpu_s": c1 - c0,
                  "read_cpu_s": c2 - c1, "analysis_cpu_s": c3 - c2, "preloaded": preloaded,
                  "workers": workers_for(__import__("pathlib").Path(sys.argv[1]))}))
"""
PHASE_KEYS = ("imports_s", "read_s", "analysis_s", "imports_cpu_s", "read_cpu_s", "analysis_cpu_s")


def phases(path: Path, src: Path | None = None, repeats: int = REPEATS) -> dict:
    """Where ``tracekit analyze path`` spends its time, phase by phase (median of ``repeats`` fresh
    processes; ``src``: another tracekit checkout to time instead of this one).

    Returns:
        {imports_s, read_s, analysis_s (wall), the same with ``_cpu_s`` (CPU of the process and its
        workers), workers, preloaded (of pandas/matplotlib, those imported at start-up)}.
    Raises:
        subprocess.CalledProcessError: the timing process failed.
    """
    env = {**os.environ, "PYTHONPATH": str(src or ROOT)}
    runs = [json.loads(subprocess.run([sys.executable, "-c", _PHASES, str(path)], capture_output=True, text=True,
                                      check=True, env=env, cwd=tempfile.gettempdir()).stdout.strip().splitlines()[-1])
            for _ in range(repeats)]
    return {**{k: float(np.median([r[k] for r in runs])) for k in PHASE_KEYS},
            "workers": runs[0]["workers"], "preloaded": runs[0]["preloaded"]}


def _trace(mb: int, fixture: Path, workdir: Path) -> tuple[Path, dict]:
    path = workdir / f"synthetic_{mb}MB.pt.trace.json"
    info_path = path.with_suffix(".info.json")
    if path.exists() and info_path.exists():
        return path, json.loads(info_path.read_text())
    print(f"synthesizing {mb} MB from {fixture.name} ...", file=sys.stderr, flush=True)
    info = synthesize(fixture, mb * 10**6, path)
    from tracekit.analysis.trace_analysis import analyze_trace
    from tracekit.trace import load

    info["busy_us"] = info["copies"] * analyze_trace(load(fixture)).row["gpu_busy_us"]  # copies do not overlap
    info_path.write_text(json.dumps(info))
    return path, info


def analyze_row(path: Path, info: dict, repeats: int, before: Path | None = None) -> dict:
    """``tracekit analyze`` on one trace, ``repeats`` times (:func:`timed_and_probed`): the median
    run's times, the peak memory of all runs, checked against the trace's known kernels and GPU busy
    time. With ``before`` (another tracekit checkout), each run is followed by one of that tracekit,
    measured alike: ``before_s`` (median), ``before_walls`` and ``before_pss_MB`` (peak), so that a
    change of the machine's speed during the benchmark (seen here: 20% between two runs of it an
    hour apart) touches both alike.

    Raises:
        RuntimeError: the analysis failed or found other figures than the trace holds.
    """
    runs, earlier = [], []
    for _ in range(repeats):
        for src, into in ((ROOT, runs), (before, earlier)):
            if src is None:
                continue
            with tempfile.TemporaryDirectory() as out:
                into.append(timed_and_probed([sys.executable, "-m", "tracekit", "analyze", str(path), "--json",
                                              "--out", out], {**os.environ, "PYTHONPATH": str(src)}))
    run = sorted(runs, key=lambda r: r["wall_s"])[repeats // 2]
    if failed := next((r for r in runs if r["rc"] != 0), None):
        raise RuntimeError(f"tracekit analyze failed on {path}: {failed['stderr']}")
    found = json.loads(run["stdout"])["runs"][0]
    if found["kernels"] != info["kernels"] or ("busy_us" in info and abs(found["gpu_busy_us"] - info["busy_us"])
                                               > 1e-6 * info["busy_us"]):
        raise RuntimeError(f"{path}: analyze found {found['kernels']} kernels and {found['gpu_busy_us']} µs busy, "
                           f"expected {info['kernels']} and {info.get('busy_us')}")
    mb = info["bytes"] / 1e6
    row = {"size_MB": mb, "events": info["events"], "kernels": found["kernels"], "analyze_s": run["wall_s"],
           "cpu_s": float(np.median([r["cpu_s"] for r in runs])), "MBps": mb / run["wall_s"],
           "pss_MB": max(r["pss_MB"] for r in runs), "rss_MB": max(r["rss_MB"] for r in runs),
           "maxrss_MB": max(r["maxrss_MB"] for r in runs), "walls": sorted(r["wall_s"] for r in runs)}
    row["pss_over_size"] = row["pss_MB"] / mb
    if earlier and all(r["rc"] == 0 for r in earlier):
        row.update(before_s=float(np.median([r["wall_s"] for r in earlier])),
                   before_walls=sorted(r["wall_s"] for r in earlier),
                   before_pss_MB=max(r["pss_MB"] for r in earlier))
    return row


def hta_row(path: Path) -> dict:
    """HTA 0.5.0 on the same trace, once (:func:`timed_and_probed`): hta_s (end to end), parse,
    temporal and idle breakdowns, hta_pss_MB."""
    with tempfile.TemporaryDirectory() as d:
        os.symlink(path, Path(d) / "rank-0.pt.trace.json")
        print(f"running HTA on {path.name} ...", file=sys.stderr, flush=True)
        r = timed_and_probed([sys.executable, "-c", _HTA, d])
    if r["rc"] != 0:
        return {"hta_error": r["stderr"].strip().splitlines()[-1] if r["stderr"].strip() else "failed"}
    parse_s, temporal_s, idle_s = map(float, r["stdout"].split()[-3:])
    return {"hta_s": r["wall_s"], "hta_parse_s": parse_s, "hta_temporal_s": temporal_s, "hta_idle_s": idle_s,
            "hta_pss_MB": r["pss_MB"]}


def startup(repeats: int = REPEATS) -> dict:
    """Start-up: a fresh interpreter importing what ``tracekit analyze`` imports before it reads
    a trace (median wall s of ``repeats``), and whether pandas/matplotlib are among them."""
    code = ("import sys, tracekit.cli, tracekit.analysis.runs, tracekit.trace.reader;"
            "print(','.join(m for m in ('pandas', 'matplotlib') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    walls, loaded = [], ""
    for _ in range(repeats):
        t = time.perf_counter()
        loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                env=env, cwd=tempfile.gettempdir()).stdout.strip()
        walls.append(time.perf_counter() - t)
    return {"startup_s": float(np.median(walls)), "startup_imports": loaded}


def run(sizes_mb: list[int], fixture: Path, workdir: Path, report: Path, hta_sizes_mb: set[int],
        before: Path | None = None, repeats: int = REPEATS) -> str:
    """Synthesize, time ``tracekit analyze`` (and HTA on ``hta_sizes_mb``), write ``report``; return its text."""
    from analyze_report import markdown

    env = {"cpu": _cpu(), "cores": os.cpu_count(), "python": sys.version.split()[0], "fixture": fixture.name,
           "repeats": repeats, "load_start": os.getloadavg(), "before": str(before) if before else None,
           **startup(repeats)}
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for mb in sizes_mb:
        path, info = _trace(mb, fixture, workdir)
        print(f"analyzing {path.name} ({info['bytes'] / 1e6:.0f} MB), {repeats} times ...", file=sys.stderr,
              flush=True)
        row = analyze_row(path, info, repeats, before)
        if mb in hta_sizes_mb:
            row.update(hta_row(path))
        print("timing its phases ...", file=sys.stderr, flush=True)
        row["phases"] = phases(path, repeats=repeats)
        print("timing it with --critical-path ...", file=sys.stderr, flush=True)
        row["critical_path"] = critical_path_row(path, repeats)
        if before:
            row["before"] = phases(path, before, repeats=max(1, repeats // 2))
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "walls"}), file=sys.stderr, flush=True)
    env["load_end"] = os.getloadavg()
    big = report.with_name(report.stem + "-10g.json")
    text = markdown(rows, env, json.loads(big.read_text()) if big.exists() else None)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(text)
    report.with_suffix(".json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
    return text


def critical_path_row(path: Path, repeats: int) -> dict:
    """``tracekit analyze FILE --json`` and the same with ``--critical-path``, each ``repeats``
    times, interleaved (so a change of the machine's speed touches both alike): the median wall
    and CPU time of each, and how much the critical path adds (issue 30: at most as much again)."""
    cmd = [sys.executable, "-m", "tracekit", "analyze", str(path), "--json", "--out", tempfile.mkdtemp()]
    plain, with_cp = [], []
    for _ in range(repeats):
        plain.append(measure(cmd, memory=False))
        with_cp.append(measure([*cmd, "--critical-path"], memory=False))
    bad = [r for r in plain + with_cp if r["rc"] not in (0, 10)]
    if bad:
        raise RuntimeError(f"{path}: tracekit analyze exited {bad[0]['rc']}: {bad[0]['stderr'][-500:]}")
    med = lambda runs, k: float(np.median([r[k] for r in runs]))  # noqa: E731
    return {"plain_s": med(plain, "wall_s"), "critical_path_s": med(with_cp, "wall_s"),
            "plain_cpu_s": med(plain, "cpu_s"), "critical_path_cpu_s": med(with_cp, "cpu_s"),
            "plain_runs_s": [r["wall_s"] for r in plain], "critical_path_runs_s": [r["wall_s"] for r in with_cp]}


def big_run(mb: int, fixture: Path, workdir: Path, out: Path) -> dict:
    """One ``tracekit analyze`` of an ``mb`` MB trace (no HTA, no phases: the 10 GB case); its row,
    written to ``out`` (JSON) for the report."""
    path, info = _trace(mb, fixture, workdir)
    load_start = os.getloadavg()
    print(f"analyzing {path.name} ({info['bytes'] / 1e6:,.0f} MB) once ...", file=sys.stderr, flush=True)
    row = {**analyze_row(path, info, 1), "load_start": load_start, "load_end": os.getloadavg()}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(row, indent=1))
    return row


def _cpu() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python benchmarks/loadbench.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="10,100,1000", help="trace sizes in MB, comma-separated")
    p.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE, help="real trace to replicate")
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "tracekit-bench",
                   help="where synthetic traces are kept between runs (never the repository)")
    p.add_argument("--hta-sizes", default="10,100,1000", help="sizes (MB) on which to time HTA too; '' for none")
    p.add_argument("--repeats", type=int, default=REPEATS, help="fresh processes per figure (the median is shown)")
    p.add_argument("--before", type=Path, default=None,
                   help="a checkout of an earlier tracekit whose phases to time beside this one's")
    p.add_argument("--report", type=Path, default=ROOT / "reports" / "bench-analyze.md")
    p.add_argument("--critical-path-only", action="store_true",
                   help="instead: time analyze with and without --critical-path on each size, into REPORT's "
                        "-critical-path.json (issue 30's target)")
    p.add_argument("--big", type=int, default=None, metavar="MB",
                   help="instead: analyze one MB-sized trace once, into REPORT's -10g.json (make bench-analyze-10g)")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    if a.big:
        print(json.dumps(big_run(a.big, a.fixture, a.workdir, a.report.with_name(a.report.stem + "-10g.json"))))
        return
    if a.critical_path_only:
        rows = {mb: critical_path_row(_trace(mb, a.fixture, a.workdir)[0], a.repeats) for mb in map(int, a.sizes.split(","))}
        out = a.report.with_name(a.report.stem + "-critical-path.json")
        out.write_text(json.dumps({"load": os.getloadavg(), "cpu": _cpu(), "rows": rows}, indent=1))
        print(json.dumps(rows, indent=1))
        return
    print(run([int(s) for s in a.sizes.split(",")], a.fixture, a.workdir, a.report,
              {int(s) for s in a.hta_sizes.split(",") if s}, a.before, a.repeats))
    print(f"({time.perf_counter() - t0:.0f} s in all; report in {a.report})", file=sys.stderr)


if __name__ == "__main__":
    main()

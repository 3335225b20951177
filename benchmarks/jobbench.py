"""What a job's critical path costs: ``tracekit analyze`` of an 8-rank job with and without
``--critical-path``, and ``tracekit whatif JOB --balance-ranks`` (issue 38: at most +50%).

No 8-rank trace is kept in the repository: the job is made in a temporary folder from the real
2-rank NCCL fixture (``../shared/fixtures/dist/hta-trace-filter-sampled-2rank``), each of its two
ranks copied to four ranks with the rank number rewritten (``distributedInfo.rank`` and the file
name; world size 8), beside a run.json that makes every rank calibratable: the job's unprofiled
step (``latency_ms``) 0.8x its profiled iterations, each rank's host time per call 0.5x its
traced iteration. Each command runs ``--repeats`` times in fresh processes, in turn; the medians of
wall and CPU time (of the process and its children) are written as JSON.

    python benchmarks/jobbench.py [--repeats 5] [--out reports/bench-job-critical-path.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("TRACEKIT_FIXTURES", ROOT.parent / "shared" / "fixtures"))
JOB = FIXTURES / "dist" / "hta-trace-filter-sampled-2rank"
RANKS = 8


def make_job(folder: Path, ranks: int = RANKS) -> Path:
    """The ``ranks``-rank job in ``folder`` (module docstring); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    sources = [json.loads(gzip.decompress((JOB / f"sampled_rank-{r}.json.gz").read_bytes())) for r in (0, 1)]
    steps = []
    for rank in range(ranks):
        trace = dict(sources[rank % 2])
        trace["distributedInfo"] = {**trace.get("distributedInfo", {}), "rank": rank, "world_size": ranks}
        (folder / f"host_rank{rank}.1.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(trace).encode()))
        steps.append([e["dur"] / 1e3 for e in trace["traceEvents"]
                      if str(e.get("name", "")).startswith("ProfilerStep")])
    step_ms = statistics.median(max(s[i] for s in steps) for i in range(len(steps[0])))
    manifest = {"model": "dlrm-sampled", "mode": "eager", "device_type": "cuda", "status": "ok", "reason": "",
                "spec": {"model": "dlrm-sampled", "mode": "eager", "batch": 1, "dtype": "fp32", "device": "cuda",
                         "phase": "train-step", "nproc": ranks},
                "latency_ms": {"median": 0.8 * step_ms, "p10": 0.78 * step_ms, "p90": 0.83 * step_ms,
                               "timer": "cuda_events", "over_ranks": "the slowest rank of each iteration"},
                "distributed": {"world_size": ranks, "backend": "nccl", "parallel": "ddp", "ranks": [
                    {"rank": r, "host_ms": {"median": 0.5 * statistics.median(steps[r])}} for r in range(ranks)]},
                "profile": {"iterations": len(steps[0])}}
    (folder / "run.json").write_text(json.dumps(manifest))
    return folder


def measure(cmd: list[str]) -> dict:
    """Wall and CPU seconds (of the process and its children) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 10):
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python benchmarks/jobbench.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="fresh processes per command (the median is kept)")
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-job-critical-path.json")
    a = p.parse_args(argv)
    tracekit = [sys.executable, "-m", "tracekit"]
    with tempfile.TemporaryDirectory(prefix="tracekit-job-") as tmp:
        job = make_job(Path(tmp) / "job")
        out = Path(tmp) / "report"
        commands = {"analyze": [*tracekit, "analyze", str(job), "--json", "--out", str(out)],
                    "analyze_critical_path": [*tracekit, "analyze", str(job), "--json", "--critical-path",
                                              "--out", str(out)],
                    "whatif_balance_ranks": [*tracekit, "whatif", str(job), "--balance-ranks", "--json"]}
        runs: dict[str, list[dict]] = {k: [] for k in commands}
        for _ in range(a.repeats):   # in turn, so that each command sees the same load
            for name, cmd in commands.items():
                runs[name].append(measure(cmd))
    med = {name: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s")} for name, rs in runs.items()}
    result = {"ranks": RANKS, "source": str(JOB.relative_to(FIXTURES.parent)), "repeats": a.repeats,
              "load_average": os.getloadavg()[0], "median": med,
              "critical_path_adds": med["analyze_critical_path"]["wall_s"] / med["analyze"]["wall_s"] - 1,
              "whatif_over_analyze": med["whatif_balance_ranks"]["wall_s"] / med["analyze"]["wall_s"],
              "runs": runs}
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()

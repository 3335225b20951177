"""A run made in several processes: the median process and the spread (issue 17 part 4)."""

import json

import pytest

from tracekit.capture import repeats, timers
from tracekit.manifest import Manifest
from tracekit.manifest.spec import RunSpec


def _process(median: float, samples: list[float], wall: float, status: str = "ok", load: float = 0.5,
             wall_samples: list[float] | None = None) -> Manifest:
    blocks = {"samples": wall_samples, "p10": min(wall_samples), "p90": max(wall_samples)} if wall_samples else {}
    return Manifest.from_dict({
        "status": status, "reason": "" if status == "ok" else "CUDA out of memory", "model": "mlp", "mode": "eager",
        "latency_ms": {"median": median, "samples": samples, "timer": "cuda_events"},
        "wall_ms": {"median": wall, "timer": "torch.utils.benchmark.Timer.blocked_autorange", **blocks},
        "host_load": {"start": {"loadavg_1m": load, "cpus": 16}, "end": {"loadavg_1m": load + 1, "cpus": 16}},
        "compile_s": median})


def test_the_median_process_with_the_spread_across_processes():
    spec = RunSpec("mlp", repeats=3)
    procs = [_process(2.0, [1.9, 2.0, 2.1], 2.1, load=1), _process(3.0, [2.9, 3.0, 3.1], 3.3, load=2),
             _process(2.5, [2.4, 2.5, 2.6], 2.5, load=3)]
    run, pick = repeats.combine(spec, procs)
    assert pick == 2 and run.compile_s == 2.5                 # the median process's own fields
    assert run.latency_ms.median == 2.5 and run.latency_ms.n == 9
    assert run.latency_ms.min == 1.9 and run.latency_ms.max == 3.1
    assert run.latency_ms.p10 == pytest.approx(1.98) and run.latency_ms.p90 == pytest.approx(3.02)
    assert run.repeats.spread == pytest.approx((3.0 - 2.0) / 2.5)
    assert [p.latency_median_ms for p in run.repeats.processes] == [2.0, 3.0, 2.5]
    assert run.wall_ms.median == 2.5 and run.timer_agreement == pytest.approx(0.0)
    assert run.host_load.to_dict() == {"start": {"loadavg_1m": 1, "cpus": 16}, "end": {"loadavg_1m": 4, "cpus": 16}}
    assert run.spec.repeats == 3


def test_the_wall_clock_blocks_of_every_process_are_pooled():
    """Interleaved runs keep one wall-clock sample a block: the run's spread covers every process's blocks."""
    procs = [_process(2.0, [2.0], 2.0, wall_samples=[1.9, 2.0, 2.1]), _process(3.0, [3.0], 3.0, wall_samples=[3.0]),
             _process(2.5, [2.5], 2.5, wall_samples=[2.4, 2.5, 2.6])]
    run, pick = repeats.combine(RunSpec("mlp", repeats=3), procs)
    assert run.wall_ms.median == 2.5 and run.wall_ms.n == 7 and run.wall_ms.processes == 3
    assert (run.wall_ms.min, run.wall_ms.max) == (1.9, 3.0) and run.wall_ms.p10 == pytest.approx(1.96)


def test_a_process_that_fails_makes_the_run_fail_saying_which():
    run, _ = repeats.combine(RunSpec("mlp", repeats=2), [_process(2.0, [2.0], 2.0),
                                                         _process(float("nan"), [], 2.0, status="oom")])
    assert run.status == "oom" and run.reason == "process 2 of 2: CUDA out of memory"


@pytest.mark.slow
def test_trace_with_repeats_and_threads_on_the_cpu(tmp_path):
    """End to end: `tracekit trace --repeats 2 --threads 1`: two processes, one run folder, one trace."""
    from click.testing import CliRunner

    from tracekit.analysis.comparison.compare import compare
    from tracekit.analysis.runs import analyze
    from tracekit.cli import main
    r = CliRunner().invoke(main, ["trace", "--model", "mlp", "--device", "cpu", "--warmup", "1", "--iters", "5",
                                  "--profile-iters", "2", "--threads", "1", "--repeats", "2", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "median of 2 processes (spread " in r.output
    folder = tmp_path / "mlp-t1" / "eager"
    assert sorted(p.suffix for p in folder.iterdir()) == [".gz", ".json"]  # run.json and one trace, no leftovers
    assert [p.name for p in (tmp_path / "mlp-t1").iterdir()] == ["eager"]
    m = json.loads((folder / "run.json").read_text())
    assert m["repeats"]["n"] == 2 and len(m["repeats"]["processes"]) == 2 and m["latency_ms"]["n"] == 10
    assert m["spec"]["threads"] == 1 and m["environment"]["cpu_threads"] == 1 and m["spec"]["batch"] == 4
    assert m["wall_ms"]["timer"] == timers.WALL_TIMER and m["interleaving"]["rounds"] == 5
    row = compare(analyze(tmp_path).runs).iloc[0]
    assert row["processes"] == 2 and row["threads"] == 1 and row["process_spread"] >= 0


@pytest.mark.slow
def test_a_suite_cell_with_repeats_runs_its_processes_and_reports_their_spread(tmp_path):
    """A suite's `repeats` (as workloads/repeats.toml has it), on the CPU with mlp."""
    from tracekit import bench
    from tracekit.manifest.suite_toml import load_suite
    path = tmp_path / "r.toml"
    path.write_text('name = "r"\n[defaults]\nrepeats = 2\nwarmup = 1\niters = 5\nprofile_iters = 2\n'
                    'device = "cpu"\n[[grid]]\nmodel = "mlp"\nmode = "eager"\n')
    suite = load_suite(path)
    [planned] = bench.plan(suite, tmp_path / "traces")
    assert planned.name == "mlp/eager" and planned.spec.repeats == 2 and planned.to_run
    [result] = bench.bench([suite], tmp_path / "traces", tmp_path / "reports")
    m = result.manifests["mlp/eager"]
    assert m.status == "ok" and m.repeats.n == 2 and m.spec == planned.spec
    assert not any(p.done is False for p in bench.plan(suite, tmp_path / "traces"))  # done: not redone
    report = (tmp_path / "reports" / "r" / "report.md").read_text()
    assert "## How far the timing can be trusted" in report and "| mlp b4 fp32 cpu | eager |" in report


@pytest.mark.slow
def test_a_job_made_in_two_processes_keeps_the_median_process_ranks(tmp_path):
    """`--repeats 2 --nproc 2`: each process launches the job's 2 ranks; the run keeps the median
    process's rank traces, its launcher.log and its ranks' host times, with the pooled latency."""
    from tracekit.capture import runner

    spec = RunSpec("mlp", phase="train-step", nproc=2, repeats=2, warmup=0, iters=3, profile_iters=1)
    m = runner.run(spec, tmp_path, log=lambda line: None)
    assert m.status == "ok", m.reason
    folder = tmp_path / m.label / "eager"
    assert sorted(p.name.split(".")[0].rsplit("_", 1)[-1] for p in folder.glob("*.pt.trace.json.gz")) == \
        ["rank0", "rank1"]
    assert (folder / "launcher.log").is_file() and m.distributed.world_size == 2
    assert m.repeats.n == 2 and m.latency_ms.n == 2 * spec.iters
    assert [r.host_ms.n > 0 for r in m.distributed.ranks] == [True, True]
    medians = [p.latency_median_ms for p in m.repeats.processes]
    assert m.latency_ms.median == pytest.approx(sum(medians) / 2)   # the median of two: their mean

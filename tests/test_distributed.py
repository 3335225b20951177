"""tracekit trace --nproc: ranks started by torch.distributed.run under DDP or FSDP2 over gloo
on the CPU, one run folder with a trace per rank and one manifest, analyzed as one job."""

import json
import runpy
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.analysis.comparison.workloads import workloads
from tracekit.analysis.runs import analyze
from tracekit.capture import runner
from tracekit.capture.environment import NO_MULTICAST, child_env
from tracekit.cli import main
from tracekit.manifest.spec import RunSpec

QUICK = ["--iters", "3", "--warmup", "1", "--profile-iters", "2"]
STRAGGLER = Path(__file__).parent / "data" / "distributed" / "straggler.py"
SLEEP_S = runpy.run_path(str(STRAGGLER))["SLEEP_S"]


def test_spec_of_several_ranks():
    spec = RunSpec("mlp", phase="train-step", nproc=2)
    assert spec.label(4, "cpu") == "mlp-train-step-ddp-np2"
    assert RunSpec("mlp", nproc=4, parallel="fsdp").label(4, "cpu") == "mlp-fsdp-np4"
    # one process: the spec written as before these fields existed (a finished run stays done)
    assert "nproc" not in RunSpec("mlp").to_dict() and "parallel" not in RunSpec("mlp").to_dict()
    assert RunSpec.from_dict(spec.to_dict()) == spec


def test_child_processes_keep_nvlink_multicast_off(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    env = child_env(EXTRA="x")
    assert {k: env[k] for k in NO_MULTICAST} == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                                                 "NVSHMEM_DISABLE_NVLS": "1"}
    assert env["EXTRA"] == "x"


def test_bad_nproc_or_parallel_is_a_usage_error(tmp_path):
    out = CliRunner().invoke(main, ["trace", "--model", "mlp", "--nproc", "0", "--out", str(tmp_path)])
    assert out.exit_code == 2 and not any(tmp_path.iterdir())
    with pytest.raises(ValueError, match="parallel one of ddp, fsdp"):
        runner.run(RunSpec("mlp", nproc=2, parallel="zero"), tmp_path, log=lambda m: None)


@pytest.mark.slow
def test_trace_two_ranks_with_ddp_then_analyze_the_job(tmp_path):
    out = CliRunner().invoke(main, ["trace", "--model", "mlp", "--phase", "train-step", "--nproc", "2",
                                    "--out", str(tmp_path), *QUICK])
    assert out.exit_code == 0, out.output
    assert "OMP_NUM_THREADS" not in out.output and "USDT" not in out.output   # torchrun's banner, Kineto's lines
    folder = tmp_path / "mlp-train-step-ddp-np2" / "eager"
    traces = sorted(folder.glob("*.pt.trace.json.gz"))
    assert [t.name.split(".")[0].rsplit("_", 1)[1] for t in traces] == ["rank0", "rank1"]
    assert sorted(p.name for p in folder.iterdir()) == sorted([t.name for t in traces] + ["run.json"])
    manifest = json.loads((folder / "run.json").read_text())
    dist = manifest["distributed"]
    assert manifest["status"] == "ok" and manifest["spec"]["nproc"] == 2
    assert (dist["world_size"], dist["backend"], dist["parallel"], dist["launcher"]) == (
        2, "gloo", "ddp", "torch.distributed.run")
    assert [r["rank"] for r in dist["ranks"]] == [0, 1] and all(r["latency_ms"]["n"] == 3 for r in dist["ranks"])
    # every rank the same calls: the wall-clock blocks as long as the per-call ones, whatever the rank's speed
    assert manifest["interleaving"] == {"rounds": 3, "latency_calls": [1, 1, 1], "wall_calls": 1, "schedule": "fixed"}
    assert manifest["wall_ms"]["n"] == 3 and manifest["wall_ms"]["calls"] == 3
    # the job's latency: the slowest rank of each iteration, so at least each rank's median... and min
    assert manifest["latency_ms"]["min"] >= max(r["latency_ms"]["min"] for r in dist["ranks"])
    assert manifest["profile"]["traces"] == [t.name for t in traces]

    a = analyze(tmp_path)
    assert list(a.runs["rank"]) == [0, 1] and set(a.runs["job"]) == {"mlp-train-step-ddp-np2/eager"}
    assert set(a.runs["parallel"]) == {"ddp x2"} and set(a.runs["backend"]) == {"gloo"}
    ranks = a.table("ranks")
    assert (ranks["communication_us"] > 0).all() and (ranks["collectives"] > 0).all()
    calls = a.table("collectives")
    assert set(calls["where"]) == {"cpu"} and "all_reduce" in set(calls["collective"])   # DDP's gradient buckets
    job = a.table("jobs").iloc[0]
    assert job["ranks"] == 2 and job["backend"] == "gloo" and job["collectives_matched"] >= 2
    assert list(workloads(a.runs)["workload"]) == ["mlp b4 fp32 train-step ddp x2 cpu"]   # not one-process mlp's


@pytest.mark.slow
def test_a_rank_slowed_on_purpose_is_named_the_straggler(tmp_path):
    """Rank 1 sleeps before each forward (a workload file), so it reaches DDP's all-reduce
    late: it is named the straggler, and the wait it caused is its sleep in each profiled
    iteration, within 10%."""
    spec = RunSpec(f"{STRAGGLER}:straggler", phase="train-step", nproc=2, warmup=1, iters=3, profile_iters=3)
    manifest = runner.run(spec, tmp_path, log=lambda m: None)
    assert manifest.status == "ok", manifest.reason
    a = analyze(tmp_path)
    job = a.table("jobs").iloc[0]
    assert job["straggler"] == 1
    expected_us = SLEEP_S * 1e6 * spec.profile_iters
    assert job["straggler_wait_caused_us"] == pytest.approx(expected_us, rel=0.10)
    ranks = a.table("ranks").set_index("rank")
    assert ranks.loc[0, "rank_wait_us"] == pytest.approx(expected_us, rel=0.10) and ranks.loc[1, "rank_wait_us"] < \
        0.1 * expected_us
    assert ranks.loc[0, "rank_wait_us_per_iter"] == pytest.approx(SLEEP_S * 1e6, rel=0.10)
    # gloo: rank 1's excess is the wait it caused per iteration, far beyond the run's noise
    assert job["straggler_excess_ms"] == pytest.approx(SLEEP_S * 1e3, rel=0.10) and job["straggler_excess_ms"] > \
        job["noise_ms"]


@pytest.mark.slow
def test_a_failing_rank_fails_the_run_with_its_reason(tmp_path):
    manifest = runner.run(RunSpec(f"{STRAGGLER}:broken_rank", phase="train-step", nproc=2, warmup=1, iters=2,
                                  profile_iters=1), tmp_path, log=lambda m: None)
    assert manifest.status == "failed" and "rank 1: RuntimeError: rank 1 breaks on purpose" in manifest.reason
    folder = tmp_path / manifest.label / "eager"
    assert json.loads((folder / "run.json").read_text())["status"] == "failed"
    assert sorted(p.name for p in folder.iterdir()) == ["run.json"]      # no rank results left behind


@pytest.mark.slow
def test_fsdp_shards_the_model_over_two_ranks(tmp_path):
    out = CliRunner().invoke(main, ["trace", "--model", "transformer", "--phase", "train-step", "--nproc", "2",
                                    "--parallel", "fsdp", "--out", str(tmp_path), *QUICK])
    assert out.exit_code == 0, out.output
    a = analyze(tmp_path)
    calls = a.table("collectives")
    # FSDP2 gathers each shard before use and reduce-scatters the gradients (gloo: as all_reduce)
    assert {"all_gather", "all_reduce"} <= set(calls["collective"])
    assert a.runs["parallel"].iloc[0] == "fsdp x2"


def test_suites_set_ranks():
    from tracekit.bench import plan
    from tracekit.manifest.suite_toml import load_suite

    root = Path(__file__).parents[1] / "workloads"
    cells = plan(load_suite(root / "distributed-h100.toml"), "/nonexistent", device="cuda")
    assert [p.name for p in cells] == ["vit16x6x384-train-step-ddp-np2/eager",
                                       "vit16x6x384-train-step-ddp-np2/default"]
    assert all(p.spec.nproc == 2 and p.spec.parallel == "ddp" for p in cells)
    names = [p.name for p in plan(load_suite(root / "distributed.toml"), "/nonexistent", device="cuda")]
    assert len(names) == 12 and "vit32x12x768-train-step-fsdp-np2/reduce-overhead" in names


@pytest.mark.slow
def test_a_suite_cell_of_two_ranks_runs_through_the_bench(tmp_path):
    """The bench runs the cell in its own process, which launches the ranks: the same folder,
    and the suite's report shows the job."""
    from tracekit.bench import bench
    from tracekit.manifest.suite_toml import load_suite

    suite = tmp_path / "two.toml"
    suite.write_text('name = "two"\n[defaults]\nphase = "train-step"\nnproc = 2\nwarmup = 1\niters = 2\n'
                     'profile_iters = 2\n[[grid]]\nmodel = "mlp"\nmode = "eager"\n')
    result = bench([load_suite(suite)], tmp_path / "traces", tmp_path / "reports")[0]
    assert [m.status for m in result.manifests.values()] == ["ok"]
    folder = tmp_path / "traces" / "two" / "mlp-train-step-ddp-np2" / "eager"
    assert len(list(folder.glob("*rank*.pt.trace.json.gz"))) == 2
    assert "## Distributed jobs" in (tmp_path / "reports" / "two" / "summary.md").read_text()


@pytest.mark.slow
def test_every_rank_times_its_host_like_a_single_run(tmp_path):
    """Each rank times its host's own time per call, as a single run does, each call after a barrier
    (so the ranks make the same calls and start each together): the job's run.json has rank 0's
    (``host_ms``) and every rank's (``distributed.ranks[i].host_ms``). Over gloo a collective blocks
    the host, so rank 0's time holds its wait at DDP's all-reduce for rank 1, which sleeps 0.2 s
    before each forward."""
    from tracekit.capture.timers import HOST_CALLS

    spec = RunSpec(f"{STRAGGLER}:straggler", phase="train-step", nproc=2, warmup=0, iters=1, profile_iters=1)
    manifest = runner.run(spec, tmp_path, log=lambda m: None)
    assert manifest.status == "ok", manifest.reason
    on_disk = json.loads((tmp_path / manifest.label / "eager" / "run.json").read_text())
    ranks = on_disk["distributed"]["ranks"]
    assert [r["host_ms"]["n"] for r in ranks] == [HOST_CALLS, HOST_CALLS]
    assert on_disk["host_ms"] == ranks[0]["host_ms"]
    assert all(SLEEP_S * 1e3 <= r["host_ms"]["median"] < 3 * SLEEP_S * 1e3 for r in ranks)

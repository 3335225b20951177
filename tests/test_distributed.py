"""tracekit trace --nproc: ranks started by torch.distributed.run under DDP or FSDP2 over gloo
on the CPU, one run folder with a trace per rank and one manifest, analyzed as one job."""

import gzip
import json
import os
import re
import runpy
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from tracekit import models
from tracekit.analysis.attribution.gpu_ops import GRAPH_LAUNCHES
from tracekit.analysis.comparison.workloads import workloads
from tracekit.analysis.runs import analyze
from tracekit.backends import cudagraphs
from tracekit.capture import runner, sharding
from tracekit.capture.environment import CPU_BINDING_ENV, NO_MULTICAST, bind_rank_cpus, child_env
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


@pytest.mark.parametrize("model, units", [("vit16x6x384", ["Block"] * 6), ("hf:gpt2?layers=4", ["GPT2Block"] * 4),
                                          ("transformer", ["TransformerEncoderLayer"] * 2), ("mlp", [])])
def test_fsdp_shards_each_block_of_a_stack(model, units):
    """FSDP2's units: the modules of a ModuleList (the transformer's layers, GPT-2's blocks) or of a
    Sequential of one class (ViT's blocks), not an MLP's Linear, ReLU, Linear (sharded whole)."""
    module, _ = models.build(model, batch=1, phase="train-step")
    assert [type(b).__name__ for b in sharding.blocks(module)] == units


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
    assert sorted(p.name for p in folder.iterdir()) == sorted([t.name for t in traces] + ["launcher.log", "run.json"])
    manifest = json.loads((folder / "run.json").read_text())
    dist = manifest["distributed"]
    assert manifest["status"] == "ok" and manifest["spec"]["nproc"] == 2
    assert (dist["world_size"], dist["backend"], dist["parallel"], dist["launcher"], dist["launcher_log"]) == (
        2, "gloo", "ddp", "torch.distributed.run", "launcher.log")
    # DDP kept the replicas in step: every rank's parameters sum alike, and the steps changed them
    module, _ = models.build("mlp", batch=4, phase="train-step")
    initial = sum(p.detach().double().abs().sum().item() for p in module.parameters())
    assert dist["ranks"][0]["parameter_checksum"] == dist["ranks"][1]["parameter_checksum"] != pytest.approx(initial)
    assert "parameters differ" not in (manifest["note"] or "")
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
def test_a_failing_rank_fails_the_run_in_one_line_with_its_reason(tmp_path):
    """Rank 1 raises in its first forward: the run fails with rank 1's stage and reason, said in one
    line on the terminal; torch.distributed.run's traceback, rank 1's own line and rank 0's (its
    peer gone) are in the run's launcher.log only."""
    out = CliRunner().invoke(main, ["trace", "--model", f"{STRAGGLER}:broken_rank", "--phase", "train-step",
                                    "--nproc", "2", "--out", str(tmp_path), "--warmup", "1", "--iters", "2",
                                    "--profile-iters", "1"])
    assert out.exit_code == 1
    folder = tmp_path / "straggler-broken_rank-train-step-ddp-np2" / "eager"
    manifest = json.loads((folder / "run.json").read_text())
    assert manifest["status"] == "failed" and "rank 1: RuntimeError: rank 1 breaks on purpose" in manifest["reason"]
    assert manifest["stage"] == "reference output" and manifest["distributed"]["launcher_log"] == "launcher.log"
    assert sorted(p.name for p in folder.iterdir()) == ["launcher.log", "run.json"]   # no rank results left behind
    failures = [line for line in out.output.splitlines() if "failed" in line]
    assert failures == [f"[{folder}] failed during reference output: {manifest['reason']}",
                        f"{folder.parent.name}/eager: failed: {manifest['reason']}"], out.output
    assert "Traceback" not in out.output and "ChildFailedError" not in out.output
    log = (folder / "launcher.log").read_text()
    assert "ChildFailedError" in log and f"[{folder} rank 1] failed during reference output" in log
    assert f"[{folder} rank 1] reference output" in out.output   # the ranks' stage lines still show


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


@pytest.mark.slow
@pytest.mark.parametrize("parallel, per_iteration", [
    # DDP's buckets: the transformer's 6.3 MB of gradients fill PyTorch's 1 MiB first bucket and a second
    ("ddp", {"all_reduce": 2}), ("ddp-no-overlap", {"all_reduce": 2}),
    # FSDP2 on its 2 blocks: each gathered before its forward and its backward, its gradients reduced
    # (gloo reduce-scatters with an all_reduce)
    ("fsdp", {"all_gather": 4, "all_reduce": 2}), ("fsdp-no-overlap", {"all_gather": 4, "all_reduce": 2})])
def test_without_overlap_a_step_runs_the_same_collectives(tmp_path, parallel, per_iteration):
    """A no-overlap variant is its twin's program (the same collectives per iteration), only waited for."""
    spec = RunSpec("transformer", phase="train-step", nproc=2, parallel=parallel, warmup=1, iters=2, profile_iters=2)
    manifest = runner.run(spec, tmp_path, log=lambda m: None)
    assert manifest.status == "ok" and manifest.distributed.parallel == parallel, manifest.reason
    calls = analyze(tmp_path).table("collectives")
    counts = calls.groupby(["rank", "iteration", "collective"]).size()
    assert counts.to_dict() == {(r, i, c): n for r in (0, 1) for i in (1, 2) for c, n in per_iteration.items()}
    # a no-overlap run times its overlapped twin in the same processes (tracekit.capture.twins); the
    # profiled window above, after it, is the no-overlap program's own again (the same collectives)
    if parallel.endswith("no-overlap"):
        assert manifest.twin.kind == "overlap" and manifest.twin.names[0].startswith(parallel.split("-")[0] + ":")
        assert manifest.twin.latency_ms.n == manifest.twin.source_latency_ms.n == spec.iters
        assert manifest.twin.latency_ms.over_ranks == "the slowest rank of each call"
    else:
        assert manifest.twin is None


@pytest.mark.slow
def test_a_rank_that_hangs_is_stopped_at_its_time_limit(tmp_path, monkeypatch):
    """Rank 1 never ends its first call's forward, rank 0 waits for it at DDP's all-reduce: each
    rank's time limit stops the job with the stage they were in, in well under PyTorch's own
    10-minute collective timeout."""
    monkeypatch.setenv("TRACEKIT_RANK_TIMEOUT_S", "15")
    t0 = time.monotonic()
    manifest = runner.run(RunSpec(f"{STRAGGLER}:hung_rank", phase="train-step", nproc=2, warmup=1, iters=2,
                                  profile_iters=1), tmp_path, log=lambda m: None)
    assert time.monotonic() - t0 < 60
    assert manifest.status == "failed" and manifest.stage == "compile (first call)"
    assert re.fullmatch(r"RuntimeError: rank [01]: TimeoutError: timed out after 15 s in stage compile \(first call\)",
                        manifest.reason), manifest.reason
    log = (tmp_path / manifest.label / "eager" / "launcher.log").read_text()
    assert "failed during compile (first call): TimeoutError: timed out after 15 s" in log


def test_cuda_graphs_of_a_job_are_skipped_where_they_cannot_be_captured(tmp_path, monkeypatch):
    manifest = runner.run(RunSpec("mlp", "cudagraphs", phase="train-step", nproc=2), tmp_path, log=lambda m: None)
    assert manifest.status == "skipped" and "needs CUDA" in manifest.reason
    assert sorted(p.name for p in (tmp_path / manifest.label / "cudagraphs").iterdir()) == ["run.json"]  # no ranks
    # where torch sees GPUs: ranks sharing them (gloo, collectives on the host), and FSDP2 before torch 2.11
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    ddp = RunSpec("mlp", "cudagraphs", device="cuda", phase="train-step", nproc=2)
    assert "only over NCCL, one GPU per rank: 2 ranks on 1 GPUs would use gloo" in cudagraphs.unavailable(ddp)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert cudagraphs.unavailable(ddp) is None
    fsdp = RunSpec("mlp", "cudagraphs", device="cuda", phase="train-step", nproc=2, parallel="fsdp-no-overlap")
    monkeypatch.setattr(cudagraphs, "_torch_version", lambda: (2, 10))
    assert cudagraphs.unavailable(fsdp).startswith("FSDP2 cannot be captured in a CUDA graph before torch 2.11")
    monkeypatch.setattr(cudagraphs, "_torch_version", lambda: (2, 11))
    assert cudagraphs.unavailable(fsdp) is None


def _gpus(n: int):
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return pytest.mark.skipif(found < n, reason=f"needs {n} GPUs (NCCL, one per rank); torch sees {found}")


def _trace_events(folder: Path, rank: int) -> list[dict]:
    (path,) = folder.glob(f"*_rank{rank}.*.pt.trace.json.gz")
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


@pytest.mark.gpu
@_gpus(2)
def test_cuda_graphs_capture_a_ddp_training_step_with_its_all_reduces(tmp_path):
    """The whole DDP step of a launch-bound model captured on 2 GPUs: faster than eager, the
    replicas' weights equal after the replays (and trained by them), and the all-reduces inside
    the graph (NCCL kernels in the profiled window, no collective issued from Python)."""
    spec = RunSpec("transformer", phase="train-step", nproc=2, device="cuda", warmup=2, iters=10, profile_iters=2)
    eager, graphed = (runner.run(replace(spec, mode=mode), tmp_path, log=lambda m: None)
                      for mode in ("eager", "cudagraphs"))
    assert eager.status == "ok" and graphed.status == "ok", graphed.reason
    assert graphed.distributed.backend == "nccl" and graphed.diff_ok
    assert "the whole training step with its collectives (ddp, 2 ranks)" in graphed.backend["cuda_graph"]
    module, _ = models.build("transformer", phase="train-step")
    initial = sum(p.detach().double().abs().sum().item() for p in module.parameters())
    sums = [r.parameter_checksum for r in graphed.distributed.ranks]
    assert sums[0] == sums[1] != pytest.approx(initial) and "parameters differ" not in (graphed.note or "")
    assert graphed.latency_ms.median < eager.latency_ms.median
    events = _trace_events(tmp_path / graphed.label / "cudagraphs", 0)
    names = [e.get("name", "") for e in events]
    assert sum(e.get("cat") == "kernel" and "nccl" in e["name"].lower() for e in events) >= spec.profile_iters
    assert sum(n in GRAPH_LAUNCHES for n in names) == spec.profile_iters and "record_param_comms" not in names


@pytest.mark.gpu
@_gpus(2)
@pytest.mark.parametrize("mode, parallel", [("cudagraphs", "fsdp"), ("cudagraphs-compile", "ddp")])
def test_other_cuda_graph_jobs_run_on_two_gpus(tmp_path, mode, parallel):
    spec = RunSpec("transformer", mode, phase="train-step", nproc=2, parallel=parallel, device="cuda", warmup=2,
                   iters=5, profile_iters=2)
    manifest = runner.run(spec, tmp_path, log=lambda m: None)
    assert manifest.status == "ok", manifest.reason
    sums = {r.parameter_checksum for r in manifest.distributed.ranks}
    assert len(sums) == 1 and (None in sums) == parallel.startswith("fsdp")


@pytest.mark.gpu
@_gpus(2)
@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_without_overlap_no_collective_runs_under_computation(tmp_path, parallel):
    """On 2 GPUs over NCCL the overlapped program hides some communication under computation, its
    no-overlap twin (the same collectives, waited for) next to none."""
    spec = RunSpec("vit16x6x384", phase="train-step", nproc=2, device="cuda", warmup=2, iters=3, profile_iters=2)
    overlap = {}
    for variant in (parallel, f"{parallel}-no-overlap"):
        out = tmp_path / variant
        manifest = runner.run(replace(spec, parallel=variant), out, log=lambda m: None)
        assert manifest.status == "ok", manifest.reason
        overlap[variant] = analyze(out).runs["comm_overlap_us"].sum()   # both ranks, µs
        assert (manifest.twin is not None) == variant.endswith("no-overlap")   # its overlapped twin, timed alongside
    assert overlap[parallel] > 10 * max(overlap[f"{parallel}-no-overlap"], 1.0), overlap


def test_exclusive_binding_gives_each_rank_its_own_cpus(monkeypatch):
    """Of 8 CPUs and 2 ranks, rank 1 takes the upper 4, every thread of the process bound to them."""
    bound = {}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {7, 6, 5, 4, 3, 2, 1, 0})
    monkeypatch.setattr(os, "sched_setaffinity", lambda tid, cpus: bound.__setitem__(tid, list(cpus)))
    monkeypatch.delenv(CPU_BINDING_ENV, raising=False)
    assert bind_rank_cpus(1, 2) == [] and bound == {}
    monkeypatch.setenv(CPU_BINDING_ENV, "exclusive")
    assert bind_rank_cpus(1, 2) == [4, 5, 6, 7]
    threads = {int(t) for t in os.listdir("/proc/self/task")}
    assert set(bound) <= threads and os.getpid() in bound and all(c == [4, 5, 6, 7] for c in bound.values())
    assert bind_rank_cpus(0, 16) == []   # fewer CPUs than ranks: left alone
    monkeypatch.setenv(CPU_BINDING_ENV, "node")
    with pytest.raises(ValueError, match="must be 'exclusive' or unset"):
        bind_rank_cpus(0, 2)


@pytest.mark.slow
def test_a_bound_job_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(CPU_BINDING_ENV, "exclusive")
    manifest = runner.run(RunSpec("mlp", phase="train-step", nproc=2, warmup=0, iters=1, profile_iters=1), tmp_path,
                          log=lambda m: None)
    assert manifest.status == "ok", manifest.reason
    share = len(os.sched_getaffinity(0)) // 2
    assert f"each rank bound to CPUs of its own (TRACEKIT_CPU_BINDING=exclusive): {share} CPUs a rank" in manifest.note

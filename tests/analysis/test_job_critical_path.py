"""A job's critical path and its what-ifs (issue 38), on hand-made 2-rank traces with known answers:
a late rank at an all-reduce, compute waiting on the comm stream without cuda_sync events, a host
straggler, a GPU straggler; each rank calibrated; a job lacking a rank."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from tracebuilder import TraceBuilder, add_gpu_sync, add_host_call, add_sync_call, write_run

import tracekit
from tracekit.analysis.critical_path import analyze, reasons
from tracekit.analysis.critical_path.edits import Edit, Replay
from tracekit.analysis.critical_path.predict import predict
from tracekit.analysis.critical_path.prediction import per_iteration
from tracekit.cli import main
from tracekit.report.path_text import path_note
from tracekit.trace import load

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
PERIOD, TRANSFER, STALL = 1000.0, 100.0, 30.0


def _job(extra_host=(0.0, 0.0), gemm_us=(300.0, 300.0), steps=3, events=False, sync=True, launches=0,
         host_speed=(1.0, 1.0), stalls=(None, None)) -> list[TraceBuilder]:
    """Two ranks of a data-parallel step, ``steps`` times back to back, step i from ``o``; on each rank:
    a prep kernel launched at o+2, ``extra_host`` µs of host time (a sleep), a gemm of ``gemm_us`` on
    stream 7 launched at o+10 after the sleep, starting 6 µs after its launch call began; an all_reduce
    (Seq = step) on stream 20, launched 10 µs after the gemm, arriving when the gemm ends and ending
    TRANSFER after the last rank arrived (``end``); the optimizer's kernel (50 µs, stream 7), launched
    10 µs after the all_reduce, starting 2 µs after it ends; a cudaDeviceSynchronize from 10 µs after that
    launch to 2 µs after the optimizer ends; the step's marker to 1 µs after, the next step 1 µs later:
    each step lasts 16 + the last arrival's sleep and gemm + 100 + 55 µs, 56 more than its GPU work from
    the previous one's end. ``events``: with the cuda_sync events of both cross-stream waits (else none,
    as in the real fixture). ``sync`` False: no synchronize, each step's marker 40 µs + the sleep, a step
    every PERIOD µs. ``launches``: that many launches of a 1 µs kernel after the prep's, back to back from
    o+6, each call 4 x ``host_speed`` µs and 2 x ``host_speed`` µs apart (a rank's host running the same
    calls slower; a pair: per rank), everything after them on that rank later by their span. ``stalls``:
    per rank, the launch before which the host stalls STALL µs (None: none), as hosts now and then do."""
    out = [TraceBuilder(distributed={"rank": r, "world_size": 2, "backend": "nccl"}) for r in (0, 1)]
    o = 0.0
    launches = (launches, launches) if isinstance(launches, int) else launches   # per rank
    pre = [launches[r] * 6 * host_speed[r] + (STALL if stalls[r] is not None else 0) for r in (0, 1)]
    for i in range(steps):
        arrive = [o + 16 + extra_host[r] + pre[r] + gemm_us[r] for r in (0, 1)]
        end = max(arrive) + TRANSFER
        for r, t in enumerate(out):
            x = o + extra_host[r] + pre[r]
            t.step(i + 1, o, end + 55 - o if sync else 40 + extra_host[r] + pre[r])
            t.kernel("prep", start=o + 8, dur=5, launch_at=o + 2)
            for j in range(launches[r]):
                at = o + 6 + j * 6 * host_speed[r] + (STALL if stalls[r] is not None and j >= stalls[r] else 0)
                t.kernel("tiny", start=at + 4 * host_speed[r] + 1, dur=1, launch_at=at, launch_dur=4 * host_speed[r])
            gemm = t.kernel("gemm", start=x + 16, dur=gemm_us[r], launch_at=x + 10)
            t.cpu_op("record_param_comms", x + 18, 8, **{"Collective name": "allreduce", "Seq": i + 1,
                                                          "Process Group Name": "0", "In msg nelems": 256,
                                                          "dtype": "Float"})
            reduce = t.kernel(NCCL, start=arrive[r], dur=end - arrive[r], stream=20, launch_at=x + 20)
            t.kernel("multi_tensor_apply_kernel", start=end + 2, dur=50, launch_at=x + 30)
            if sync:
                add_sync_call(t, "cudaDeviceSynchronize", at=x + 40, dur=end + 54 - x - 40)
            if events:
                for at, waiting, recorded, record_of in ((x + 19, 20, 7, gemm), (x + 29, 7, 20, reduce)):
                    rec = add_host_call(t, "cudaEventRecord", at=at - 2, dur=1)
                    wait = add_host_call(t, "cudaStreamWaitEvent", at=at - 1, dur=1)
                    add_gpu_sync(t, start=at, dur=1, stream=waiting, correlation=wait, wait_on_stream=recorded,
                                 wait_on_cuda_event_record_corr_id=rec)
        o = end + 56 if sync else o + PERIOD
    return out


def _ranks(builders, tmp_path):
    return [(r, load(t.write(tmp_path / f"rank{r}.pt.trace.json.gz"))) for r, t in enumerate(builders)]


def _split(result, rank, step=2) -> dict:
    row = result.split.set_index(["rank", "step"]).loc[(rank, step)]
    return {k.removesuffix("_us"): round(v, 6) for k, v in row.items() if k.endswith("_us") and v}


@pytest.mark.parametrize("events", [True, False])
def test_a_late_rank_is_rank_wait_on_the_path_with_or_without_cuda_sync_events(tmp_path, events):
    # rank 1's host sleeps 200 µs: it arrives at the all_reduce at 516 µs into the step, rank 0 at 316; the
    # all_reduce ends at 616 on both, the optimizer's kernel 618-668, the sync returns at 670, the step's
    # marker ends at 671
    result = analyze(_ranks(_job(extra_host=(0, 200), events=events), tmp_path))
    assert result.iterations["latency_us"].tolist() == [671.0] * 6
    # rank 0: after the sync's return (2) and its marker (1), its optimizer kernel (50) after a 2 µs stream
    # wait on the all_reduce, whose last 100 µs are the transfer after rank 1 arrived; before that the path
    # is on rank 1 (its gemm, launches and sleep): 516 µs waiting for another rank
    assert _split(result, 0) == {"latency": 671.0, "cpu": 1.0, "sync": 2.0, "kernel": 50.0, "stream_wait": 2.0,
                                 "comm": 100.0, "rank_wait": 516.0}
    # rank 1, the last to arrive: its sleep and launches, the gemm's 2 µs launch latency, the gemm, the
    # all_reduce's transfer and the optimizer; not 300 µs of launch latency for a kernel that waited
    assert _split(result, 1) == {"latency": 671.0, "cpu": 207.0, "launch": 8.0, "launch_latency": 2.0,
                                 "kernel": 350.0, "comm": 100.0, "sync": 2.0, "stream_wait": 2.0}
    inferred = [m for m in result.missing if m["code"] == reasons.INFERRED_WAITS]
    assert len(inferred) == (0 if events else 2) and all(m["waits"] == 6 and m["after_collective"] == 3
                                                         for m in inferred)
    assert all(path_note(m).startswith(f"rank {m['rank']}: ") and "6 cross-stream waits" in path_note(m)
               and "(3 of them after a collective)" in path_note(m) for m in inferred)


def test_balancing_removes_a_host_stragglers_sleep(tmp_path):
    ranks = _ranks(_job(extra_host=(0, 200)), tmp_path)
    job = predict(ranks, [Edit("balance-ranks")])
    assert job.modelled_ms * 1e3 == pytest.approx(671)
    # rank 1's 200 µs sleep taken away: both arrive at 316, the all_reduce ends at 416, the step at 471
    assert job.predicted_ms * 1e3 == pytest.approx(471)
    excess = job.balanced.groupby("rank")[["host_excess_us", "gpu_excess_us"]].sum()
    assert excess.loc[1].tolist() == pytest.approx([600.0, 0.0]) and 0 not in excess.index   # 200 µs in each of 3 steps
    assert job.balanced["matched"].all()                                      # piece by piece
    # after balancing rank 0's path stays on rank 0, as its twin without the sleep would
    assert "rank_wait" not in _split(job.after, 0) and _split(job.after, 0)["kernel"] == 350.0


def test_balancing_removes_a_gpu_stragglers_extra_kernel_time(tmp_path):
    job = predict(_ranks(_job(gemm_us=(300, 450)), tmp_path), [Edit("balance-ranks")])
    assert job.modelled_ms * 1e3 == pytest.approx(621)       # rank 1 arrives at 466
    assert job.predicted_ms * 1e3 == pytest.approx(471)      # its gemm as long as rank 0's
    assert job.balanced.groupby("rank")["gpu_excess_us"].sum().to_dict() == pytest.approx({1: 450.0})


def test_balancing_keeps_a_uniformly_slower_host_and_takes_a_sleep(tmp_path):
    """Rank 1's host runs the same 20 launches 1.5x slower: a slower host, which balancing leaves (a
    twin without a straggler's delay keeps it too); with a 200 µs sleep beside it, the sleep is what is
    taken, and the prediction is that twin's iteration."""
    slow = _ranks(_job(launches=20, host_speed=(1.0, 1.5)), tmp_path / "slow")
    job = predict(slow, [Edit("balance-ranks")])
    assert job.modelled_ms * 1e3 == pytest.approx(471 + 20 * 6 * 1.5)      # the launches before rank 1's gemm
    assert job.predicted_ms == pytest.approx(job.modelled_ms)
    assert job.balanced.empty or job.balanced["host_excess_us"].sum() < 1
    sleeps = predict(_ranks(_job(extra_host=(0, 200), launches=20, host_speed=(1.0, 1.5)), tmp_path / "sleep"),
                     [Edit("balance-ranks")])
    assert sleeps.modelled_ms == pytest.approx(job.modelled_ms + 0.2)
    assert sleeps.predicted_ms == pytest.approx(job.modelled_ms, rel=0.02)        # the twin's, within 2%
    assert sleeps.balanced.groupby("rank")["host_excess_us"].sum().to_dict() == pytest.approx({1: 600}, rel=0.05)


def test_balancing_takes_a_stragglers_extra_launches_whole(tmp_path):
    """Rank 1 launches 3 more kernels than rank 0 in each step (20 against 23): the pieces are aligned by
    what they do, the 3 extra launches and their kernels are taken, and the prediction is the job with
    20 on both."""
    twin = predict(_ranks(_job(launches=20), tmp_path / "twin"), [Edit("balance-ranks")])
    job = predict(_ranks(_job(launches=(20, 23)), tmp_path / "extra"), [Edit("balance-ranks")])
    assert job.modelled_ms * 1e3 == pytest.approx(twin.modelled_ms * 1e3 + 3 * 6)
    assert job.predicted_ms == pytest.approx(twin.modelled_ms, abs=0.002)
    assert not job.balanced["matched"].any() and set(job.balanced["rank"]) == {1}
    taken = job.balanced[["host_excess_us", "gpu_excess_us"]].sum()
    assert taken["gpu_excess_us"] == pytest.approx(3 * 3 * 1.0)          # 3 tiny kernels in each of 3 steps
    assert 3 * 3 * 4 <= taken["host_excess_us"] <= 3 * 3 * 6             # their calls, and the CPU between them


def test_balancing_compares_the_threads_that_do_the_same_work(tmp_path):
    """Rank 1 has a side thread (a watchdog's query) whose first call comes before its main thread's: its
    threads are not compared with rank 0's by the order of their first calls (rank 0's main thread against
    rank 1's watchdog, every piece unmatched and taken whole: on 4 H200s, 2.5-5.4 ms an iteration from
    every rank), but by the calls they share; the balanced job gains nothing."""
    builders = _job(launches=20)
    for i in range(3):   # a step every 591 µs (471 + the 20 launches' 120)
        add_host_call(builders[1], "cudaEventQuery", at=i * 591 + 1, dur=0.5, tid=99)
    job = predict(_ranks(builders, tmp_path), [Edit("balance-ranks")])
    assert job.predicted_ms == pytest.approx(job.modelled_ms)
    assert job.balanced[["host_excess_us", "gpu_excess_us"]].to_numpy().sum() < 5   # a 0.5 µs call's neighbours


def test_a_host_that_stalls_as_often_as_the_others_keeps_its_stalls(tmp_path):
    """Every host stalls now and then; a rank's stalls are its excess only beyond the other ranks': with
    one 30 µs stall on each rank (at another launch) and rank 1's 200 µs sleep, balancing takes the sleep
    alone (the twin without it keeps both stalls)."""
    stalled = _ranks(_job(extra_host=(0, 200), launches=20, stalls=(5, 12)), tmp_path / "stalled")
    job = predict(stalled, [Edit("balance-ranks")])
    taken = job.balanced.groupby("rank")["host_excess_us"].sum().to_dict()
    assert taken == pytest.approx({1: 600}, rel=0.05)
    twin = predict(_ranks(_job(launches=20, stalls=(5, 12)), tmp_path / "twin"), [Edit("balance-ranks")])
    assert job.predicted_ms == pytest.approx(twin.modelled_ms, rel=0.02)


def test_a_balanced_job_gains_nothing_from_balancing(tmp_path):
    job = predict(_ranks(_job(), tmp_path), [Edit("balance-ranks")])
    assert job.predicted_ms == pytest.approx(job.modelled_ms) and job.balanced.empty


def test_overlap_comm_keeps_the_optimizer_waiting_and_is_never_slower(tmp_path):
    t = _job(extra_host=(0, 200))
    # compute launched before the all_reduce that waited for it without reading it: a kernel of the
    # next layer's backward on stream 7, held by the all_reduce on both ranks
    ranks = _ranks(t, tmp_path)
    job = predict(ranks, [Edit("overlap-comm")])
    # the only kernel after the all_reduce is the optimizer's, launched after it: it keeps waiting
    assert job.predicted_ms == pytest.approx(job.modelled_ms)
    for r, b in enumerate(t):   # a backward kernel launched before the all_reduce, run after it
        for i in range(3):
            o = i * PERIOD + (200 if r else 0)
            b.kernel("gemm_dgrad", start=max(316, 516) + i * PERIOD + TRANSFER + 1, dur=1, launch_at=o + 15,
                     launch_dur=1)
    job = predict(_ranks(t, tmp_path), [Edit("overlap-comm")])
    assert job.predicted_ms <= job.modelled_ms


def test_overlap_comm_lets_compute_run_beside_a_gradient_reduction(tmp_path):
    """One rank, two gradient buckets a step (DDP's): gemm1, its all_reduce (300 µs); gemm2, launched
    before the last all_reduce, held behind the first (a cross-stream wait it did not need); the second
    all_reduce after gemm2; the optimizer's kernel, launched after the last all_reduce, after it."""
    t = TraceBuilder(distributed={"rank": 0, "world_size": 1, "backend": "nccl"})
    for i in range(3):
        o = i * PERIOD
        t.step(i + 1, o, 60)
        t.kernel("gemm", start=o + 10, dur=100, launch_at=o + 2)
        for seq, at in ((2 * i + 1, o + 10), (2 * i + 2, o + 30)):
            t.cpu_op("record_param_comms", at - 2, 6, **{"Collective name": "allreduce", "Seq": seq,
                                                         "Process Group Name": "0", "dtype": "Float"})
        t.kernel(NCCL, start=o + 110, dur=300, stream=20, launch_at=o + 10)
        t.kernel("gemm", start=o + 412, dur=100, launch_at=o + 20)
        t.kernel(NCCL, start=o + 512, dur=100, stream=20, launch_at=o + 30)
        t.kernel("multi_tensor_apply_kernel", start=o + 614, dur=20, launch_at=o + 40)
    tables = load(t.write(tmp_path / "r.pt.trace.json.gz"))
    job = predict(tables, [Edit("overlap-comm")])
    assert job.modelled_ms * 1e3 == pytest.approx(634)
    # gemm2 runs beside the first all_reduce (111-211), the second all_reduce after the first (410-510),
    # the optimizer after it (512-532)
    assert job.predicted_ms * 1e3 == pytest.approx(532, abs=2)


def test_cuda_graphs_on_a_job_keep_the_collectives(tmp_path):
    job = predict(_ranks(_job(gemm_us=(300, 450)), tmp_path), [Edit("cuda-graphs")], replay=Replay(1.0, 1.0))
    # one replay a rank: its host time gone, but rank 0 still waits for rank 1's longer gemm at the all_reduce
    assert job.predicted_ms < job.modelled_ms
    after = _split(job.after, 0)
    assert after["rank_wait"] > 450 and after["comm"] == 100.0 and "cpu" not in after


def test_cuda_graphs_replay_each_ranks_own_kernels(tmp_path):
    from tracekit.analysis.critical_path import prepare
    from tracekit.analysis.critical_path.edits import apply
    from tracekit.analysis.critical_path.kinds import HOST

    g, step, _, _ = prepare(_ranks(_job(), tmp_path))
    edited = apply(g, step, [Edit("cuda-graphs")], {0: 1.0, 1: 1.0}, 1.0, Replay(5.0, 1.0, per_kernel_us=10.0))
    host = (g.kind == HOST) & (step >= 0)
    # one replay a rank and step, its host cost 5 µs + 10 µs for each of the rank's 4 GPU ops; the rest free
    assert sorted(edited.base[host].tolist()) == [0.0] * (host.sum() - 6) + [45.0] * 6


def test_the_per_iteration_means_leave_out_each_ranks_first_iteration(tmp_path):
    result = analyze(_ranks(_job(extra_host=(0, 200), steps=3), tmp_path))
    split = result.split.assign(latency_us=[1.0, 2.0, 2.0, 5.0, 4.0, 4.0])
    assert per_iteration(split)["latency_us"] == 3.0          # (2 + 2 + 4 + 4) / 4: rows of rank 0 and 1
    one = analyze(_ranks(_job(steps=2), tmp_path))
    assert per_iteration(one.split.assign(latency_us=[1.0, 2.0, 3.0, 4.0]))["latency_us"] == 2.5


def _job_folder(tmp_path, builders, latency_ms, host_ms, samples=None):
    """A job's run folder: run.json (the job's unprofiled ``latency_ms`` median, its ``samples``, each
    rank's ``host_ms`` median, None for none) beside each rank's trace."""
    folder = write_run(tmp_path / "job" / "eager", None, latency_ms=(latency_ms,) * 3, distributed={
        "world_size": 2, "backend": "nccl", "ranks": [
            {"rank": r, "host_ms": {"median": h} if h is not None else None} for r, h in enumerate(host_ms)]})
    manifest = json.loads((folder / "run.json").read_text())
    manifest["latency_ms"]["samples"] = samples
    (folder / "run.json").write_text(json.dumps(manifest))
    for r, t in enumerate(builders):
        t.write(folder / f"host_rank{r}.1.pt.trace.json.gz")
    return folder


def test_each_rank_is_calibrated_from_its_own_host_time(tmp_path):
    # no synchronize: traced markers of 40 µs (rank 0) and 240 µs (rank 1), unprofiled host times 20 and
    # 220 µs per call; rank 1's 204 µs between two calls run no op (its 200 µs sleep): idle, which the
    # profiler does not slow, so each rank's host is at x0.5 and x16/36 of its traced time less the idle,
    # then both stretched together to meet the unprofiled step of 0.600 ms (the sleeping rank's host)
    folder = _job_folder(tmp_path, _job(extra_host=(0, 200), sync=False), 0.600, (0.020, 0.220))
    p = tracekit.whatif(folder, host_faster=2)
    h = p.host_scale_by_rank
    assert p.calibrated and h[1] / h[0] == pytest.approx((16 / 36) / 0.5) and p.gpu_scale == 1.0
    assert p.modelled_latency_ms == pytest.approx(0.600, rel=0.003) and p.ranks == [0, 1] and not p.ranks_missing
    assert p.predicted_latency_ms < p.modelled_latency_ms
    assert "host-bound: each rank's host time x" in " ".join(p.notes)
    d = p.to_dict()
    assert d["host_scale_by_rank"] == {"0": round(h[0], 4), "1": round(h[1], 4)} and d["world_size"] == 2
    assert f"calibrated to the unprofiled step 0.600 ms (host time rank 0 x{h[0]:.2f}, rank 1 x{h[1]:.2f}" in str(p)
    # each trace's own analysis too: rank 0 alone is GPU-bound (its all_reduce waits), so its host factor is
    # its own unprofiled host time over its traced 40 µs, not rank 0's for every rank as the job's host_ms
    runs = tracekit.analyze(folder).runs.set_index("rank")
    assert runs.loc[0, "cp_host_scale"] == pytest.approx(0.5) and runs.loc[1, "cp_host_scale"] != 0.5
    # with the synchronize each step holds its wait for the GPU, unprofiled too: factors of 1 meet it
    folder = _job_folder(tmp_path / "s", _job(extra_host=(0, 200)), 0.671, (0.671, 0.671))
    p = tracekit.whatif(folder, balance_ranks=True)
    assert p.calibrated and p.host_scale_by_rank == {0: 1.0, 1: 1.0}
    assert p.predicted_latency_ms == pytest.approx(0.471) and p.to_dict()["rank_excess"] == [
        {"rank": 0, "host_excess_us": 0.0, "gpu_excess_us": 0.0}, {"rank": 1, "host_excess_us": 200.0,
                                                                  "gpu_excess_us": 0.0}]
    assert "balancing takes from rank 1 0.200 ms of host and 0.000 ms of GPU work per iteration" in str(p)


def test_a_what_if_is_shown_beside_the_twin_it_makes_measured_in_the_same_process(tmp_path):
    """run.json's twin (tracekit.capture.twins) is the balanced job: balance-ranks is shown beside it,
    with its error; overlap-comm is not what that twin is, and gets none."""
    folder = _job_folder(tmp_path, _job(extra_host=(0, 200)), 0.671, (0.671, 0.671))
    manifest = json.loads((folder / "run.json").read_text())
    manifest["twin"] = {"kind": "balanced", "names": ["balanced: rank 1 without its delay"], "rounds": 3,
                        "latency_ms": {"median": 0.5}, "source_latency_ms": {"median": 0.68}}
    (folder / "run.json").write_text(json.dumps(manifest))
    p = tracekit.whatif(folder, balance_ranks=True)
    assert p.twin == {"what": "balanced: rank 1 without its delay", "latency_ms": 0.5,
                      "error": round(p.predicted_latency_ms / 0.5 - 1, 4)}
    assert p.to_dict()["twin"] == p.twin
    assert ("measured in the same process (its twin: balanced: rank 1 without its delay): 0.500 ms (the "
            f"prediction {p.predicted_latency_ms / 0.5 - 1:+.1%})") in str(p)
    assert tracekit.whatif(folder, overlap_comm=True).twin is None
    assert tracekit.whatif(folder, balance_ranks=True, overlap_comm=True).twin is None


def test_a_job_the_fit_cannot_meet_without_shrinking_kernels_is_an_uncalibrated_bound(tmp_path):
    folder = _job_folder(tmp_path, _job(extra_host=(0, 200), sync=False), 0.300, (0.020, 0.220))
    p = tracekit.whatif(folder, overlap_comm=True)
    assert not p.calibrated and p.gpu_scale == 1.0 and "no kernel is shrunk" in " ".join(p.notes)
    assert "UNCALIBRATED: the fit could not meet the unprofiled 0.300 ms" in str(p)
    # without host times per rank a GPU-bound job cannot be calibrated either
    gpu_bound = _job_folder(tmp_path / "g", _job(gemm_us=(2000, 2000)), 2.0, (None, None))
    q = tracekit.whatif(gpu_bound, cuda_graphs=True)
    assert not q.calibrated and "says nothing of the hosts" in " ".join(q.notes)


def test_a_job_lacking_a_rank_is_predicted_from_the_others_and_names_it(tmp_path):
    folder = _job_folder(tmp_path, _job(extra_host=(0, 200))[:1], 0.671, (0.671, 0.671))
    p = tracekit.whatif(folder, balance_ranks=True)
    assert p.ranks == [0] and p.ranks_missing == [1] and p.world_size == 2
    r = CliRunner().invoke(main, ["whatif", str(folder), "--balance-ranks"])
    assert r.exit_code == 10 and "lacks rank 1 of 2" in r.output
    (folder / "host_rank1.1.pt.trace.json.gz").write_bytes(b"\x1f\x8b\x08\x00broken")   # a truncated rank
    r = CliRunner().invoke(main, ["whatif", str(folder), "--balance-ranks", "--json"])
    out = json.loads(r.output)
    assert r.exit_code == 10 and out["ranks_missing"] == [1] and out["unreadable"][0]["code"] == 5
    a = tracekit.analyze(folder)                       # analyze reads the other rank all the same
    assert a.runs["rank"].tolist() == [0] and len(a.errors) == 1


@pytest.mark.parametrize("spread_ms, named", [(0.2, False), (0.05, True)])
def test_a_straggler_is_named_only_beyond_the_runs_noise(tmp_path, spread_ms, named):
    # rank 1's gemm is 100 µs longer: it arrives last at every all_reduce (the wait rules name it), but it
    # changes the step by 0.1 ms, within a spread of step times (p10-p90) of 0.2 ms and beyond one of 0.05
    samples = [0.571 - spread_ms / 2, 0.571, 0.571 + spread_ms / 2] * 4
    folder = _job_folder(tmp_path, _job(gemm_us=(300, 400)), 0.571, (0.571, 0.571), samples)
    manifest = json.loads((folder / "run.json").read_text())
    manifest["latency_ms"].update(p10=min(samples), p90=max(samples))
    (folder / "run.json").write_text(json.dumps(manifest))
    job = tracekit.analyze(folder)["jobs"].iloc[0]
    assert job["noise_ms"] == pytest.approx(spread_ms) and job["straggler_excess_ms"] == pytest.approx(0.1)
    assert math.isnan(job["balance_could_save_ms"])            # absent without the job's critical path
    if named:
        assert job["straggler"] == 1 and "rank 1: last at 3 of 3 collectives" in job["finding"]
    else:
        assert job["straggler"] is None and "within the run's noise of 0.200 ms" in job["no_straggler_because"]
    # with the critical path: balancing's predicted saving, calibrated, in unprofiled ms a step
    a = tracekit.analyze(folder, critical_path=True)
    job = a["jobs"].iloc[0]
    assert job["cp_calibrated"] and job["cp_step_ms"] == pytest.approx(0.571, rel=0.003)
    assert job["balance_could_save_ms"] == pytest.approx(0.1, rel=0.05)
    assert (job["straggler"] == 1) == named
    path = a["job_critical_path"].set_index(["rank", "step"])
    assert path.loc[(0, 2), "rank_wait_us"] > 400 and path.loc[(1, 2), "rank_wait_us"] == 0


def test_on_the_real_job_compute_waits_for_the_collectives_it_follows(fixtures):
    """The real 2-rank NCCL fixture has no cuda_sync events. Its kernels that waited for a SendRecv
    (the device copies 2-4 µs after it ended, 48-68 ms after their launch) wait for it in the graph
    (inferred), no longer for their launch; each iteration is its host's (the sampled trace keeps one
    launch in four, and its host's gaps are CPU time), but with the host 10x faster the path runs
    through the collectives and the other rank."""
    from tracekit.analysis.critical_path.kinds import COMM, WAIT

    folder = fixtures / "dist" / "hta-trace-filter-sampled-2rank"
    ranks = [(r, load(folder / f"sampled_rank-{r}.json.gz")) for r in (0, 1)]
    job = predict(ranks, [Edit("host-faster", factor=10)])
    g = job.before.graph
    after_comm = (g.edge_kind == WAIT) & (g.klass[g.src] == COMM) & (g.klass[g.dst] != COMM)
    assert after_comm.sum() == 5 and set(g.name[g.dst[after_comm]]) >= {"Memcpy DtoD (Device -> Device)"}
    assert (g.ts[g.dst[after_comm]] - g.end[g.src[after_comm]]).max() <= 15
    before = per_iteration(job.before.split)
    assert before["cpu_us"] / before["latency_us"] > 0.95
    after = job.after.split.groupby("rank")[["rank_wait_us", "comm_us"]].sum()
    assert (after > 0).all().all() and job.predicted_ms < job.modelled_ms


def test_pieces_are_aligned_by_what_they_do():
    from tracekit.analysis.critical_path.balance import _positions
    names = np.array(["launch>a", "launch>b", "launch>mm", "launch>c", "sync"], dtype=object)   # or codes
    # rank 0: a b c sync; rank 1: a mm mm b c sync (two extra matmuls), as node indices into names
    part = pd.DataFrame({"rank": [0] * 4 + [1] * 6, "node": [0, 1, 3, 4, 0, 2, 2, 1, 3, 4]})
    assert _positions(part, names).tolist() == [0, 1, 2, 3, 0, -1, -1, 1, 2, 3]
    same = pd.DataFrame({"rank": [0, 0, 1, 1], "node": [0, 1, 1, 0]})   # as many pieces: the k-th is the k-th
    assert _positions(same, names).tolist() == [0, 1, 0, 1]

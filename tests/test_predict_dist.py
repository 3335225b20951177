"""workloads/predict_dist.py (stragglers on purpose beside their balanced twin) and
workloads/predict-dist.toml (the job what-ifs' pairs, on 2 or 4 GPUs: bench --set nproc=4)."""

import gzip
import json
import runpy
import sys
from pathlib import Path

import pytest
import torch

from tracekit import models
from tracekit.bench import plan
from tracekit.capture import runner, twins
from tracekit.manifest.spec import RunSpec
from tracekit.manifest.suite_toml import SuiteError, load_suite, parse_setting

ROOT = Path(__file__).parents[1]
FILE = ROOT / "workloads" / "predict_dist.py"
SUITE = ROOT / "workloads" / "predict-dist.toml"
WORKLOAD = runpy.run_path(str(FILE))


def _build(fn: str, slow_rank: bool, monkeypatch):
    """The workload ``fn`` built on the CPU, at batch 1, as rank 1 (the slow one) or as rank 0."""
    models.lookup(f"{FILE}:{fn}")   # imports the file as tracekit does, once
    (module,) = [m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == str(FILE.resolve())]
    monkeypatch.setattr(module, "_rank", lambda: 1 if slow_rank else 0)
    return models.build(f"{FILE}:{fn}", batch=1)


def _ranges(module, inputs) -> list[tuple[str, float]]:
    """(name, µs) of the straggler's ranges and of the matmuls in one forward."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with torch.no_grad():
            module(*inputs)
    return [(e.name, e.cpu_time_total) for e in prof.events() if e.name.startswith("straggler") or e.name == "aten::mm"]


@pytest.mark.parametrize("fn, twin", [("vit_host_straggler", WORKLOAD["VIT"]), ("vit_gpu_straggler", WORKLOAD["VIT"]),
                                      ("gpt2_gpu_straggler", WORKLOAD["GPT2"])])
def test_off_rank_1_a_straggler_is_its_twin(monkeypatch, fn, twin):
    module, inputs = _build(fn, False, monkeypatch)
    plain, plain_inputs = models.build(twin, batch=1, phase="train-step")
    assert all(torch.equal(a, b) for a, b in zip(inputs, plain_inputs))
    ours, theirs = dict(module.model.named_parameters()), dict(plain.named_parameters())
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert module.matmuls == 0 and [n for n, _ in _ranges(module, inputs) if n.startswith("straggler")] == []


def test_on_rank_1_the_host_straggler_sleeps_before_each_forward(monkeypatch):
    module, inputs = _build("vit_host_straggler", True, monkeypatch)
    ((name, us),) = [r for r in _ranges(module, inputs) if r[0].startswith("straggler")]
    assert name == "straggler: host sleep" and us >= WORKLOAD["HOST_DELAY_MS"] * 1e3


def test_a_stragglers_twin_is_itself_without_the_delay(monkeypatch):
    """The switch it registers (tracekit.capture.twins) takes the delay away and gives it back."""
    module, inputs = _build("vit_gpu_straggler", True, monkeypatch)
    (switch,) = twins.switches(module)
    assert switch.kind == "balanced" and switch.name == "balanced: rank 1 without its delay (straggler: extra GPU work)"
    switch.set(True)
    assert [n for n, _ in _ranges(module, inputs) if n.startswith("straggler")] == []
    switch.set(False)
    assert [n for n, _ in _ranges(module, inputs) if n.startswith("straggler")] == ["straggler: extra GPU work"]


def test_on_rank_1_the_gpu_straggler_runs_its_extra_matmuls_first(monkeypatch):
    module, inputs = _build("vit_gpu_straggler", True, monkeypatch)
    twin, _ = models.build(WORKLOAD["VIT"], batch=1)
    assert module.matmuls >= 1 and module.a.shape == (256, 256)   # as many as take about 2 ms here
    ranges = _ranges(module, inputs)
    assert ranges[0][0] == "straggler: extra GPU work"
    assert sum(n == "aten::mm" for n, _ in ranges) - sum(n == "aten::mm" for n, _ in _ranges(twin, inputs)) == \
        module.matmuls


@pytest.mark.slow
@pytest.mark.parametrize("fn, name", [("vit_host_straggler", "straggler: host sleep"),
                                      ("vit_gpu_straggler", "straggler: extra GPU work")])
def test_in_a_job_rank_1_is_late_at_every_profiled_forward(tmp_path, fn, name):
    spec = RunSpec(f"{FILE}:{fn}", batch=1, phase="train-step", nproc=2, warmup=0, iters=1, profile_iters=2)
    manifest = runner.run(spec, tmp_path, log=lambda m: None)
    assert manifest.status == "ok", manifest.reason
    assert manifest.twin.kind == "balanced" and manifest.twin.latency_ms.n == spec.iters   # timed before the window
    folder = tmp_path / manifest.label / "eager"
    for rank, expected in ((0, 0), (1, spec.profile_iters)):
        (trace,) = folder.glob(f"*_rank{rank}.*.pt.trace.json.gz")
        events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
        late = [e for e in events if e.get("name") == name and e.get("ph") == "X"]
        assert len(late) == expected, rank
        if name.endswith("sleep"):
            assert all(e["dur"] >= WORKLOAD["HOST_DELAY_MS"] * 1e3 for e in late)


def test_the_suite_holds_both_runs_of_every_pair():
    """Each prediction is made from one run and checked on another of the suite: a straggler's
    balanced twin (the model itself under DDP eager), eager beside a CUDA-graph capture, and the
    overlapped variant beside each no-overlap one (same model and batch)."""
    cells = plan(load_suite(SUITE), "/nonexistent", device="cuda")
    specs = [p.spec for p in cells]
    assert len(specs) == 22 and all(s.nproc == 2 and s.phase == "train-step" for s in specs)
    have = {(s.model, s.batch, s.parallel, s.mode) for s in specs}
    twins = {fn: WORKLOAD["VIT"] if fn.startswith("vit") else WORKLOAD["GPT2"] for fn in WORKLOAD if "straggler" in fn}
    pairs = 0
    for s in specs:
        fn = s.model.rpartition(":")[2]
        if fn in twins:
            assert (twins[fn], s.batch, "ddp", "eager") in have, s
        elif s.mode != "eager":
            assert (s.model, s.batch, s.parallel, "eager") in have, s
        elif s.parallel.endswith("-no-overlap"):
            assert (s.model, s.batch, s.parallel.removesuffix("-no-overlap"), "eager") in have, s
        else:
            continue
        pairs += 1
    assert pairs == 16
    assert {(s.model, s.batch) for s in specs if s.model in twins.values()} == {
        (WORKLOAD["VIT"], 8), (WORKLOAD["VIT"], 32), (WORKLOAD["GPT2"], 4), (WORKLOAD["GPT2"], 16)}


def test_bench_set_runs_the_same_grid_on_4_ranks():
    assert parse_setting("nproc=4") == ("nproc", 4) and parse_setting("parallel=fsdp") == ("parallel", "fsdp")
    assert parse_setting('parallel="fsdp"') == ("parallel", "fsdp")
    with pytest.raises(SuiteError, match="RunSpec field"):
        parse_setting("ranks=4")
    two = [p.name for p in plan(load_suite(SUITE), "/nonexistent", device="cuda")]
    four = plan(load_suite(SUITE, {"nproc": 4}), "/nonexistent", device="cuda")
    assert [p.name for p in four] == [n.replace("-np2/", "-np4/") for n in two]
    assert all(p.spec.nproc == 4 for p in four)

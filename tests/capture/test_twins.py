"""A run's twin timed in the same process (tracekit.capture.twins): the switches registered by what
builds a run with an on-purpose difference, alternating blocks, the run switched back."""

import pytest
import torch

from tracekit.capture import runner, twins
from tracekit.manifest import Manifest
from tracekit.manifest.spec import RunSpec
from tracekit.report.formats.run_status import run_status_lines


class Delayed(torch.nn.Module):
    """A module that busy-waits ``delay_s`` before each forward, unless its twin is on."""

    def __init__(self, delay_s: float):
        super().__init__()
        self.inner, self.delay_s, self.on = torch.nn.Linear(4, 4), delay_s, False
        twins.register(self, "balanced", "without the delay", lambda twin: setattr(self, "on", twin))

    def forward(self, x):
        if not self.on:
            import time
            end = time.perf_counter() + self.delay_s
            while time.perf_counter() < end:
                pass
        return self.inner(x)


def test_switches_are_found_on_the_module_and_its_submodules():
    outer = torch.nn.Sequential(Delayed(0.0), torch.nn.ReLU())
    (found,) = twins.switches(outer)
    assert found.kind == "balanced" and found.name == "without the delay"
    assert twins.switches(torch.nn.ReLU()) == [] and twins.switches(None) == []
    with pytest.raises(ValueError, match="unknown twin kind"):
        twins.register(outer, "faster", "x", lambda on: None)


def test_run_and_twin_alternate_in_blocks_and_the_run_is_switched_back():
    module = Delayed(0.002)
    x = torch.ones(1, 4)
    order = []
    found = twins.switches(module)
    own, twin, timer = twins.time_twin(lambda: order.append(module.on) or module(x), found, 8, "cpu", rounds=4)
    assert timer == "perf_counter" and len(own) == len(twin) == 8 and module.on is False
    # 4 rounds of (an untimed call + 2 timed) each way, the run first in even rounds
    assert order == [False] * 3 + [True] * 3 + [True] * 3 + [False] * 3 + [False] * 3 + [True] * 3 + [True] * 3 + \
        [False] * 3
    assert min(own) >= 2.0 > max(twin)   # ms: the busy-wait only in the run's calls


def test_a_failing_call_still_switches_the_run_back():
    module = Delayed(0.0)

    def call():
        if module.on:
            raise RuntimeError("boom")
        module(torch.ones(1, 4))
    with pytest.raises(RuntimeError, match="boom"):
        twins.time_twin(call, twins.switches(module), 4, "cpu", rounds=2)
    assert module.on is False


def test_a_job_twin_is_the_slowest_rank_of_each_call():
    found = [twins.Switch("overlap", "overlapped", lambda on: None)]
    ranks = [twins.record([3.0, 1.0], [2.0, 0.5], "cuda_events", found, 2),
             twins.record([1.0, 4.0], [1.0, 0.7], "cuda_events", found, 2)]
    job = twins.slowest_over_ranks(ranks)
    assert job.kind == "overlap" and job.latency_ms.samples == [2.0, 0.7]
    assert job.source_latency_ms.samples == [3.0, 4.0]
    assert job.latency_ms.over_ranks == "the slowest rank of each call"
    assert twins.slowest_over_ranks([ranks[0], None]) is None
    again = Manifest.from_dict({**Manifest(twin=job).to_dict()})   # written and read back as run.json holds it
    assert again.twin == job


WORKLOAD = """
import time
import torch
from tracekit.capture import twins

class Delayed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner, self.on = torch.nn.Linear(4, 4), False
        twins.register(self, "balanced", "without the delay", lambda twin: setattr(self, "on", twin))

    def forward(self, x):
        if not self.on:
            time.sleep(0.003)
        return self.inner(x)

def delayed(batch, dtype, device):
    return Delayed().to(device, dtype), (torch.ones(batch, 4, dtype=dtype, device=device),)
"""


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_an_eager_run_times_its_twin_others_say_why_not(tmp_path, mode):
    (tmp_path / "delayed.py").write_text(WORKLOAD)
    spec = RunSpec(f"{tmp_path / 'delayed.py'}:delayed", mode=mode, warmup=1, iters=6, profile_iters=1)
    m = runner.run(spec, tmp_path / "runs", log=lambda line: None)
    assert m.status == "ok", m.reason
    if mode != "eager":
        assert m.twin is None and "its twin (without the delay) is timed in eager runs only" in m.note
        return
    assert m.twin.kind == "balanced" and m.twin.names == ["without the delay"] and m.twin.rounds == 6
    assert m.twin.latency_ms.n == m.twin.source_latency_ms.n == 6
    assert m.twin.source_latency_ms.median - m.twin.latency_ms.median >= 2.5   # ms: the sleep, in the run only
    assert Manifest.read(tmp_path / "runs" / m.label / mode).twin == m.twin
    (line,) = [x for x in run_status_lines(m) if x.startswith("its twin")]   # as tracekit trace ends
    assert line == (f"its twin, timed in the same process (without the delay): p50 {m.twin.latency_ms.median:.3f} ms, "
                    f"this run's {m.twin.source_latency_ms.median:.3f} ms in the same rounds")

"""Stragglers on purpose, to check the balance-ranks what-if on a job (workloads/predict-dist.toml).

Each function builds a built-in model (the very weights and inputs its own name builds) wrapped so
that rank 1 of a job is late at every forward; every other rank runs the model alone:

* ``*_host_straggler``: rank 1 sleeps :data:`HOST_DELAY_MS` on the host before the forward: its GPU
  idles meanwhile only where its queue of work runs dry (a launch-bound step), so the same sleep
  can cost a GPU-bound step nothing;
* ``*_gpu_straggler``: rank 1 queues extra GPU work before the forward: square matmuls on data of
  its own, as many as take about :data:`GPU_DELAY_MS` on its device (timed once when it is built).

The balanced twin of each is the model's own name (``vit16x6x384``, ``hf:gpt2?layers=4``): on
every rank but 1 the wrapper runs the model and nothing else, so the twin's kernels are the
straggler's without the delay. The wrapper also registers that twin with tracekit
(:mod:`tracekit.capture.twins`: the delay switched off), so an eager run times it in the same
process, alternating with the straggler: what ``tracekit whatif --balance-ranks`` is checked on.
The delay is a profiler range (``straggler: host sleep``, ``straggler: extra GPU work``), so a trace
shows where it went::

    tracekit trace --model workloads/predict_dist.py:vit_gpu_straggler --phase train-step --nproc 2
"""

import time

import torch
from torch import nn

from tracekit import models, workload
from tracekit.capture import twins

VIT = "vit16x6x384"
GPT2 = "hf:gpt2?layers=4"          # GPT-2 small's blocks, 4 of its 12
SLOW_RANK = 1
HOST_DELAY_MS = 2.0
GPU_DELAY_MS = 2.0
MATMUL_SIZE = {"cuda": 2048, "cpu": 256}   # the extra work's square matrices, by device type


def _rank() -> int:
    return torch.distributed.get_rank() if torch.distributed.is_initialized() else 0


def _matmuls_for(ms: float, a: torch.Tensor, out: torch.Tensor) -> int:
    """How many ``a @ a`` take about ``ms`` milliseconds on ``a``'s device (at least one): five
    timed after one that warms the library up."""
    def sync():
        if a.is_cuda:
            torch.cuda.synchronize(a.device)
    torch.mm(a, a, out=out)
    sync()
    t0 = time.perf_counter()
    for _ in range(5):
        torch.mm(a, a, out=out)
    sync()
    return max(1, round(ms / ((time.perf_counter() - t0) / 5 * 1e3)))


class Straggler(nn.Module):
    """``model`` whose forward on rank :data:`SLOW_RANK` first sleeps ``host_ms`` (the host
    straggler) or runs ``matmuls`` products of the ``size`` x ``size`` matrix ``a`` into ``out``
    (the GPU straggler), inside a profiler range; the other ranks run ``model`` alone. The
    matrices are plain attributes, not buffers: DDP would broadcast buffers at every forward."""

    def __init__(self, model: nn.Module, host_ms: float = 0.0, gpu_ms: float = 0.0):
        super().__init__()
        self.model, self.host_ms, self.matmuls = model, host_ms, 0
        if gpu_ms and _rank() == SLOW_RANK:
            first = next(model.parameters())
            size = MATMUL_SIZE["cuda" if first.is_cuda else "cpu"]
            self.a = torch.randn(size, size, dtype=first.dtype, device=first.device)
            self.out = torch.empty_like(self.a)
            self.matmuls = _matmuls_for(gpu_ms, self.a, self.out)
        self.range = "straggler: host sleep" if host_ms else "straggler: extra GPU work"
        self.delayed = True
        twins.register(self, "balanced", f"balanced: rank {SLOW_RANK} without its delay ({self.range})",
                       lambda twin: setattr(self, "delayed", not twin))

    def forward(self, *inputs):
        if self.delayed and _rank() == SLOW_RANK:
            with torch.profiler.record_function(self.range):
                if self.host_ms:
                    time.sleep(self.host_ms / 1e3)
                for _ in range(self.matmuls):
                    torch.mm(self.a, self.a, out=self.out)
        return self.model(*inputs)


def _straggler(name: str, batch: int, dtype: torch.dtype, device: str, seq: int | None = None, **delay):
    """The built-in ``name`` (built as for a training phase: an ``hf:`` model gets labels and
    computes its own loss, as its twin does in the suite's train-step cells) in a :class:`Straggler`."""
    module, inputs = models.build(name, batch, {v: k for k, v in models.DTYPES.items()}[dtype], device, seq=seq,
                                  phase="train-step")
    return Straggler(module, **delay), inputs


@workload(batch=8, description=f"{VIT}; rank 1 sleeps {HOST_DELAY_MS:g} ms on the host before each forward")
def vit_host_straggler(batch, dtype, device):
    return _straggler(VIT, batch, dtype, device, host_ms=HOST_DELAY_MS)


@workload(batch=8, description=f"{VIT}; rank 1 runs about {GPU_DELAY_MS:g} ms of extra matmuls before each forward")
def vit_gpu_straggler(batch, dtype, device):
    return _straggler(VIT, batch, dtype, device, gpu_ms=GPU_DELAY_MS)


@workload(batch=8, description=f"{GPT2}; rank 1 sleeps {HOST_DELAY_MS:g} ms on the host before each forward")
def gpt2_host_straggler(batch, dtype, device, seq=128):
    return _straggler(GPT2, batch, dtype, device, seq, host_ms=HOST_DELAY_MS)


@workload(batch=8, description=f"{GPT2}; rank 1 runs about {GPU_DELAY_MS:g} ms of extra matmuls before each forward")
def gpt2_gpu_straggler(batch, dtype, device, seq=128):
    return _straggler(GPT2, batch, dtype, device, seq, gpu_ms=GPU_DELAY_MS)

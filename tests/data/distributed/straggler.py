"""Workload files for `tracekit trace --nproc 2` (tests/test_distributed.py): ranks slow or
broken on purpose. Plain workload functions, ``fn(batch, dtype, device) -> (module, inputs)``.

* ``straggler``: an MLP whose forward sleeps ``SLEEP_S`` on rank 1, so rank 1 arrives late
  at DDP's gradient all-reduce of each iteration;
* ``broken_rank``: the same MLP, whose forward raises on rank 1;
* ``hung_rank``: the same MLP, whose second forward never ends on rank 1 (the first is the
  reference output's; the second the first call's, while rank 0 waits at DDP's all-reduce).
"""

import time

import torch
from torch import nn

SLEEP_S = 0.2


def _rank() -> int:
    return torch.distributed.get_rank() if torch.distributed.is_initialized() else 0


class _Late(nn.Module):
    def __init__(self, broken: bool = False, hangs: bool = False):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8))
        self.broken, self.hangs, self.calls = broken, hangs, 0

    def forward(self, x):
        self.calls += 1
        if _rank() == 1:
            if self.broken:
                raise RuntimeError("rank 1 breaks on purpose")
            time.sleep(3600 if self.hangs and self.calls == 2 else SLEEP_S)
        return self.net(x)


def straggler(batch, dtype, device):
    return _Late().to(device, dtype), (torch.randn(batch, 64, device=device, dtype=dtype),)


def broken_rank(batch, dtype, device):
    return _Late(broken=True).to(device, dtype), (torch.randn(batch, 64, device=device, dtype=dtype),)


def hung_rank(batch, dtype, device):
    return _Late(hangs=True).to(device, dtype), (torch.randn(batch, 64, device=device, dtype=dtype),)

"""A rank's program for `tracekit trace --nproc` whose rank 1 is slow, or broken, on purpose.

It registers the workloads ``straggler`` (an MLP whose forward sleeps ``SLEEP_S`` on rank 1,
so rank 1 arrives late at DDP's gradient all-reduce of each iteration) and ``broken-rank``
(whose forward raises on rank 1), then runs tracekit's own rank program.
tests/test_distributed.py points tracekit.distributed.WORKER at this file.
"""

import sys
import time

import torch
from torch import nn

from tracekit import distributed, models

SLEEP_S = 0.2


def _rank() -> int:
    return torch.distributed.get_rank() if torch.distributed.is_initialized() else 0


class _Late(nn.Module):
    def __init__(self, broken: bool = False):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8))
        self.broken = broken

    def forward(self, x):
        if _rank() == 1:
            if self.broken:
                raise RuntimeError("rank 1 breaks on purpose")
            time.sleep(SLEEP_S)
        return self.net(x)


@models.register("straggler", r"straggler", "straggler", default_batch=4,
                 description=f"MLP whose rank 1 sleeps {SLEEP_S} s before each forward (tests)")
def build(match, batch):
    return _Late(), (torch.randn(batch, 64),)


@models.register("broken-rank", r"broken-rank", "broken-rank", default_batch=4,
                 description="MLP whose forward raises on rank 1 (tests)")
def build_broken(match, batch):
    return _Late(broken=True), (torch.randn(batch, 64),)


if __name__ == "__main__":
    sys.exit(distributed.main())

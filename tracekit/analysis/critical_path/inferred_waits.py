"""Cross-stream waits inferred from the GPU ops' times, where the trace lacks Kineto's ``cuda_sync``
events (:mod:`tracekit.analysis.critical_path.syncs` reads them where they are).

Without them a ``cudaStreamWaitEvent`` leaves no trace of which op waited for which: an op held
back by another stream (a compute kernel waiting for the collective that reduced its input, a
collective waiting for the gradient kernels it sends) looks as if its launch took that long
("launch latency") or its stream had a gap. So an op is taken to have waited for an op of another
stream of the same device when

* it was *held*: it started more than ``INFER_US`` after both its launch call returned and the
  previous op of its stream ended (nothing in the graph kept it back), and
* it started no more than ``INFER_US`` after that other op ended (the latest such op; for a compute
  op a collective kernel first, where one qualifies, and for a collective a compute op: what
  ranks wait on, and what feeds it).

``INFER_US``: on the real 2-rank NCCL fixture (``../shared/fixtures/dist``, no cuda_sync events)
the ops held for milliseconds started 1-12 µs after the op they waited for ended: compute kernels
and device copies 1, 2, 2, 4 and 9 µs after a ``ncclKernel_SendRecv`` ended, collectives 5-12 µs
after the copy or kernel that fed them; an event wait resolves within a few µs of its record.
Each inferred wait is a ``wait`` edge of the graph; :attr:`Graph.missing` says how many were
inferred.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

INFER_US = 15.0


def inferred_waits(ts: np.ndarray, end: np.ndarray, stream: np.ndarray, device: np.ndarray,
                   call_end: np.ndarray, comm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst): the GPU ops (indices into the arrays) each held op waited for (module docstring).

    Args:
        ts, end: each GPU op's start and end (µs).
        stream, device: its stream (a number unique per (device, stream)) and device.
        call_end: the end of its launch call (µs; NaN where the trace lacks it).
        comm: whether it is a collective kernel.
    """
    n = len(ts)
    if n < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort((ts, stream))
    prev_end = np.full(n, -np.inf)
    same = stream[order][1:] == stream[order][:-1]
    prev_end[order[1:][same]] = end[order[:-1][same]]
    free_at = np.fmax(np.nan_to_num(call_end, nan=-np.inf), prev_end)
    held = np.flatnonzero((ts - free_at > INFER_US) & np.isfinite(free_at))
    src, dst = [], []
    frame = pd.DataFrame({"end": end, "stream": stream, "device": device, "comm": comm})
    for _, ops in frame.groupby("device", sort=False):
        ops = ops.sort_values("end", kind="stable")
        ends, streams, rows = ops["end"].to_numpy(), ops["stream"].to_numpy(), ops.index.to_numpy()
        comms = ops["comm"].to_numpy(bool)
        mine = held[np.isin(held, rows)]
        hi = np.searchsorted(ends, ts[mine], side="right")
        lo = np.searchsorted(ends, ts[mine] - INFER_US, side="left")
        for x, a, b in zip(mine.tolist(), lo.tolist(), hi.tolist()):
            cands = np.arange(a, b)[streams[a:b] != stream[x]]
            if not len(cands):
                continue
            other = comms[cands] != comm[x]   # a collective for a compute op, compute for a collective
            pick = cands[other] if other.any() else cands
            src.append(int(rows[pick[-1]]))
            dst.append(x)
    return np.array(src, np.int64), np.array(dst, np.int64)

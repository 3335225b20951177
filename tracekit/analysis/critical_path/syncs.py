"""The sync edges of a trace's dependency graph (:mod:`tracekit.analysis.critical_path.graph`):
cross-stream waits (start edges between GPU ops) and host synchronizations (end edges from
GPU ops to the calls that wait for them). A mixin of the graph's builder, which holds the
trace's tables, its host calls (``host``), GPU ops (``gpu``), their numbering and ``missing``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path import reasons as why
from tracekit.analysis.critical_path.inferred_waits import inferred_waits
from tracekit.analysis.critical_path.kinds import COMM

DEVICE_SYNCS = frozenset({"cudaDeviceSynchronize", "cuCtxSynchronize", "hipDeviceSynchronize"})


class SyncEdges:
    """The builder's sync edges: :meth:`index_streams` first, then :meth:`wait_pairs` (before
    the GPU edges, which weigh them) and :meth:`host_syncs`."""

    def index_streams(self) -> None:
        """Per stream its ops in the order of their launch calls (``stream_nodes``), the stream
        number of each (device, stream), and the trace's cuda_sync events by correlation id."""
        gpu, launch = self.gpu, self.launch_local
        self.hts = self.host["ts"].to_numpy(float)
        gts = np.where(launch >= 0, self.hts[np.maximum(launch, 0)], gpu["ts"].to_numpy(float))
        self.stream_nodes = {}
        for s, idx in pd.Series(np.arange(len(gpu))).groupby(self.stream).groups.items():
            idx = np.asarray(idx)
            o = np.argsort(gts[idx], kind="stable")
            self.stream_nodes[s] = (gts[idx][o], idx[o])
        self.stream_id = dict(zip(zip(gpu["device"].tolist(), gpu["stream"].tolist()), self.stream.tolist()))
        syncs = self.t.syncs
        self.sync_of = {int(corr): (name, int(dev), int(st), int(won_stream), int(won_corr))
                        for name, dev, st, corr, won_stream, won_corr in zip(
                            syncs["name"].astype(str), syncs["device"], syncs["stream"], syncs["correlation"],
                            syncs["wait_on_stream"], syncs["wait_on_correlation"])}

    def wait_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) GPU ops (local indices) of each cross-stream wait (module docstring)."""
        src, dst = [], []
        unnamed = 0   # waits whose event record the trace does not name (an event recorded by NCCL)
        for corr, (name, dev, st, won_stream, won_corr) in self.sync_of.items():
            if name != "Stream Wait Event":
                continue
            if won_corr < 0:
                unnamed += 1
                continue
            wait_call, record_call = self.call_of.get(corr), self.call_of.get(won_corr)
            if wait_call is None or record_call is None:
                continue
            a = self._last_launched_before(self.stream_id.get((dev, won_stream), -1), self.hts[record_call])
            waiting = self.stream_nodes.get(self.stream_id.get((dev, st), -1))
            if a < 0 or waiting is None:
                continue
            k = np.searchsorted(waiting[0], self.hts[wait_call], side="right")
            if k < len(waiting[1]):
                src.append(a)
                dst.append(int(waiting[1][k]))
        if not any(v[0] == "Stream Wait Event" for v in self.sync_of.values()):
            return self._inferred()
        known = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
        if not unnamed:
            return known
        # the rest inferred from the ops' times, for the ops no named wait reaches
        i_src, i_dst = self._inferred(unnamed)
        keep = ~np.isin(i_dst, known[1])
        return np.r_[known[0], i_src[keep]], np.r_[known[1], i_dst[keep]]

    def _inferred(self, unnamed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The cross-stream waits inferred from the GPU ops' times, for a trace without cuda_sync
        "Stream Wait Event" records, or with ``unnamed`` records that do not name the event they wait
        on (NCCL's: said in :attr:`Graph.missing`; :mod:`tracekit.analysis.critical_path.inferred_waits`)."""
        gpu, launch = self.gpu, self.launch_local
        call_end = np.where(launch >= 0, self.host["end"].to_numpy(float)[np.maximum(launch, 0)], np.nan)
        src, dst = inferred_waits(gpu["ts"].to_numpy(float), gpu["end"].to_numpy(float), self.stream,
                                  gpu["device"].astype(str).to_numpy(), call_end, self.gclass == COMM)
        if len(src):
            onto = int((self.gclass[src] == COMM).sum())
            self.missing.append({"code": why.INFERRED_WAITS, "waits": len(src), "after_collective": onto,
                                 **({"unnamed": unnamed} if unnamed else {})})
        return src, dst

    def _last_launched_before(self, stream: int, t: float) -> int:
        """The GPU op (local index) of ``stream`` whose launch call began last before ``t``; -1."""
        entry = self.stream_nodes.get(stream)
        if entry is None:
            return -1
        launch_ts, ops = entry
        k = np.searchsorted(launch_ts, t, side="left") - 1
        return int(ops[k]) if k >= 0 else -1

    def host_syncs(self) -> None:
        """The end edges of synchronizing calls: from the GPU op(s) each waits for."""
        host, gpu, n_host = self.host, self.gpu, self.n_host
        stream_nodes, stream_id, sync_of, hts = self.stream_nodes, self.stream_id, self.sync_of, self.hts
        names = host["name"].astype(str).to_numpy()
        corr = host["correlation"].to_numpy()
        end_host = host["end"].to_numpy(float)
        end_gpu = gpu["end"].to_numpy(float)
        # synchronous memcpys: a memcpy call that returned after its copy ended
        copy_of = {}
        for i, c in enumerate(gpu["correlation"].tolist()):
            copy_of.setdefault(c, i)
        src, dst = [], []
        guessed = 0
        memcpy = np.array(["emcpy" in nm for nm in names.tolist()], dtype=bool)
        for i in np.flatnonzero(self.sync_call | memcpy).tolist():
            if not self.sync_call[i]:
                op = copy_of.get(int(corr[i]))
                if op is not None and hts[i] < end_gpu[op] <= end_host[i]:
                    src.append(op)
                    dst.append(i)
                continue
            if names[i] in DEVICE_SYNCS:
                streams = list(stream_nodes)
            else:
                known = sync_of.get(int(corr[i]))
                if known and known[2] >= 0 and names[i].endswith("StreamSynchronize"):
                    streams = [stream_id.get((known[1], known[2]), -1)]
                elif known and known[4] >= 0 and known[3] >= 0:
                    record = self.call_of.get(known[4])
                    a = -1 if record is None else self._last_launched_before(
                        stream_id.get((known[1], known[3]), -1), hts[record])
                    if a >= 0:
                        src.append(a)
                        dst.append(i)
                    continue
                else:
                    streams, guessed = list(stream_nodes), guessed + 1
            for s in streams:
                a = self._last_launched_before(s, hts[i])
                if a >= 0:
                    src.append(a)
                    dst.append(i)
        if guessed:
            self.missing.append({"code": why.GUESSED_SYNCS, "syncs": guessed})
        src, dst = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
        self.sync_src, self.sync_dst = src + n_host, dst

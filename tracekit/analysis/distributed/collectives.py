"""Collectives on one rank: which GPU ops are communication, and one row per collective call.

A *collective call* is one execution of a collective on this rank:

* an NCCL/RCCL kernel (class ``communication`` of :mod:`tracekit.analysis.metrics.kernels`:
  ``ncclKernel_*``, ``ncclDevKernel_*``, RCCL's): the GPU runs the collective and
  *arrives* at it when the kernel starts (HolisticTraceAnalysis' straggler analysis
  also takes comm kernels' start times, hta/analyzers/straggler.py);
* a ``gloo:*`` annotation (ProcessGroupGloo records one per collective on its worker
  thread): the host runs the collective, and arrives when the annotation starts.

A kernel's metadata (collective, process group, sequence number, message size) comes
from the first source that has it: the kernel's own args (newer torch copies them from
``record_param_comms``), the innermost ``record_param_comms`` CPU op around its launch
call on the launching thread (torch's RECORD_PARAM_COMMS scope encloses the launch),
the name of the innermost ``nccl:*`` or ``c10d::*`` op around that call, or the
kernel's name (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``; ``ncclDevKernel_Generic``
names none). A gloo call has only its name; on CUDA tensors ProcessGroupGloo stages
them through host memory, and those *device copies* (memcpy/memset launched inside a
``c10d::*`` op or a ``gloo:*`` annotation of a trace that has gloo annotations) are
communication GPU ops; the bytes copied inside a gloo call are its message size.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.metrics.idle import iteration_of
from tracekit.analysis.metrics.kernels import kernel_class
from tracekit.analysis.registry import Inputs, Output, register
from tracekit.trace.reader import EventTables

CALL_COLUMNS = ["where", "collective", "name", "process_group", "seq", "group_size", "dtype", "in_msg_nelems",
                "out_msg_nelems", "message_bytes", "ts", "end", "dur_us", "stream", "thread", "correlation",
                "iteration"]
# Element sizes (bytes) of the dtype names torch writes in record_param_comms (c10::ScalarType).
DTYPE_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8, "Short": 2, "Char": 1,
               "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "Float8_e4m3fn": 1,
               "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1}
# Collective names (NCCL's CamelCase, c10d's op names, record_param_comms' values) reduced to
# letters, by prefix; the first match wins.
_NAMES = [("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
          ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("sendrecv", "send_recv"), ("send", "send"),
          ("recv", "recv"), ("barrier", "barrier"), ("reduce", "reduce"), ("gather", "gather"),
          ("scatter", "scatter")]
_PREFIX = re.compile(r"^(nccl:|gloo:|c10d::|void\s+)?(nccl(dev)?kernel_|rccl\w*?kernel_)?", re.I)


def collective_name(raw: str | None) -> str:
    """A collective's standard name from a kernel, op or arg name: ``all_reduce``,
    ``all_gather``, ``reduce_scatter``, ``all_to_all``, ``broadcast``, ``send_recv``,
    ``send``, ``recv``, ``barrier``, ``reduce``, ``gather``, ``scatter``; ``other`` when
    it names none (``ncclDevKernel_Generic``), "" for None.

    >>> collective_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), collective_name("c10d::_allgather_base_")
    ('all_reduce', 'all_gather')
    """
    if not raw:
        return ""
    rest = _PREFIX.sub("", raw)
    if rest is not raw and re.match(r"[A-Z]", rest):   # a kernel: its first CamelCase word
        rest = re.match(r"[A-Za-z]+", rest).group(0)
    key = re.sub(r"[^a-z]", "", rest.lower())
    return next((label for prefix, label in _NAMES if key.startswith(prefix)), "other")


def _comm_kernels(ops: pd.DataFrame) -> np.ndarray:
    classes = {n: kernel_class(n) == "communication" for n in ops["name"].unique()}
    return ((ops["kind"] == "kernel") & ops["name"].map(classes).astype(bool)).to_numpy()


def _enclosing(points: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """For each point (pid, tid, at), the op of ``ops`` (pid, tid, ts, end, ...) on the same
    thread that started last at or before it and is still open then; NaN columns where none,
    and for points of no known time (a GPU op whose launch call is not in the trace).
    Returns ``ops``' columns aligned with ``points``' index."""
    index, points = points.index, points[points["at"].notna()]
    if points.empty or ops.empty:
        return pd.DataFrame(index=index, columns=ops.columns)
    left = points[["pid", "tid", "at"]].astype({"pid": str, "tid": str}).reset_index().sort_values("at")
    right = ops.astype({"pid": str, "tid": str}).sort_values("ts").rename(columns={"ts": "op_ts"})
    found = pd.merge_asof(left, right, left_on="at", right_on="op_ts", by=["pid", "tid"], direction="backward")
    found = found.set_index(found.columns[0]).reindex(index)
    return found.where(found["end"] >= found["at"])


def _launches(tables: EventTables, correlations: pd.Series) -> pd.DataFrame:
    """The launch call (pid, tid, at = its ts) of each correlation id; NaN where not found."""
    calls = tables.host_calls
    index = calls[calls["correlation"] >= 0].drop_duplicates("correlation").set_index("correlation")
    return pd.DataFrame({"pid": correlations.map(index["pid"]), "tid": correlations.map(index["tid"]),
                         "at": correlations.map(index["ts"])}, index=correlations.index)


def host_collectives(tables: EventTables) -> pd.DataFrame:
    """The ``gloo:*`` annotations (rows of ``tables.comms``): collectives the host runs."""
    c = tables.comms
    return c[(c["table"] == "cpu_ops") & c["name"].str.startswith("gloo:")]


def device_copies(tables: EventTables) -> np.ndarray:
    """Which GPU ops (a bool per row of ``gpu_ops``) are device copies of a host-run (gloo)
    collective: memcpy/memset launched inside a ``c10d::*`` op or ``gloo:*`` annotation."""
    ops, c = tables.gpu_ops, tables.comms
    copies = ops["kind"].isin(["memcpy", "memset"])
    if not copies.any() or host_collectives(tables).empty:
        return np.zeros(len(ops), dtype=bool)
    scopes = c[(c["table"] == "cpu_ops") & c["name"].str.match(r"c10d::|gloo:")][["pid", "tid", "ts", "end"]]
    inside = _enclosing(_launches(tables, ops.loc[copies, "correlation"]), scopes)["end"].notna()
    out = np.zeros(len(ops), dtype=bool)
    out[np.flatnonzero(copies.to_numpy())[inside.to_numpy()]] = True
    return out


def communication_ops(tables: EventTables) -> np.ndarray:
    """A bool per row of ``gpu_ops``: communication kernels and device copies of gloo collectives."""
    return _comm_kernels(tables.gpu_ops) | device_copies(tables)


def _message_bytes(nelems: pd.Series, dtype: pd.Series) -> pd.Series:
    return nelems * dtype.map(DTYPE_BYTES).astype(float)


def _gpu_calls(tables: EventTables) -> pd.DataFrame:
    ops = tables.gpu_ops[_comm_kernels(tables.gpu_ops)]
    if ops.empty:
        return pd.DataFrame(columns=CALL_COLUMNS)
    c = tables.comms
    own = c[c["table"] == "gpu_ops"].drop_duplicates(["correlation", "ts"]).set_index(["correlation", "ts"])
    own = own.reindex(pd.MultiIndex.from_arrays([ops["correlation"], ops["ts"]])).set_axis(ops.index)
    cpu = c[c["table"] == "cpu_ops"]
    launch = _launches(tables, ops["correlation"])
    params = _enclosing(launch, cpu[cpu["name"] == "record_param_comms"])
    named = _enclosing(launch, cpu[cpu["name"].str.match(r"nccl:|c10d::")][["pid", "tid", "ts", "end", "name"]])
    meta = own.combine_first(params) if len(params.columns) else own
    raw = meta["collective"].where(meta["collective"].notna(), named["name"]).fillna(ops["name"])
    dtype = meta["dtype"]
    return pd.DataFrame({
        "where": "gpu", "collective": raw.map(collective_name), "name": ops["name"],
        "process_group": meta["pg_name"].fillna(""), "seq": meta["seq"].astype(float),
        "group_size": meta["group_size"].astype(float), "dtype": dtype,
        "in_msg_nelems": meta["in_msg_nelems"].astype(float), "out_msg_nelems": meta["out_msg_nelems"].astype(float),
        "message_bytes": _message_bytes(meta["in_msg_nelems"].astype(float), dtype),
        "ts": ops["ts"], "end": ops["end"], "dur_us": ops["dur"], "stream": ops["stream"], "thread": "",
        "correlation": ops["correlation"], "iteration": iteration_of(tables, launch["at"].fillna(ops["ts"]).to_numpy()),
    })


def _cpu_calls(tables: EventTables) -> pd.DataFrame:
    host = host_collectives(tables)
    if host.empty:
        return pd.DataFrame(columns=CALL_COLUMNS)
    ops = tables.gpu_ops[device_copies(tables)]
    copied = np.zeros(len(host))
    if len(ops):  # bytes copied back to the device inside each gloo call
        inside = _enclosing(_launches(tables, ops["correlation"]), host[["pid", "tid", "ts", "end"]].assign(
            call=np.arange(len(host))))
        copied = ops["bytes"].groupby(inside["call"]).sum().reindex(np.arange(len(host))).to_numpy()
    return pd.DataFrame({
        "where": "cpu", "collective": host["name"].map(collective_name).to_numpy(), "name": host["name"].to_numpy(),
        "process_group": "", "seq": np.nan, "group_size": np.nan, "dtype": None, "in_msg_nelems": np.nan,
        "out_msg_nelems": np.nan, "message_bytes": np.where(copied > 0, copied, np.nan),
        "ts": host["ts"].to_numpy(), "end": host["end"].to_numpy(), "dur_us": host["dur"].to_numpy(), "stream": -1,
        "thread": host["tid"].astype(str).to_numpy(), "correlation": -1,
        "iteration": iteration_of(tables, host["ts"].to_numpy()),
    })


def calls(tables: EventTables) -> pd.DataFrame:
    """One row per collective call on this rank (see the module docstring).

    Returns:
        where ('gpu': an NCCL/RCCL kernel, 'cpu': a gloo annotation), collective (standard
        name, :func:`collective_name`), name (the kernel or annotation), process_group
        ("" when unknown), seq (torch's per-group sequence number, NaN when unknown),
        group_size, dtype, in_msg_nelems, out_msg_nelems, message_bytes (in_msg_nelems x
        element size; for a gloo call the bytes of its device copies; NaN when unknown),
        ts (arrival, µs), end, dur_us, stream (-1 for host calls), thread ("" for
        kernels), correlation, iteration (ProfilerStep of the launch or start, -1
        outside); sorted by ts.
    """
    parts = [p for p in (_gpu_calls(tables), _cpu_calls(tables)) if len(p)]
    if not parts:
        return pd.DataFrame(columns=CALL_COLUMNS)
    return pd.concat(parts, ignore_index=True)[CALL_COLUMNS].sort_values("ts", kind="stable").reset_index(drop=True)


def idle_in_calls(gaps: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """The pieces of GPU idle gaps that fall inside collective calls.

    Args:
        gaps: device gaps of :func:`tracekit.analysis.metrics.idle.gaps` (start, end, cause).
        calls: :func:`tracekit.analysis.distributed.collectives.calls` of the same trace.

    Returns:
        One row per (call, gap) that overlap: call (row of ``calls``), start, end (µs,
        the gap clipped to the call), cause (the gap's). The job analysis keeps the part
        during which the call waited for another rank (:mod:`tracekit.analysis.distributed.stragglers`).
    """
    cols = ["call", "start", "end", "cause"]
    if gaps.empty or calls.empty:
        return pd.DataFrame(columns=cols)
    ts, end = calls["ts"].to_numpy(), calls["end"].to_numpy()
    parts = []
    for _, g in gaps.groupby("device"):   # a device's gaps are disjoint: sorted starts and ends
        g = g.sort_values("start")
        gs, ge = g["start"].to_numpy(), g["end"].to_numpy()
        first, last = np.searchsorted(ge, ts, side="right"), np.searchsorted(gs, end, side="left")
        call = np.repeat(np.arange(len(ts)), np.maximum(last - first, 0))
        if len(call):
            gap = np.concatenate([np.arange(a, b) for a, b in zip(first, last) if b > a])
            parts.append(pd.DataFrame({"call": call, "start": np.maximum(gs[gap], ts[call]),
                                       "end": np.minimum(ge[gap], end[call]), "cause": g["cause"].to_numpy()[gap]}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


@register("collectives", reads=("gpu_ops", "host_calls", "cpu_ops", "comms", "markers"), uses=("idle",), order=70,
          columns={"collectives": "count"}, tables=("collectives", "collective_idle"),
          default=Output(row={"collectives": float("nan")}))
def _collectives_analysis(x: Inputs) -> Output:
    """One row per collective call (:func:`calls`, numbered by ``call``), their count, and the GPU
    idle gaps inside them (:func:`idle_in_calls`) where the gaps stand, for the job analysis."""
    found = calls(x.tables)
    inside = idle_in_calls(x["idle"], found) if x["idle"] is not None else pd.DataFrame()
    return Output(row={"collectives": len(found)}, tables={"collectives": found.assign(call=np.arange(len(found))),
                                                           "collective_idle": inside})

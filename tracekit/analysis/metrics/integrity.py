"""Trace integrity: what in a trace keeps its figures from being trusted, per run.

Each check is a row of the ``integrity`` table (check, status, count, total: what
count is out of, what: the kind of problem or the accelerator); status is ``ok``,
``warning`` (figures stand, something was left out) or ``failed`` (a figure the
verdict rests on is unknown: the verdict is then ``undetermined``). The report words
each check (:func:`tracekit.report.run_lines.integrity_text`). Checks:

* events dropped by the reader, and why (no numeric ts, negative dur, exact
  duplicates, ts/dur far outside the trace's time range: ``tracekit.trace.dataframes``);
  failed when more than ``DROPPED_MAX_SHARE`` of the events were dropped;
* GPU ops without a correlation id (no ``correlation`` arg): their launches
  cannot be counted; failed when no GPU op has one (launches unknown);
* GPU ops whose launch call is not in the trace (launched before the profiler
  started, or a sampled trace that kept some of the host's calls): they are counted,
  attributed to no launch, and the idle gap before each has no cause (*other*);
  failed when more than ``LAUNCHLESS_MAX_SHARE`` of the GPU ops have none (host wait,
  the figure the verdict rests on, is then unmeasured for most of the GPU's gaps);
* launch calls with no GPU op at all: the profiler did not record GPU
  activity (failed; the report says how to enable it);
* kernel launch calls whose correlation id no GPU op has, in a trace with GPU ops: their kernels
  are not in the trace (relabelled, filtered out); failed past ``LAUNCHLESS_MAX_SHARE`` of them
  (every real trace we have: none);
* device events under a category Kineto does not write (a ``device`` or ``stream`` arg, no
  ``kernel`` category: the reader's ``unknown_device_events``): GPU activity left out of every
  figure; failed past ``DROPPED_MAX_SHARE`` of the device's events;
* GPU ops 0 µs long (none in any real trace we have): failed past half of them (busy time and
  every gap then say nothing);
* timestamps so large that float64 holds them to more than ``TS_RESOLUTION_US`` (past 2**53 ns
  worth of µs, about 285 years of µs since the epoch): intervals shorter than that are lost (failed);
* the accelerator the trace's device ops come from (CUDA, ROCm/HIP, XPU, MTIA).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.metrics.idle import launch_index
from tracekit.analysis.registry import Inputs, Output, register
from tracekit.trace.reader import EventTables

DROPPED_MAX_SHARE = 0.10  # ours: past 10% of the events dropped, the figures are not trusted
LAUNCHLESS_MAX_SHARE = 0.5  # ours: past half the GPU ops without their launch call, most gaps have no cause
# Host APIs that enqueue device work, by prefix: CUDA runtime/driver, HIP, Level Zero / SYCL (XPU).
LAUNCH_PREFIXES = ("cudaLaunch", "cuLaunch", "cudaGraphLaunch", "cudaMemcpy", "cudaMemset", "hipLaunch",
                   "hipExtLaunch", "hipGraphLaunch", "hipMemcpy", "hipMemset", "zeCommandListAppend",
                   "urEnqueue", "mtia")
# Host APIs that launch kernels (a cudaGraphLaunch: a replay's kernels share its correlation id); not
# cudaLaunchHostFunc, which enqueues no GPU op.
KERNEL_LAUNCHES = ("cudaLaunchKernel", "cudaLaunchCooperativeKernel", "cuLaunchKernel", "cuLaunchCooperativeKernel",
                   "cudaGraphLaunch", "cuGraphLaunch", "hipLaunchKernel", "hipExtLaunchKernel",
                   "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipGraphLaunch")
COLUMNS = ["check", "status", "count", "total", "what"]
TS_RESOLUTION_US = 1.0  # ours: a coarser step between representable timestamps loses whole kernels


def accelerator(tables: EventTables) -> str:
    """The kind of device the trace's GPU ops ran on, from its categories and host API names."""
    cats = tables.meta.get("categories", {})
    names = tables.host_calls["name"].cat.categories if len(tables.host_calls) else []
    if any(c.startswith("mtia") for c in cats):
        return "MTIA"
    if any(c.startswith("xpu") for c in cats):
        return "XPU"
    if any(str(n).startswith("hip") for n in names) or "ROCm" in str(tables.meta.get("trace_name") or ""):
        return "ROCm/HIP"
    return "CUDA" if len(tables.gpu_ops) or any(c.startswith("cuda") for c in cats) else "none"


# torch's device type of each accelerator (a ROCm/HIP build of torch calls its GPUs "cuda").
DEVICE_TYPES = {"MTIA": "mtia", "XPU": "xpu", "ROCm/HIP": "cuda", "CUDA": "cuda", "none": "cpu"}


def device_type(tables: EventTables) -> str:
    """Where the trace's work ran, as torch names device types: ``cuda``, ``mtia``, ``xpu``,
    or ``cpu`` for a trace without GPU ops."""
    return DEVICE_TYPES[accelerator(tables)] if tables.has_gpu else "cpu"


def checks(tables: EventTables) -> pd.DataFrame:
    """The integrity table of one trace (see the module docstring): ``what`` is the reader's kind
    of problem for an ``events`` check and the accelerator (:func:`accelerator`) for that check,
    ``total`` the trace's events or GPU ops a count is out of."""
    rows = []
    events = tables.meta.get("events", 0)
    dropped = 0
    for what, n in tables.meta.get("problem_counts", {}).items():
        dropped += n if "dropped" in what else 0
        rows.append({"check": "events", "status": "warning", "count": n, "total": events, "what": what})
    if dropped and events and dropped > DROPPED_MAX_SHARE * events:
        rows.append({"check": "events dropped", "status": "failed", "count": dropped, "total": events, "what": ""})
    ops = tables.gpu_ops
    missing = int((ops["correlation"] < 0).sum())
    if missing:
        rows.append({"check": "correlation ids", "status": "failed" if missing == len(ops) else "warning",
                     "count": missing, "total": len(ops), "what": ""})
    found = launch_index(tables).index.get_indexer(ops["correlation"]) >= 0   # (its hash table, built once)
    launchless = int(((ops["correlation"] >= 0).to_numpy() & ~found).sum())
    if launchless:
        failed = launchless > LAUNCHLESS_MAX_SHARE * len(ops)
        rows.append({"check": "launch calls", "status": "failed" if failed else "warning", "count": launchless,
                     "total": len(ops), "what": ""})
    calls = tables.host_calls
    launch_calls = int(calls["name"].astype(str).str.startswith(LAUNCH_PREFIXES).sum()) if ops.empty else 0
    if launch_calls:
        rows.append({"check": "GPU activity", "status": "failed", "count": launch_calls, "total": 0, "what": ""})
    rows += _unmatched_launches(tables) + _unknown_device(tables) + _degenerate_times(tables)
    rows.append({"check": "accelerator", "status": "ok", "count": len(ops), "total": len(ops),
                 "what": accelerator(tables)})
    return pd.DataFrame(rows, columns=COLUMNS)


def _unmatched_launches(tables: EventTables) -> list[dict]:
    """The check of kernel launch calls (``KERNEL_LAUNCHES``) whose correlation id no GPU op has, in
    a trace with GPU ops (without any, the ``GPU activity`` check says it); none where every one has."""
    ops, calls = tables.gpu_ops, tables.host_calls
    if ops.empty or calls.empty:
        return []
    launches = calls[calls["name"].astype(str).str.startswith(KERNEL_LAUNCHES).to_numpy()]
    alone = int((~launches["correlation"].isin(ops["correlation"])).sum())
    if not alone:
        return []
    status = "failed" if alone > LAUNCHLESS_MAX_SHARE * len(launches) else "warning"
    return [{"check": "launches without GPU op", "status": status, "count": alone, "total": len(launches), "what": ""}]


def _unknown_device(tables: EventTables) -> list[dict]:
    """The check of device events under categories Kineto does not write (the reader's
    ``unknown_device_events``; ``what``: those categories), out of them and the GPU ops."""
    found = tables.meta.get("unknown_device_events") or {}
    n = sum(found.values())
    if not n:
        return []
    status = "failed" if n > DROPPED_MAX_SHARE * (n + len(tables.gpu_ops)) else "warning"
    return [{"check": "unknown device events", "status": status, "count": n, "total": n + len(tables.gpu_ops),
             "what": ", ".join(found)}]


def _degenerate_times(tables: EventTables) -> list[dict]:
    """The checks of GPU ops 0 µs long and of timestamps too large to hold µs (``what``: the float64
    step between timestamps there, in µs)."""
    rows, ops = [], tables.gpu_ops
    zero = int((ops["dur"] == 0).sum())
    if zero:
        status = "failed" if zero > LAUNCHLESS_MAX_SHARE * len(ops) else "warning"
        rows.append({"check": "0 µs GPU ops", "status": status, "count": zero, "total": len(ops), "what": ""})
    largest = max((float(t["ts"].abs().max()) for t in (ops, tables.host_calls, tables.cpu_ops) if len(t)), default=0.0)
    step = float(np.spacing(largest))
    if step > TS_RESOLUTION_US:
        rows.append({"check": "timestamps", "status": "failed", "count": 0, "total": 0, "what": f"{step:g}"})
    return rows


def checked(tables: EventTables) -> pd.DataFrame:
    """:func:`checks`, or where they raise (a bug, on damaged input) one failed ``integrity`` row
    whose ``what`` is the reason: what the verbs that read traces without ``analyze_trace``
    (``tracekit whatif``) show of each input."""
    try:
        return checks(tables)
    except Exception as exc:  # noqa: BLE001 - unchecked is a failed check, never a crash
        return _unchecked_table(f"{type(exc).__name__}: {exc}")


def damaged(table: pd.DataFrame) -> bool:
    """Whether an integrity table (of one trace or several) has damage the reader mended or dropped
    (an ``events`` check): the inputs for which a verb exits PARTIAL (10), as ``tracekit analyze``."""
    return bool(len(table)) and bool((table["check"] == "events").any())


def _checked(table: pd.DataFrame) -> Output:
    """The integrity table and its row (:func:`summary`)."""
    return Output(row=summary(table), tables={"integrity": table})


def _unchecked_table(why: str) -> pd.DataFrame:
    """The table where the checks failed: the figures are not vouched for (``what``: why)."""
    return pd.DataFrame([{"check": "integrity", "status": "failed", "count": 0, "total": 0, "what": why}],
                        columns=COLUMNS)


def _unchecked(x: Inputs, why: str) -> Output:
    """Where the checks failed (the analysis raised): :func:`_unchecked_table`."""
    return _checked(_unchecked_table(why))


@register("integrity", reads=("gpu_ops", "host_calls", "meta"), order=10, tables=("integrity",), default=_unchecked,
          columns={"integrity": ""})
def _integrity_analysis(x: Inputs) -> Output:
    """The checks (:func:`checks`) and their sum in the row."""
    return _checked(checks(x.tables))


def summary(table: pd.DataFrame) -> dict:
    """Run-row field ``integrity``: "failed" where a check failed, else "warning" where one warns,
    else "ok" (the report's ``integrity_detail`` words those checks)."""
    for status in ("failed", "warning"):
        if (table["status"] == status).any():
            return {"integrity": status}
    return {"integrity": "ok"}

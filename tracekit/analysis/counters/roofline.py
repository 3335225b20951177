"""Per-kernel DRAM traffic, achieved bandwidth and FLOP/s, and how bound each kernel is (no torch).

From ncu's counters (:mod:`tracekit.analysis.counters.metrics`), per kernel:

* ``dram_bytes`` = DRAM bytes read + written; ``bw_GBps`` = dram_bytes / time
  (bytes per ns = GB/s), time being ncu's ``gpu__time_duration`` of the
  kernel while profiled.
* ``flops`` by kind (fp32, fp64, fp16 on CUDA cores; tensor_bf16, ... on
  tensor cores); ``TFLOPs`` = flops / time; ``intensity_FLOP_per_B`` =
  flops / dram_bytes (the roofline's arithmetic intensity, Williams, Waterman
  and Patterson, "Roofline", CACM 2009).
* ``bw_pct_peak`` = bw_GBps / the device's peak DRAM bandwidth;
  ``compute_pct_peak`` = sum over kinds of (FLOP/s of the kind / the peak of
  that kind), so mixed work adds up to the share of the compute roof it uses.
  Peaks: the datasheet table of :mod:`tracekit.analysis.peaks` (CUDA-core fp16 has no
  figure there, so it counts in FLOP/s but not in compute_pct_peak).
* ``bound``: "memory" or "compute" when the larger of bw_pct_peak and
  compute_pct_peak (or the tensor pipe's busy percent, where ncu gives it)
  reaches BOUND_PCT, else "neither" (low on both: small, latency- or
  launch-dominated kernels); "unknown" without peaks for the device. The 60 %
  threshold is Nsight Compute's own (its SpeedOfLight rule: "achieved compute
  throughput and/or memory bandwidth below 60.0% of peak typically indicate
  latency issues").

Per run, kernels are weighted by their duration in the trace when joined to
one (the unperturbed run; :mod:`tracekit.analysis.counters.join`), else by ncu's time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.analysis import peaks as datasheet
from tracekit.analysis.counters import metrics as M
from tracekit.analysis.counters.join import join
from tracekit.analysis.counters.parse import CountersError, parse
from tracekit.analysis.metrics.kernels import kernel_class
from tracekit.trace import load

BOUND_PCT = 60.0
BOUNDS = ["memory", "compute", "neither"]
DEVICE_NAME = "device__attribute_display_name"
# FLOP kind -> precision key of the datasheet table (tracekit.analysis.peaks)
PEAK_KEY = {"fp32": "fp32", "fp64": "fp64", "tensor_fp64": "fp64_tensor", "tensor_tf32": "tf32",
            "tensor_bf16": "bf16", "tensor_fp16": "fp16", "tensor_fp8": "fp8"}


@dataclass(frozen=True)
class Peaks:
    """A device's datasheet peaks: DRAM GB/s, TFLOP/s by FLOP kind, and the document they come from."""

    device: str
    dram_GBps: float
    TFLOPs: dict[str, float]
    source: str

    def table(self) -> list[dict]:
        """Rows of figure, value, unit, source (for reports)."""
        rows = [("dram", self.dram_GBps, "GB/s")] + [(k, v, "TFLOP/s") for k, v in self.TFLOPs.items()]
        return [{"figure": f, "value": v, "unit": u, "source": self.source} for f, v, u in rows]


def device_peaks(device: str | None) -> Peaks | None:
    """The peaks of ``device`` from :mod:`tracekit.analysis.peaks`, by FLOP kind; None for a device it lacks."""
    key = datasheet.key(device)
    if key is None:
        return None
    bw, compute = datasheet.PEAKS[key]
    return Peaks(device, bw, {kind: compute[p] for kind, p in PEAK_KEY.items() if p in compute},
                 datasheet.SOURCES.get(key, "tracekit/analysis/peaks.py"))


def flops_by_kind(counters: pd.DataFrame) -> pd.DataFrame:
    """FLOPs of each kernel by kind (columns :data:`metrics.FLOP_KINDS`); NaN where no counter of a kind
    was collected."""
    out = {}
    for kind in ("fp32", "fp64", "fp16"):
        cols = [(m, w) for m, (k, w) in M.SASS_FLOPS.items() if k == kind and m in counters]
        out[kind] = sum(counters[m].fillna(0) * w for m, w in cols) if cols else math.nan
    for kind, sets in M.TENSOR_FLOPS.items():
        sums = [counters[[m for m in s if m in counters]].sum(axis=1, min_count=1)
                for s in sets if any(m in counters for m in s)]
        out[kind] = pd.concat(sums, axis=1).max(axis=1) if sums else math.nan
    return pd.DataFrame(out, index=counters.index)


def kernel_table(counters: pd.DataFrame, peaks: Peaks | None) -> pd.DataFrame:
    """One row per profiled kernel with its traffic, rates, shares of peak and bound.

    Args:
        counters: parsed ncu rows (:func:`tracekit.analysis.counters.parse.parse`),
            joined to a trace or not (:func:`tracekit.analysis.counters.join.join`).
        peaks: the device's peaks, or None (then the percent columns are NaN
            and ``bound`` is "unknown").

    Returns:
        id, kernel, class, time_us (ncu), weight_us (trace duration where
        joined, else time_us), dram_read_bytes, dram_write_bytes, dram_bytes,
        bw_GBps, flops_<kind> for each kind, flops, TFLOPs,
        intensity_FLOP_per_B, bw_pct_peak, compute_pct_peak, bound, and where
        present ncu_dram_pct, tensor_pipe_pct, trace_name, trace_dur_us, matched.
    """
    c = counters
    time_ns = c[M.TIME]
    kinds = flops_by_kind(c)
    out = pd.DataFrame({"id": c["id"], "kernel": c["kernel"],
                        "class": c["kernel"].map(kernel_class),
                        "time_us": time_ns / 1e3})
    out["weight_us"] = c["trace_dur_us"].fillna(out["time_us"]) if "trace_dur_us" in c else out["time_us"]
    out["dram_read_bytes"], out["dram_write_bytes"] = c[M.DRAM_READ], c[M.DRAM_WRITE]
    out["dram_bytes"] = out["dram_read_bytes"] + out["dram_write_bytes"]
    out["bw_GBps"] = out["dram_bytes"] / time_ns
    for kind in M.FLOP_KINDS:
        out[f"flops_{kind}"] = kinds[kind]
    out["flops"] = kinds.sum(axis=1, min_count=1)
    out["TFLOPs"] = out["flops"] / time_ns / 1e3
    out["intensity_FLOP_per_B"] = out["flops"] / out["dram_bytes"].where(out["dram_bytes"] > 0)
    for name in dict.fromkeys(M.EXTRA.values()):
        if cols := [m for m, n in M.EXTRA.items() if n == name and m in c]:
            out[name] = c[cols].max(axis=1)
    if peaks is None:
        out["bw_pct_peak"] = out["compute_pct_peak"] = math.nan
        out["bound"] = "unknown"
    else:
        out["bw_pct_peak"] = 100 * out["bw_GBps"] / peaks.dram_GBps
        shares = [kinds[k].fillna(0) / time_ns / (peaks.TFLOPs[k] * 1e3) for k in M.FLOP_KINDS if k in peaks.TFLOPs]
        out["compute_pct_peak"] = 100 * sum(shares)
        out["bound"] = bound(out["bw_pct_peak"], out["compute_pct_peak"], out.get("tensor_pipe_pct"))
    for col in ("trace_name", "trace_dur_us", "matched"):
        if col in c:
            out[col] = c[col]
    return out


def bound(bw_pct: pd.Series, compute_pct: pd.Series, tensor_pipe_pct: pd.Series | None = None) -> np.ndarray:
    """"memory", "compute" or "neither" per kernel (see the module docstring)."""
    compute = compute_pct.fillna(0)
    if tensor_pipe_pct is not None:
        compute = np.maximum(compute, tensor_pipe_pct.fillna(0))
    memory = bw_pct.fillna(0)
    return np.select([np.maximum(memory, compute) < BOUND_PCT, memory >= compute], ["neither", "memory"],
                     default="compute")


def _rates(g: pd.DataFrame) -> dict:
    time_ns = 1e3 * g["time_us"].sum()
    return {"dram_bytes": g["dram_bytes"].sum(), "bw_GBps": g["dram_bytes"].sum() / time_ns,
            "flops": g["flops"].sum(), "TFLOPs": g["flops"].sum() / time_ns / 1e3}


def _shares(g: pd.DataFrame) -> dict:
    total = g["weight_us"].sum()
    if (g["bound"] == "unknown").all():  # no peaks for the device: no bound, no shares
        return {f"{b}_share": math.nan for b in BOUNDS}
    return {f"{b}_share": g.loc[g["bound"] == b, "weight_us"].sum() / total if total > 0 else math.nan
            for b in BOUNDS}


def class_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per kernel class: kernels, weight_us, share (of the run's weighted time),
    dram_bytes, bw_GBps, flops, TFLOPs (sums over the class's kernels: bytes
    and FLOPs over ncu time), and memory/compute/neither_share within the class."""
    total = kernels["weight_us"].sum()
    rows = [{"class": cls, "kernels": len(g), "weight_us": g["weight_us"].sum(),
             "share": g["weight_us"].sum() / total if total > 0 else math.nan, **_rates(g), **_shares(g)}
            for cls, g in kernels.groupby("class", sort=False)]
    return pd.DataFrame(rows).sort_values("weight_us", ascending=False).reset_index(drop=True)


def run_summary(kernels: pd.DataFrame) -> dict:
    """The run's row: kernels, matched (to the trace), weight_us, dram_bytes,
    bw_GBps, flops, TFLOPs, and memory/compute/neither_share of weighted time."""
    matched = int(kernels["matched"].sum()) if "matched" in kernels else 0
    return {"kernels": len(kernels), "matched": matched, "weight_us": kernels["weight_us"].sum(),
            **_rates(kernels), **_shares(kernels)}


@dataclass
class CountersResult:
    """What the counters of one run say.

    run: the run row (:func:`run_summary`, plus device, peaks_known, csv,
    trace, join); kernels: :func:`kernel_table`; classes: :func:`class_table`;
    peaks: the device's peaks or None; no_trace_under: the traces folder where ``tracekit
    counters`` found no trace of its run to join ("" where none was looked for). Its caveats
    (kernels the trace lacks, a device without peaks, no trace) are the report's to word
    (:func:`tracekit.report.formats.counters.notes`).
    """

    run: dict
    kernels: pd.DataFrame
    classes: pd.DataFrame
    peaks: Peaks | None
    no_trace_under: str = ""

    def to_dict(self) -> dict:
        """Every table, JSON-ready after :func:`tracekit.io.jsonable`."""
        return {"run": self.run, "kernels": self.kernels.to_dict("records"),
                "classes": self.classes.to_dict("records"), "peaks": self.peaks.table() if self.peaks else []}


def analyze(csv: Path | str, trace: Path | str | None = None, device: str | None = None) -> CountersResult:
    """Analyze an ncu CSV, joined to a trace of the same workload when given.

    Args:
        csv: ncu ``--csv --page raw`` output.
        trace: a Kineto trace of the same workload, or None.
        device: the GPU's name for the peak table; None takes the trace's, else
            the one ncu recorded (``device__attribute_display_name``) if any.

    Raises:
        CountersError: the CSV cannot be read or lacks gpu__time_duration / dram bytes.
        TraceError: the trace cannot be read.
    """
    counters = parse(csv)
    missing = [m for m in M.REQUIRED if m not in counters]
    if missing:
        raise CountersError(f"{csv}: ncu CSV lacks {', '.join(missing)}")
    if trace is not None:
        tables = load(trace)
        if device is None and len(tables.devices):
            device = tables.devices["name"].iloc[0]
        counters = join(counters, tables.gpu_ops)
    if device is None and DEVICE_NAME in counters:
        device = counters[DEVICE_NAME].iloc[0]
    peaks = device_peaks(device)
    kernels = kernel_table(counters, peaks)
    run = {"device": device, "peaks_known": peaks is not None, "csv": str(csv),
           "trace": str(trace) if trace else "", "join": counters.attrs.get("join", ""),
           **run_summary(kernels)}
    return CountersResult(run=run, kernels=kernels, classes=class_table(kernels), peaks=peaks)


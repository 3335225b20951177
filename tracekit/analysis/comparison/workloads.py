"""Which runs are comparable, and the baseline run of each: the grouping of the comparison
engine (:func:`tracekit.analysis.comparison.compare.compare`).

A *workload* is the set of runs that share model, batch, seq, dtype, phase, ranks and
parallelism (``parallel``: "ddp x2"; "" for one process) and the requested device (type
and name), read from the run rows (``run.json``), never from file names. A study suite
groups by the *op* a run computes instead (``of_op``): a variant such as
``softmax4096-triton`` computes the op ``softmax4096`` and is compared with that op's own
baseline run, on the device the runs ran on (a suite's runs are cells of one grid on one
machine). In each workload the baseline is the first ok run by name of the baseline mode
(:func:`baseline_rows`).
"""

from __future__ import annotations

import math

import pandas as pd

WORKLOAD_KEYS = ("model", "batch", "seq", "dtype", "phase", "parallel", "device", "device_name")


def workloads(runs: pd.DataFrame, of_op: bool = False) -> pd.DataFrame:
    """The workload of each run that has a manifest (model and mode known).

    Args:
        runs: ``Analysis.runs`` (one row per trace file or failed run).
        of_op: group by the op a run computes (``op``, else its model) on the device it ran
            on, as a study suite does (:func:`op_workload`), instead of by model on the
            requested device.

    Returns:
        One row per run (the first trace of a run with several): the run row
        plus ``device`` (the requested device type: ``requested_device`` of the
        spec, else where it ran), ``ran_on`` (where it really ran:
        ``device_type``), ``op`` (the op it computes: its model unless it is a variant
        of an op) and ``workload`` (a label such as "vit16x6x384 b8 fp32 cuda"). Rows
        without model or mode are left out.
    """
    if runs.empty or "model" not in runs or "mode" not in runs:
        return pd.DataFrame(columns=["workload", *WORKLOAD_KEYS, "mode", "run", "ran_on", "op"])
    r = runs[runs["model"].notna() & runs["mode"].notna()].drop_duplicates("run").copy()
    r["op"] = r["op"].where(r["op"].notna(), r["model"]) if "op" in r else r["model"]
    op_label = r.assign(phase=r["phase"].fillna("inference") if "phase" in r else "inference").apply(
        op_workload, axis=1) if of_op and len(r) else None
    ran_on = r["device_type"] if "device_type" in r else pd.Series(None, index=r.index, dtype=object)
    requested = r["requested_device"] if "requested_device" in r else pd.Series(None, index=r.index, dtype=object)
    r["ran_on"] = ran_on.fillna("unknown")
    r["device"] = requested.fillna(ran_on).fillna("unknown").astype(str).str.split(":").str[0]
    r["phase"] = r["phase"].fillna("inference") if "phase" in r else "inference"
    # The requested device's name: an ONNX Runtime CPU session asked for cuda on an H100 machine
    # belongs to that H100's workload (and is flagged), not to a workload of its CPU.
    name = r["requested_device_name"] if "requested_device_name" in r else pd.Series(None, index=r.index, dtype=object)
    name = name.fillna(r["device_name"] if "device_name" in r else None).replace("", None)
    r["dtype"] = r["dtype"].fillna("") if "dtype" in r else ""
    r["parallel"] = r["parallel"].fillna("") if "parallel" in r else ""
    batch = r["batch"] if "batch" in r else pd.Series(math.nan, index=r.index)
    r["batch"] = batch
    seq = r["seq"] if "seq" in r else pd.Series(math.nan, index=r.index)  # token inputs' length (hf: models)
    r["seq"] = seq
    label = (r["model"].astype(str) + batch.map(lambda b: "" if pd.isna(b) else f" b{int(b)}")
             + seq.map(lambda s: "" if pd.isna(s) else f" s{int(s)}")
             + " " + r["dtype"] + r["phase"].map(lambda p: "" if p == "inference" else f" {p}")
             + r["parallel"].map(lambda p: f" {p}" if p else "") + " " + r["device"])
    # A run without a device name (a status row written without a process: backend missing)
    # joins its label's runs when they name one device.
    names = name.dropna().groupby(label[name.notna()]).unique()
    fill = label.map({k: v[0] for k, v in names.items() if len(v) == 1})
    r["device_name"] = name.astype(object).where(name.notna(), fill).fillna("")
    if op_label is not None:
        r["workload"] = op_label
        return r.reset_index(drop=True)
    keys = r[list(WORKLOAD_KEYS)].astype(object).fillna("").astype(str).agg("|".join, axis=1)
    # The same label on two device names (an H100 and an A100 folder) gets the name added.
    ambiguous = keys.groupby(label).transform("nunique") > 1
    r["workload"] = label.where(~ambiguous, label + " (" + r["device_name"].replace("", "unknown device") + ")")
    return r.reset_index(drop=True)


def op_workload(row) -> str:
    """A suite's workload label of one run row: "softmax4096 b8 fp16 cuda", its op (``op``),
    batch, seq, dtype, the device type it ran on, its phase unless inference and its ranks and
    parallelism where a job (``parallel``: an FSDP2 job is not compared with DDP's eager run)."""
    parts = [str(row["op"])]
    if pd.notna(row.get("batch")):
        parts.append(f"b{int(row['batch'])}")
    if pd.notna(row.get("seq")):
        parts.append(f"s{int(row['seq'])}")
    parts += [str(row.get("dtype")), str(row.get("device_type"))]
    if row.get("phase") not in (None, "inference"):
        parts.append(str(row["phase"]))
    if isinstance(row.get("parallel"), str) and row["parallel"]:
        parts.append(row["parallel"])
    return " ".join(parts)


def baseline_rows(rows: pd.DataFrame, is_baseline: pd.Series) -> pd.DataFrame:
    """The baseline run of each row's workload: the first ok run by name among those
    ``is_baseline`` marks in that workload.

    Args:
        rows: one row per run, with ``workload``, ``run`` and ``status`` columns.
        is_baseline: one bool per row of ``rows``.

    Returns:
        The baseline's row for each row of ``rows`` (same index; all NaN where its
        workload has no ok baseline run).
    """
    ok = rows[is_baseline & (rows["status"] == "ok")].sort_values("run")
    return ok.drop_duplicates("workload").set_index("workload").reindex(rows["workload"]).set_axis(rows.index)

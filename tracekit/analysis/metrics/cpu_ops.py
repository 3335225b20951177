"""CPU time by op: where a run's iterations spend host time, and what changed between modes.

A CPU-only run has no kernels, launches or GPU idle time to explain a speedup;
its ops do. Per trace, every ``cpu_op`` event (an ATen op such as
``aten::addmm``, a compiled region, an ONNX Runtime node) and every
``user_annotation`` range (Inductor's ``## Call CompiledFxGraph ##``, whose
self time is the generated code's) is counted and given its *self time*: its
duration less that of its direct children (the events of the same thread one
nesting level deeper, inside it). That is the figure torch.profiler's
``key_averages()`` table calls "Self CPU": summed over a thread it counts each
µs once, so a fused or compiled op that replaces several ATen ops shows where
the time went. The self time of the ``ProfilerStep`` markers, time of the
iteration in no op (Python, the framework, an ONNX Runtime session between its
nodes), is the row ``OUTSIDE_OPS``. Across runs, each mode is set against its
workload's baseline op by op: Δ self time and Δ calls per iteration
(:func:`changes`); the report words the largest of them as a CPU run's finding
(:func:`tracekit.report.comparison_text.cpu_ops_finding`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracekit.analysis.metrics.nest import Nest
from tracekit.analysis.registry import Inputs, Output, register
from tracekit.trace.reader import EventTables

OP_COLUMNS = ["op", "kind", "calls", "calls_per_iter", "self_us", "self_per_iter_us", "self_share", "total_us"]
CHANGE_COLUMNS = ["workload", "mode", "run", "baseline_run", "op", "kind", "calls_per_iter", "baseline_calls_per_iter",
                  "d_calls_per_iter", "self_per_iter_ms", "baseline_self_per_iter_ms", "d_self_per_iter_ms"]
OUTSIDE_OPS = "(in no op: Python, framework)"
_KINDS = {"cpu_op": "op", "user_annotation": "range"}  # event category -> kind; markers: "outside"
KINDS = ("op", "outside", "range")  # sorted, as a groupby by (op, kind) orders them
_BLOCK = 1 << 18  # ops per step of self_us's sums


def self_us(tables: EventTables) -> np.ndarray:
    """Self time (µs) of each row of ``tables.cpu_ops``: its ``dur`` less the ``dur`` of its
    direct children, never below 0.

    An op's children are the ops its thread nests directly inside it (:class:`nest.Nest`).
    """
    n = len(tables.cpu_ops)
    if n == 0:
        return np.zeros(0)
    tree = Nest.of(tables)
    dur = tree.dur.astype(np.float64, copy=False)  # a copy already: changed in place below
    # The children's time of each position, added in position order (np.add.at), a block of
    # ops at a time: no scratch index array as long as the ops.
    out = np.zeros(n)
    for at in range(0, n, _BLOCK):
        parent, part = tree.parent[at:at + _BLOCK], dur[at:at + _BLOCK]
        child = parent >= 0
        np.add.at(out, parent[child], part[child])
    dur -= out
    out[tree.order] = np.maximum(dur, 0.0, out=dur)  # its buffer reused: self times in row order
    return out


def by_op(tables: EventTables, iterations: float | None) -> pd.DataFrame:
    """CPU ops of one trace grouped by name.

    Args:
        tables: the trace's event tables.
        iterations: iterations the trace holds (NaN or None: per-iteration figures NaN).

    Returns:
        OP_COLUMNS, one row per op name, most self time first: kind ("op": a
        ``cpu_op`` event, as summary's ``cpu_ops`` counts; "range": a
        ``user_annotation``; "outside": ``OUTSIDE_OPS``), calls, calls_per_iter,
        self_us and self_per_iter_us (µs), self_share (of all self time),
        total_us (sum of durations, children included); the iteration markers'
        self time is the row ``OUTSIDE_OPS``. Empty without CPU ops.
    """
    cpu = tables.cpu_ops
    if cpu.empty:
        return pd.DataFrame(columns=OP_COLUMNS)
    # Names and categories as codes (the reader's categoricals): string work once per distinct value.
    cats, names = pd.Categorical(cpu["cat"]), pd.Categorical(cpu["name"])
    kind = np.array([KINDS.index(_KINDS[c]) if c in _KINDS else -1 for c in cats.categories], dtype=np.int8)
    kind = kind[cats.codes]
    step = np.asarray(names.categories.str.startswith("ProfilerStep#"), dtype=bool)
    keep = kind >= 0
    if not keep.any():
        return pd.DataFrame(columns=OP_COLUMNS)
    every = bool(keep.all())  # then no copies of full-length columns to drop rows that are not there

    def kept(values: np.ndarray) -> np.ndarray:
        return values if every else values[keep]
    self_time = kept(self_us(tables))  # first: its scratch arrays are freed before the keys are made
    kind = kept(np.where(step[names.codes], np.int8(KINDS.index("outside")), kind))
    ops, op = np.unique(np.where(step, OUTSIDE_OPS, names.categories.to_numpy(dtype=object)), return_inverse=True)
    key = (op.astype(np.int32) * np.int32(len(KINDS)))[kept(names.codes)]  # (op, kind) as one int
    key += kind
    del kind
    # grouped as codes of a categorical: no hashing, half the scratch memory of grouping by int
    key = pd.Categorical.from_codes(key, categories=pd.RangeIndex(len(ops) * len(KINDS)), validate=False)
    out = pd.DataFrame({"key": key, "dur": kept(cpu["dur"].to_numpy()), "self_us": self_time}, copy=False)
    out = out.groupby("key", observed=True).agg(calls=("dur", "size"), self_us=("self_us", "sum"),
                                                total_us=("dur", "sum"))
    key = out.index.to_numpy()
    out = out.reset_index(drop=True).assign(op=ops[key // len(KINDS)],
                                            kind=np.array(KINDS, dtype=object)[key % len(KINDS)])
    n = iterations if iterations and not math.isnan(iterations) else math.nan
    out["calls_per_iter"] = out["calls"] / n
    out["self_per_iter_us"] = out["self_us"] / n
    total = out["self_us"].sum()
    out["self_share"] = out["self_us"] / total if total > 0 else math.nan
    return out.sort_values(["self_us", "op"], ascending=[False, True])[OP_COLUMNS].reset_index(drop=True)


def changes(ops: pd.DataFrame, comparison: pd.DataFrame) -> pd.DataFrame:
    """Op by op, each CPU-only run against its baseline run.

    Args:
        ops: ``Analysis.table("cpu_ops")`` (:func:`by_op` rows with run and trace).
            Of a run with several traces (ONNX Runtime's own profile beside the
            torch trace, whose iterations spend their time in no torch op) the
            one with the most op self time is taken: :func:`main_traces`.
        comparison: :func:`tracekit.analysis.comparison.compare.compare` rows (workload, mode,
            run, baseline_run, has_gpu, baseline_has_gpu).

    Returns:
        CHANGE_COLUMNS, for every run whose run and baseline have no GPU
        activity and both have ops: per op in either, calls and self time
        (ms) per iteration of the run and the baseline, and the run minus the
        baseline (an op absent on one side counts 0 there); largest |Δ self
        time| first within each run.
    """
    if ops.empty or comparison.empty or "has_gpu" not in comparison:
        return pd.DataFrame(columns=CHANGE_COLUMNS)
    main = ops[ops["trace"].isin(main_traces(ops).values)]
    per_run = main.groupby(["run", "op", "kind"])[["calls_per_iter", "self_per_iter_us"]].sum()
    cpu = comparison[(comparison["baseline_run"] != "") & (comparison["run"] != comparison["baseline_run"])
                     & ~comparison["has_gpu"].fillna(True).astype(bool)
                     & ~comparison["baseline_has_gpu"].fillna(True).astype(bool)]
    parts = []
    known = set(per_run.index.get_level_values("run"))
    for r in cpu.to_dict("records"):
        if r["run"] not in known or r["baseline_run"] not in known:
            continue
        both = pd.merge(per_run.loc[r["run"]], per_run.loc[r["baseline_run"]], how="outer", left_index=True,
                        right_index=True, suffixes=("", "_base")).fillna(0.0)
        parts.append(pd.DataFrame({
            "workload": r["workload"], "mode": r["mode"], "run": r["run"], "baseline_run": r["baseline_run"],
            "op": both.index.get_level_values("op"), "kind": both.index.get_level_values("kind"),
            "calls_per_iter": both["calls_per_iter"].to_numpy(),
            "baseline_calls_per_iter": both["calls_per_iter_base"].to_numpy(),
            "self_per_iter_ms": both["self_per_iter_us"].to_numpy() / 1e3,
            "baseline_self_per_iter_ms": both["self_per_iter_us_base"].to_numpy() / 1e3}))
    if not parts:
        return pd.DataFrame(columns=CHANGE_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    out["d_calls_per_iter"] = out["calls_per_iter"] - out["baseline_calls_per_iter"]
    out["d_self_per_iter_ms"] = out["self_per_iter_ms"] - out["baseline_self_per_iter_ms"]
    out = out.assign(_size=out["d_self_per_iter_ms"].abs()).sort_values(
        ["workload", "mode", "run", "_size", "op"], ascending=[True, True, True, False, True], kind="stable")
    return out[CHANGE_COLUMNS].reset_index(drop=True)


def per_run(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run (index), of its trace with the most CPU op time (ONNX Runtime's own profile,
    not the torch trace around it): ms (time any CPU op ran, per profiled iteration) and
    calls (``cpu_op`` events per iteration), from ``Analysis.runs``."""
    def col(name):
        return pd.to_numeric(runs[name], errors="coerce") if name in runs else math.nan
    if runs.empty or "run" not in runs:
        return pd.DataFrame(columns=["ms", "calls"])
    per_trace = pd.DataFrame({"run": runs["run"], "ms": col("cpu_op_busy_per_iter_us") / 1e3,
                              "calls": col("cpu_ops") / col("iterations")})
    return per_trace.sort_values("ms").drop_duplicates("run", keep="last").set_index("run")


def main_traces(ops: pd.DataFrame) -> pd.Series:
    """run -> the trace of ``ops`` (``Analysis.table("cpu_ops")``) with the most op self
    time per iteration, ``OUTSIDE_OPS`` left out."""
    inside = ops[ops["kind"] != "outside"].groupby(["run", "trace"])["self_per_iter_us"].sum()
    return inside.groupby(level="run").idxmax().map(lambda key: key[1]) if len(inside) else pd.Series(dtype=object)


@register("cpu_ops", reads=("cpu_ops", "nest"), order=58, tables=("cpu_ops",))
def _cpu_ops_analysis(x: Inputs) -> Output:
    """CPU ops by name (:func:`by_op`)."""
    return Output(tables={"cpu_ops": by_op(x.tables, x.row["iterations"])})

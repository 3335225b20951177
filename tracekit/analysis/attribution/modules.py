"""Attribution tables: what each module and op costs the GPU (issue 20).

From the per-op attribution of :func:`tracekit.analysis.attribution.gpu_ops.attribute`:

* GPU busy time is split exactly among ops: time when k ops run at once (several
  streams) counts 1/k for each (:func:`tracekit.analysis.metrics.intervals.busy_shares`),
  so module busy times sum to the run's ``gpu_busy_us``.
* An idle gap of the device (:func:`tracekit.analysis.metrics.idle.gaps`, streams merged)
  belongs to the op that ends it (the GPU was waiting to run it), with its cause,
  so module idle times sum to the run's ``idle_<cause>_us``.
* A launch (a correlation id of GPU ops) counts once, for the innermost module holding all the
  ops it enqueued: an eager kernel's own module; a ``cudaGraphLaunch`` replaying the
  whole model, the model (""). So module launches sum to ``host_launches``, and the
  launches a CUDA graph absorbed leave their modules. ``launch_cpu_us`` is the launch
  call's duration.
* ``host_us``: time the host spent in a module's own scope (its
  ``module::`` range less its submodules' ranges), where the run recorded scopes.

Depth: a module path is cut to its first ``depth`` parts (``blocks.3.mlp.fc1`` at
depth 3 is ``blocks.3.mlp``); ``(unattributed)`` stays a row of its own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.attribution.gpu_ops import UNATTRIBUTED, attribute, common_module
from tracekit.analysis.attribution.opnames import SCOPE_PREFIX
from tracekit.analysis.metrics import categorical, idle
from tracekit.analysis.metrics.intervals import busy_shares
from tracekit.analysis.metrics.nest import Nest
from tracekit.analysis.registry import Inputs, Output, register
from tracekit.manifest import Attribution
from tracekit.trace.reader import EventTables

KEYS = ["module", "op", "kernel", "rule"]
SUMS = ["gpu_ops", "kernels", "busy_us", "launches", "launch_cpu_us",
        *[f"idle_{c}_us" for c in idle.CAUSES], "idle_us"]
DEFAULT_DEPTH = 3


def attributed_ops(tables: EventTables, record: Attribution | None = None, gaps: pd.DataFrame | None = None,
                   att: pd.DataFrame | None = None) -> pd.DataFrame:
    """:func:`attribute`'s rows plus busy_us (share of busy time), idle_<cause>_us
    (the gap before the op), and, on the first op of each launch, launches (1),
    launch_cpu_us and the launch's own keys (launch_module, launch_op, launch_kernel).
    ``gaps``: :func:`idle.gaps` of ``tables`` if already computed; ``att``:
    ``attribute(tables, record)`` if already made (this adds its columns to it), so that
    the caller can free the CPU-op nest first: nothing here reads it."""
    att = attribute(tables, record) if att is None else att
    busy = np.zeros(len(att))
    ts, dur = att["ts"].to_numpy(), att["dur"].to_numpy()
    for _device, idx in att.groupby("device").indices.items():
        busy[idx] = busy_shares(ts[idx], ts[idx] + dur[idx])
    att["busy_us"] = busy   # (pandas copies an array set as a column: each is dropped once set)
    del busy
    idle_us = {c: np.zeros(len(att)) for c in idle.CAUSES}
    device_of = att["device"].to_numpy()
    gaps = idle.gaps(tables) if gaps is None else gaps
    gap_end, gap_us, cause = (gaps[c].to_numpy() for c in ("end", "gap_us", "cause"))
    for device, rows in gaps.groupby("device").indices.items():   # positions, not a copy per device
        ops = np.flatnonzero(device_of == device)   # the device's ops (positions), by start
        ops = ops[np.argsort(ts[ops], kind="stable")]
        at = ops[np.minimum(np.searchsorted(ts[ops], gap_end[rows]), len(ops) - 1)]
        for c, part in pd.Series(cause[rows]).groupby(cause[rows]).indices.items():
            np.add.at(idle_us[c], at[part], gap_us[rows[part]])
    for c in idle.CAUSES:
        att[f"idle_{c}_us"] = idle_us.pop(c)
    att["idle_us"] = att[[f"idle_{c}_us" for c in idle.CAUSES]].sum(axis=1)
    calls = idle.launch_index(tables)
    att["launch_module"], att["launch_op"], att["launch_kernel"] = att["module"], att["op"], att["kernel"]
    # Positions, not labels (no index of the frame's labels is built): a launch is a correlation
    # id, as summary.summarize counts them; its first op by start gets its count and call time.
    correlation = att["correlation"].to_numpy()
    launched = np.flatnonzero(correlation >= 0)
    by_start = launched[np.argsort(ts[launched], kind="stable")]
    first = by_start[~pd.Series(correlation[by_start]).duplicated().to_numpy()]
    launches, launch_cpu = np.zeros(len(att), dtype=np.int64), np.zeros(len(att))
    launches[first] = 1
    launch_cpu[first] = pd.Series(correlation[first]).map(calls["dur"]).fillna(0.0).to_numpy()
    att["launches"], att["launch_cpu_us"] = launches, launch_cpu
    del launches, launch_cpu
    multi = att.iloc[launched[pd.Series(correlation[launched]).duplicated(keep=False).to_numpy()]]  # of several ops
    kinds = multi.groupby("correlation")[["module", "op", "kernel"]].nunique().max(axis=1)
    many = multi[multi["correlation"].isin(kinds.index[kinds > 1])]
    if len(many):  # a launch of several kinds of ops (a CUDA graph): the module holding them all
        def holding(paths: pd.Series) -> str:
            known = set(paths.tolist()) - {UNATTRIBUTED}
            return common_module(sorted(known)) if known else UNATTRIBUTED
        holder = many.groupby("correlation")["module"].agg(holding)
        at = first[np.isin(correlation[first], holder.index.to_numpy())]
        launcher = pd.Series(correlation[at]).map(calls["name"]).astype(object)  # the reader's names are categorical
        for col, values in (("launch_module", pd.Series(correlation[at]).map(holder).to_numpy(dtype=object).tolist()),
                            ("launch_op", ""), ("launch_kernel", launcher.fillna("launch").tolist())):
            att[col] = categorical.assign(att[col].array, at, values)
    return att


def long_table(att: pd.DataFrame) -> pd.DataFrame:
    """One row per (module, op, kernel, rule): the sums ``SUMS`` (µs, counts) over the
    trace. GPU-op figures come from each op's own keys, launches from the launch's."""
    if att.empty:
        return pd.DataFrame(columns=KEYS + SUMS)
    work = att.assign(gpu_ops=1, kernels=(att["kind"] == "kernel").astype(int))
    ops = work.groupby(KEYS, sort=False, observed=True)[[c for c in SUMS if not c.startswith("launch")]].sum()
    own = {"launch_module": "module", "launch_op": "op", "launch_kernel": "kernel"}   # a launch's own keys
    launch = att.loc[att["launches"] > 0, [*own, "rule", "launches", "launch_cpu_us"]].rename(columns=own)
    launch = launch.groupby(KEYS, sort=False, observed=True)[["launches", "launch_cpu_us"]].sum()
    ops.index, launch.index = _as_text(ops.index), _as_text(launch.index)  # joined as strings, not categories
    out = ops.join(launch, how="outer").fillna(0).reset_index()
    for c in ("gpu_ops", "kernels", "launches"):
        out[c] = out[c].astype(np.int64)
    return out[KEYS + SUMS].sort_values("busy_us", ascending=False).reset_index(drop=True)


def _as_text(index: pd.MultiIndex) -> pd.MultiIndex:
    """``index`` (groups by categorical keys) with string levels, in the same order."""
    return pd.MultiIndex.from_arrays([index.get_level_values(i).astype("str") for i in range(index.nlevels)],
                                     names=index.names)


def cut(module: pd.Series, depth: int) -> pd.Series:
    """Module paths cut to ``depth`` parts; ``(unattributed)`` unchanged."""
    short = module.str.split(".").str[:depth].str.join(".")
    return short.where(module != UNATTRIBUTED, UNATTRIBUTED)


def scope_times(tables: EventTables) -> pd.Series:
    """Host time (µs) in each module's own scope: its ``module::`` ranges less the
    ranges of the scopes directly inside them, summed per path. Empty without scopes."""
    cpu = tables.cpu_ops
    if cpu.empty or not pd.Categorical(cpu["name"]).categories.str.startswith(SCOPE_PREFIX).any():
        return pd.Series(dtype=float)
    nest = Nest.of(tables)
    is_scope = nest.per_name(lambda n: n.startswith(SCOPE_PREFIX))
    at = np.flatnonzero(is_scope)
    up = nest.ancestor(np.where(nest.parent[at] >= 0, nest.parent[at], -1), is_scope)
    own = pd.Series(nest.dur[at], index=at)
    inner = own[up >= 0].groupby(up[up >= 0]).sum()
    own = own.sub(inner, fill_value=0)
    path = nest.at(at, nest.by_name(lambda n: n[len(SCOPE_PREFIX):], object), "")
    return own.groupby(pd.Series(path, index=at)).sum()


def by_module(long: pd.DataFrame, depth: int = DEFAULT_DEPTH, iterations: float | None = None,
              host: pd.Series | None = None) -> pd.DataFrame:
    """Per module cut to ``depth``: module, depth, the ``SUMS``, busy_share (of the
    run's GPU busy time), host_us (NaN where no scope was recorded), per-iteration
    busy/kernels/launches (``_per_iter``), and ops (the ops of its kernels, most busy
    first, with their GPU ops per iteration: ``(("addmm", 2.0), ("gelu", 1.0), ...)``, NaN
    without GPU ops; the report words them: ``addmm x2, gelu``); sorted by busy time."""
    if long.empty:
        return pd.DataFrame(columns=["module", "depth", *SUMS, "busy_share", "host_us", "ops"])
    work = long.assign(module=cut(long["module"], depth))
    out = work.groupby("module")[SUMS].sum()
    total = out["busy_us"].sum()
    out["busy_share"] = out["busy_us"] / total if total > 0 else np.nan
    if host is not None and len(host):  # modules with host time only get a row too
        own = host.groupby(cut(pd.Series(host.index, index=host.index), depth).to_numpy()).sum()
        out = out.reindex(out.index.union(own.index)).fillna({c: 0 for c in SUMS + ["busy_share"]})
        out["host_us"] = own
    else:
        out["host_us"] = np.nan
    out.index.name = "module"
    n = iterations if iterations and iterations == iterations else 1
    out["ops"] = work[work["gpu_ops"] > 0].groupby("module").apply(lambda rows: _ops(rows, n), include_groups=False)
    out = out.reset_index()
    out.insert(1, "depth", [0 if m in ("", UNATTRIBUTED) else m.count(".") + 1 for m in out["module"]])
    _per_iter(out, iterations)
    return out.sort_values("busy_us", ascending=False).reset_index(drop=True)


def by_op(long: pd.DataFrame, depth: int = DEFAULT_DEPTH, iterations: float | None = None) -> pd.DataFrame:
    """Per (module cut to ``depth``, op): the ``SUMS`` and per-iteration figures,
    sorted by busy time."""
    if long.empty:
        return pd.DataFrame(columns=["module", "op", *SUMS])
    out = long.assign(module=cut(long["module"], depth)).groupby(["module", "op"])[SUMS].sum().reset_index()
    _per_iter(out, iterations)
    return out.sort_values("busy_us", ascending=False).reset_index(drop=True)


def per_iteration(att: pd.DataFrame) -> pd.DataFrame:
    """Per marked iteration: step, gpu_ops, busy_us, attributed_busy_us, coverage
    (attributed share of busy time), unattributed_ops."""
    a = att[att["iteration"] >= 0]
    if a.empty:
        return pd.DataFrame(columns=["step", "gpu_ops", "busy_us", "attributed_busy_us", "coverage",
                                     "unattributed_ops"])
    known = a["module"] != UNATTRIBUTED
    out = a.assign(attributed=a["busy_us"].where(known, 0.0), unknown=(~known).astype(int)).groupby("iteration").agg(
        gpu_ops=("busy_us", "size"), busy_us=("busy_us", "sum"), attributed_busy_us=("attributed", "sum"),
        unattributed_ops=("unknown", "sum"))
    out["coverage"] = out["attributed_busy_us"] / out["busy_us"].where(out["busy_us"] > 0)
    return out.rename_axis("step").reset_index()


def coverage(long: pd.DataFrame) -> float:
    """Share of GPU busy time attributed to a module (NaN without GPU ops)."""
    total = long["busy_us"].sum() if len(long) else 0.0
    return float(long.loc[long["module"] != UNATTRIBUTED, "busy_us"].sum() / total) if total > 0 else float("nan")


def _per_iter(out: pd.DataFrame, iterations: float | None) -> None:
    n = iterations if iterations and iterations == iterations else np.nan
    for col, name in (("busy_us", "busy_per_iter_us"), ("kernels", "kernels_per_iter"),
                      ("launches", "launches_per_iter")):
        out[name] = out[col] / n


def _ops(rows: pd.DataFrame, iterations: float) -> tuple:
    """``(("addmm", 2.0), ("gelu", 1.0))``: a module's ops by busy time, with their GPU ops per iteration."""
    per = rows.groupby("op").agg(busy=("busy_us", "sum"), n=("gpu_ops", "sum")).sort_values("busy", ascending=False)
    return tuple((op, n / iterations) for op, n in zip(per.index, per["n"]))


@register("modules", reads=("cpu_ops", "nest"))
def _modules_analysis(x: Inputs) -> Output:
    """Host time in each module's scopes (:func:`scope_times`), for ``attribution_modules``."""
    return Output(value=scope_times(x.tables))


@register("attribution_tables", reads=("gpu_ops", "host_calls"), needs=("attribution", "idle"), uses=("modules",),
          order=90, columns={"attributed_busy_share": "share"},
          tables=("attribution", "attribution_modules", "attribution_ops", "attribution_iterations"),
          default=Output(row={"attributed_busy_share": float("nan")}))
def _attribution_tables_analysis(x: Inputs) -> Output:
    """The trace's tables by module and op (:func:`long_table`, :func:`by_module` at
    :data:`DEFAULT_DEPTH`, :func:`by_op`, :func:`per_iteration`) and the attributed share of its
    busy time (:func:`coverage`); with the critical path, each GPU op's module and op for it."""
    att = x["attribution"]
    names = att[["module", "op"]] if x.options.critical_path else None
    att = attributed_ops(x.tables, gaps=x["idle"], att=att)
    long, n = long_table(att), x.row["iterations"]
    return Output(row={"attributed_busy_share": coverage(long)}, value=names, tables={
        "attribution": long, "attribution_modules": by_module(long, DEFAULT_DEPTH, n, x["modules"]),
        "attribution_ops": by_op(long, DEFAULT_DEPTH, n), "attribution_iterations": per_iteration(att)})

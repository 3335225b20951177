"""Which module and which aten op launched each GPU op (issue 20).

Every GPU op (kernel, memcpy, memset) gets a ``module`` path (``blocks.3.mlp``; ""
is the model itself), an ``op`` (aten op names, ``+``-joined for a fused kernel) and
the ``rule`` that found them. The launch call of an op (by correlation id) is placed
in the nest of CPU ops of its thread; the first rule that applies wins:

1. ``graph capture``: the op is replayed by a CUDA graph (``cudaGraphLaunch``) whose
   capture the runner recorded (run.json ``attribution.captures``, from
   :func:`tracekit.analysis.attribution.graph_capture.captured_launches`): the i-th op of
   the replay, by start time, is the i-th launch of the capture (a graph captured on one
   stream replays in capture order). The capture is the one of the same graph call (FX graph key) with as many launches
   as the replay has ops (a compiled graph split in several CUDA graphs has several),
   and the replay must run on one stream.
2. ``graph replay (kernel name)``: without that record, a replayed Triton kernel is
   matched by name like rule 3: its k-th occurrence in the replay is the k-th call
   site of that kernel in the graph's generated code.
3. ``inductor provenance``: the launch lies in a ``## Call CompiledFxGraph <key> ##``
   range whose graph the runner recorded (run.json ``attribution.provenance``,
   :class:`tracekit.capture.provenance.InductorProvenance`). The CPU op directly inside that
   range (a ``triton_*`` kernel's range, or ``aten::mm`` for a library call) is the
   k-th of its name in this call of the graph, and the generated code makes its
   calls in a fixed order: it is the k-th call site of that name, which lists the
   modules and aten ops of the FX nodes it computes (less those an earlier call
   computed: recomputed inputs). A fused kernel's module is the innermost module
   holding all its nodes (their common path prefix). A copy op there that is no call
   site (``graph input copy``: cudagraph trees copying a replay's inputs into the
   graph's buffers) belongs to the module the graph computes (its call sites' common one).
4. ``module scope``: the innermost ``module::<path>`` range (the runner's scopes,
   :func:`tracekit.capture.module_scopes.module_scopes`) around the launch; the op is the
   innermost ``aten::`` op around it.
5-6. ``backward of a module``, ``optimizer``: a training step's backward kernels (by autograd's
   sequence numbers) and its optimizer's (:mod:`tracekit.analysis.attribution.training`).

Otherwise the module is ``(unattributed)`` with the reason as the rule (``none:
...``); the op is still given where known (the innermost aten op, or the ops a
Triton kernel's name lists: Inductor names kernels after the original aten ops
they compute, torch/_inductor/codegen/triton.py). Nothing is dropped. A module
found by rules 1-3 inside a module scope (a compiled submodule in an eager model) is
prefixed with that scope's path. Op names lose the ``aten::`` prefix, and a few
implementation ops take the name of the public op they serve
(:data:`tracekit.analysis.attribution.opnames.OP_ALIASES`), so eager and compiled runs
name the same work alike.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.attribution.opnames import SCOPE_PREFIX, kernel_ops, normalize_op
from tracekit.analysis.attribution.training import training_rules
from tracekit.analysis.metrics import categorical
from tracekit.analysis.metrics.idle import launch_index, op_iterations
from tracekit.analysis.metrics.kernels import short_name
from tracekit.analysis.metrics.nest import Nest
from tracekit.analysis.registry import Inputs, Output, register
from tracekit.manifest import Attribution
from tracekit.trace.reader import EventTables

REGION_PREFIX = "Torch-Compiled Region: "
GRAPH_CALL = re.compile(r"^## Call CompiledFxGraph (\S+) ##$")
# Ranges torch puts between a graph's call and its generated code's call sites: cudagraph
# trees time the recording of a graph as ``CUDAGraphNode.record (dynamo_timed)``
# (torch._inductor.cudagraph_trees; seen with torch 2.11 on the H100), so the call sites of a
# captured graph sit one level below the graph's call.
CALL_WRAPPER = re.compile(r"^CUDAGraph\w*\.\w+( \(dynamo_timed\))?$")
# Copies a graph's call makes outside its generated code: cudagraph trees copy the inputs into the
# graph's static buffers before a replay (torch._inductor.cudagraph_trees, ``_copy_inputs_and_remove_from_src``
# with torch._foreach_copy_). They are the compiled module's work, not one of its submodules'.
INPUT_COPIES = frozenset({"_foreach_copy_", "copy_"})
UNATTRIBUTED = "(unattributed)"
MODEL = "(model)"  # how reports name the model's own module, whose path is "" (the root)


def module_label(path: str) -> str:
    """A module path as reports show it: the root module ("") as :data:`MODEL`."""
    return path or MODEL
GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "cudaGraphLaunch_v10000", "cuGraphLaunch", "hipGraphLaunch"})
def common_module(paths: list[str]) -> str:
    """The innermost module holding all ``paths`` (their common dotted prefix; "" for the model)."""
    if not paths:
        return ""
    parts = [p.split(".") if p else [] for p in paths]
    out = []
    for level in zip(*parts):
        if len(set(level)) > 1:
            break
        out.append(level[0])
    return ".".join(out)


def _join(scope: str, path: str) -> str:
    return f"{scope}.{path}" if scope and path else scope or path


def _sites(record: Attribution | None) -> dict[str, dict[str, list]]:
    """Provenance call sites: graph key -> normalized call name -> [(modules, ops)] in call order."""
    out: dict[str, dict[str, list]] = {}
    for graph in (record.provenance.graphs if record and record.provenance else None) or []:
        by_name: dict[str, list] = {}
        for kernel, _handle, modules, ops in graph.get("calls", []):
            by_name.setdefault(normalize_op(kernel), []).append((modules, ops))
        out[graph.get("key", "")] = by_name
    return out


def _graph_module(by_name: dict[str, list]) -> str:
    """The module a compiled graph computes: the innermost one holding all its call sites' modules."""
    return common_module([p for calls in by_name.values() for paths, _ in calls for p in paths])


def launch_rules(tables: EventTables, calls: pd.DataFrame, record: Attribution | None) -> pd.DataFrame:
    """Rules 3-4 for launch calls (rows of ``tables.host_calls``).

    Returns one row per call (same index), categorical columns (:mod:`tracekit.analysis.metrics.categorical`):
    module (missing when not found), op, rule, graph (the FX graph key of the ``## Call
    CompiledFxGraph`` range around it, "" if none), region ("0/0": the ``Torch-Compiled
    Region`` around it, "" if none).
    """
    n = len(calls)
    out = pd.DataFrame({"module": categorical.constant(n, None), "op": categorical.constant(n, ""),
                        "rule": categorical.constant(n, "none: outside module scopes"),
                        "graph": categorical.constant(n, ""), "region": categorical.constant(n, "")}, index=calls.index)
    if calls.empty or tables.cpu_ops.empty:
        return out
    nest = Nest.of(tables)
    inner = nest.innermost(nest.threads_of(calls), calls["ts"].to_numpy())

    def around(test) -> np.ndarray:  # the innermost op around each call whose name passes ``test``
        mask = nest.by_name(test)
        return nest.ancestor(inner, mask[nest.codes]) if mask.any() else np.full(n, -1)
    scope = around(lambda n: n.startswith(SCOPE_PREFIX))
    aten = around(lambda n: n.startswith("aten::"))
    region = around(lambda n: n.startswith(REGION_PREFIX))
    paths = nest.by_name(lambda n: n[len(SCOPE_PREFIX):], object)
    out["region"] = nest.coded_at(region, nest.by_name(lambda n: n[len(REGION_PREFIX):], object), "")
    normalized = nest.by_name(normalize_op, object)
    out["op"] = nest.coded_at(aten, normalized, "")
    out["module"] = nest.coded_at(scope, paths, None)                                  # rule 4
    out["rule"] = categorical.assign(out["rule"].array, scope >= 0, "module scope")
    if "sequence" in tables.cpu_ops:                                                    # rules 5-6
        training_rules(out, nest, tables.cpu_ops["sequence"].to_numpy()[nest.order], inner, scope, paths)
    keys = nest.by_name(lambda n: m.group(1) if (m := GRAPH_CALL.match(n)) else None, object)
    call, site_of, has_key = np.full(n, -1), {}, pd.notna(keys)
    if has_key.any():
        # a call site: its parent, past any wrapper ranges, is a graph's call
        wrapper = nest.per_name(lambda n: CALL_WRAPPER.match(n) is not None)
        parent = nest.ancestor(nest.parent, ~wrapper)
        is_call = np.zeros(len(wrapper), dtype=bool)
        up = parent >= 0
        is_call[up] = has_key[nest.codes[parent[up]]] & ~wrapper[up]
        call = nest.ancestor(inner, is_call)
        out["graph"] = nest.coded_at(nest.ancestor(inner, has_key[nest.codes]), keys, "")
        # Rule 3: the k-th call op of a name in one call of a graph is the k-th call site of that name.
        calls_at = np.flatnonzero(is_call)
        group = pd.DataFrame({"parent": parent[calls_at], "name": normalized[nest.codes[calls_at]]})
        by = group.groupby(["parent", "name"], sort=False)
        site_of = dict(zip(calls_at, zip(group["name"], by.cumcount(), by["name"].transform("size"))))
    hits = np.flatnonzero(call >= 0)
    if len(hits):
        _rule3(out, hits, call[hits], site_of, nest.at(scope[hits], paths, ""), _sites(record))
    outside = (out["region"] != "").to_numpy() & (call < 0) & (scope < 0)
    out["rule"] = categorical.assign(out["rule"].array, outside, "none: compiled region, outside its generated code")
    return out


def _rule3(out: pd.DataFrame, hits: np.ndarray, calls: np.ndarray, site_of: dict, scope_path: np.ndarray,
           sites: dict) -> None:
    """Rule 3 for the launches at positions ``hits`` of ``out`` (in place), inside the call
    sites ``calls`` (nest positions; ``site_of``: call site -> (name, k, count)) of a compiled
    graph, and inside the module scopes ``scope_path`` ("" for none)."""
    graphs = out["graph"].array
    graph = graphs.categories.to_numpy(dtype=object)[graphs.codes[hits]]
    module, rule, op_at, ops = [], [], [], []
    for i, (g, at, scope) in enumerate(zip(graph, calls, scope_path)):
        name, k, count = site_of[at]
        found, m = sites.get(g, {}).get(name), None
        if g not in sites:
            r = f"none: compiled graph {g[:12]} without provenance"
        elif found is None and name in INPUT_COPIES:  # cudagraph trees stage the inputs of a graph replay
            m, r = _join(scope, _graph_module(sites[g])), "graph input copy"
        elif found is None:
            r = f"none: {name} is no call site of the graph's generated code"
        elif len(found) != count:
            r = "none: call count differs from the graph's call sites"
        elif not found[k][0]:
            r = "none: provenance without module paths (a cache hit)"
        else:
            paths, names = found[k]
            m, r = _join(scope, common_module(paths)), "inductor provenance"
            op_at.append(hits[i])
            ops.append("+".join(sorted({normalize_op(o) for o in names})))
        module.append(m)
        rule.append(r)
    out["module"] = categorical.assign(out["module"].array, hits, module)
    out["rule"] = categorical.assign(out["rule"].array, hits, rule)
    if op_at:
        out["op"] = categorical.assign(out["op"].array, np.array(op_at), ops)


def attribute(tables: EventTables, record: Attribution | None = None) -> pd.DataFrame:
    """Attribute every GPU op of ``tables`` (see the module docstring).

    Args:
        tables: a trace's event tables.
        record: run.json's ``attribution`` (module scopes, Inductor provenance,
            CUDA-graph captures), or None.

    Returns:
        One row per GPU op, index aligned with ``tables.gpu_ops``: module (path, ""
        for the model itself, ``UNATTRIBUTED``), op, kernel (short name), kind,
        rule, region (compiled region id, "" if none), replay (True for an op
        replayed by a CUDA graph), correlation, device, stream, ts, dur (µs),
        iteration (ProfilerStep, -1 outside). module, op, kernel, rule and region
        are categorical (:mod:`tracekit.analysis.metrics.categorical`).
    """
    ops = tables.gpu_ops
    calls = launch_index(tables)[["name", "pid", "tid", "ts"]]   # what the rules read: a smaller copy
    calls = calls[calls.index.isin(ops["correlation"])]
    rules = launch_rules(tables, calls, record)
    call = calls.index.get_indexer(ops["correlation"])  # each op's launch call (row of calls), -1 if none
    att = pd.DataFrame({"kernel": categorical.per_value(ops["name"], short_name), "kind": ops["kind"]}, index=ops.index)
    for col, default in (("module", None), ("op", ""), ("rule", "none: no launch call in the trace"), ("region", "")):
        att[col] = categorical.take(rules[col].array, call, default)
    known = call >= 0
    att["replay"] = np.where(known, calls["name"].isin(GRAPH_LAUNCHES).to_numpy()[np.maximum(call, 0)], False) \
        if len(calls) else False
    att = att.assign(correlation=ops["correlation"], device=ops["device"], stream=ops["stream"], ts=ops["ts"],
                     dur=ops["dur"])[["module", "op", "kernel", "kind", "rule", "region", "replay", "correlation",
                                      "device", "stream", "ts", "dur"]]
    if att["replay"].any():
        _replays(att, pd.Series(categorical.take(rules["graph"].array, call, ""), index=att.index), record)
    named = (att["op"] == "").to_numpy()
    if named.any():  # no aten op known: the ops a Triton kernel's name lists
        kernel = att["kernel"].array
        ops_of = categorical.remap(kernel.codes[named], ["+".join(kernel_ops(k)) for k in kernel.categories])
        att["op"] = categorical.assign(att["op"].array, named, ops_of)
    att["module"] = categorical.assign(att["module"].array, att["module"].isna().to_numpy(), UNATTRIBUTED)
    att["iteration"] = op_iterations(tables, ops)
    return att


@register("attribution", reads=("gpu_ops", "host_calls", "cpu_ops", "markers", "nest"))
def _attribution_analysis(x: Inputs) -> Output:
    """Each GPU op's module and op (:func:`attribute`, with run.json's record), for the tables by
    module (:mod:`tracekit.analysis.attribution.modules`, which adds its sums' columns to the frame)."""
    return Output(value=attribute(x.tables, x.run.attribution))


def _replays(att: pd.DataFrame, graph: pd.Series, record: Attribution | None) -> None:
    """Rules 1-2 for the ops of CUDA-graph launches, in place."""
    replay = att[att["replay"]].sort_values(["ts", "stream"])
    if replay.empty:
        return
    key = graph[replay.index].to_numpy(dtype=object)
    by_launch = replay.groupby("correlation", sort=False)
    pos, size = by_launch.cumcount().to_numpy(), by_launch["ts"].transform("size").to_numpy()
    one_stream = (by_launch["stream"].transform("nunique") == 1).to_numpy()
    by_kernel = replay.groupby(["correlation", "kernel"], sort=False)
    rank, same = by_kernel.cumcount().to_numpy(), by_kernel["ts"].transform("size").to_numpy()
    captures: dict[tuple[str, int], list] = {}   # (graph key, launches) -> the latest such capture
    for c in (record.captures if record else None) or []:
        captures[(c["graph"], len(c["launches"]))] = c["launches"]
    sites = _sites(record)
    found = []
    for i, (g, kernel) in enumerate(zip(key, replay["kernel"].to_numpy(dtype=object))):
        launches = captures.get((g, size[i]))
        if launches is not None and one_stream[i]:
            m, o, r = launches[pos[i]]
            found.append((m, o, r if m is None else "graph capture"))
        elif (calls := sites.get(g, {}).get(kernel)) and len(calls) == same[i]:
            paths, names = calls[rank[i]]
            found.append((common_module(paths), "+".join(sorted({normalize_op(o) for o in names})),
                          "graph replay (kernel name)"))
        else:
            found.append((None, "", "none: CUDA graph replay without a recorded capture"))
    at = att.index.get_indexer(replay.index)
    for col, values in zip(("module", "op", "rule"), zip(*found)):
        att[col] = categorical.assign(att[col].array, at, list(values))

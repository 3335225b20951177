"""Rules 5 and 6 of :mod:`tracekit.analysis.attribution.gpu_ops`: the launches of a training
step that no module scope is around.

5. ``backward of a module``: a launch inside an ``autograd::engine::evaluate_function:
   <Node>`` range (the autograd engine running one backward node, on its own thread on a
   GPU) belongs to the module of the forward op that made the node. Kineto gives both the
   same ``Sequence number`` arg (the autograd sequence number, torch/csrc/autograd/function.h:
   "the sequence_nr of a backward node is that of the forward op that created it"; the trace
   reader's ``sequence`` column); the forward op is the first CPU op of that number that is
   not itself inside a backward node and lies in a ``module::<path>`` scope, and its module
   the innermost such scope. A node whose forward op ran outside every scope (the loss)
   stays unattributed.
6. ``optimizer``: a launch inside an ``Optimizer.step#<Class>.step`` or
   ``Optimizer.zero_grad#<Class>.zero_grad`` range (the ranges torch.optim's profiling hook
   records) belongs to :data:`OPTIMIZER`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracekit.analysis.attribution.opnames import SCOPE_PREFIX
from tracekit.analysis.metrics import categorical
from tracekit.analysis.metrics.nest import Nest

BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
OPTIMIZER_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#")
OPTIMIZER = "(optimizer)"  # how module tables name the optimizer's work (no module of the model does it)


def training_rules(out: pd.DataFrame, nest: Nest, sequence: np.ndarray, inner: np.ndarray, scope: np.ndarray,
                   paths: np.ndarray) -> None:
    """Set ``module`` and ``rule`` in ``out`` (launch_rules' frame, one row per launch call) for
    the calls with no module scope around them (``scope`` -1) by rules 5 and 6.

    Args:
        nest: the trace's CPU ops nested per thread.
        sequence: the autograd sequence number of each CPU op, per nest position (-1: none).
        inner: the innermost CPU op (position) around each call, -1 for none.
        scope: the innermost ``module::`` op (position) around each call, -1 for none.
        paths: the module path of each distinct op name (read at ``module::`` ops only).
    """
    free = scope < 0
    if not free.any():
        return
    is_node = nest.per_name(lambda n: n.startswith(BACKWARD_PREFIX))
    if is_node.any():
        node = np.where(free, nest.ancestor(inner, is_node), -1)
        numbered = np.flatnonzero(sequence >= 0)
        forward = numbered[nest.ancestor(numbered, is_node) < 0]
        if (node >= 0).any() and len(forward):
            module_of = _forward_modules(nest, sequence, forward, paths)
            seqs = sequence[np.maximum(node, 0)]
            found = pd.Series(seqs).map(module_of).to_numpy(dtype=object)
            hit = (node >= 0) & pd.notna(found)
            out["module"] = categorical.assign(out["module"].array, hit, found[hit])
            out["rule"] = categorical.assign(out["rule"].array, hit, "backward of a module")
            free &= ~hit
    is_step = nest.per_name(lambda n: n.startswith(OPTIMIZER_PREFIXES))
    if is_step.any() and free.any():
        hit = free & (nest.ancestor(inner, is_step) >= 0)
        out["module"] = categorical.assign(out["module"].array, hit, OPTIMIZER)
        out["rule"] = categorical.assign(out["rule"].array, hit, "optimizer")


def _forward_modules(nest: Nest, sequence: np.ndarray, forward: np.ndarray, paths: np.ndarray) -> pd.Series:
    """sequence number -> module path of its first forward op in a module scope. Each thread
    numbers its own ops: an op of another thread (the autograd thread's ``fill_`` of a gradient)
    can have the number of a forward op, but it is in no module scope (seen in a capture on the
    H100: the ViT's patch embedding's backward had lost its module to one)."""
    is_scope = nest.per_name(lambda n: n.startswith(SCOPE_PREFIX))
    scope = nest.ancestor(forward, is_scope)
    first = pd.DataFrame({"seq": sequence[forward], "ts": nest.starts(forward), "scope": scope})
    first = first[first["scope"] >= 0].sort_values("ts", kind="stable").drop_duplicates("seq")
    return pd.Series(paths[nest.codes[first["scope"].to_numpy()]], index=first["seq"].to_numpy())

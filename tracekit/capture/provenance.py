"""Provenance: what a run records, beside the trace, so every GPU op can be traced back to
a module and an aten op (:mod:`tracekit.analysis.attribution.gpu_ops` reads it; issue 20).

* :func:`tracekit.capture.module_scopes.module_scopes`: a ``module::<path>`` range around
  each call of each module, for modes that run the model's Python eagerly. Installed for
  the profiled window only.
* :class:`InductorProvenance`: for each graph Inductor compiles, the kernels and
  library calls of its generated code in call order, each with the module paths and
  aten ops of the FX nodes it computes. It reads Inductor's provenance tracking
  (``torch._inductor.config.trace.provenance_tracking_level``, the data behind
  tlparse's provenance view: artifacts ``inductor_provenance_tracking_node_mappings``
  and ``fx_graph_cache_miss``/``hit`` of torch's structured trace log) and the
  post-grad graph's node metadata (``nn_module_stack``, ``original_aten``) through a
  post-grad custom pass.
* :func:`capture_recording`: a short profile of the calls that capture CUDA graphs
  (kernel launches are recorded while nothing runs), reduced to each captured
  graph's launches in order with their module and op, so a replay's i-th kernel is
  the i-th captured launch.

:class:`ProvenanceRecorder` holds the three for a run; everything recorded lands in run.json
under ``attribution``.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import tempfile
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from tracekit.analysis.attribution.opnames import VIEW_OPS, normalize_op
from tracekit.capture.module_scopes import module_scopes
from tracekit.capture.profiling import profiler
from tracekit.capture.quiet import kineto_lines_dropped
from tracekit.manifest import Attribution, Provenance

_ROOT = re.compile(r"^(L\[['\"]\w+['\"]\]|self)")  # the compiled module: L['self'], L['mod'], self
_PATH_PARTS = re.compile(r"\._modules\['([^']+)'\]|\[['\"]?([^'\"\]]+)['\"]?\]")


def module_path(nn_module_stack: dict | None) -> str:
    """The dotted path of the innermost module of an FX node's ``nn_module_stack``
    (``"L['self'].blocks.0.mlp"`` or ``"L['self']._modules['blocks']._modules['0']"`` ->
    ``"blocks.0.mlp"``); "" for the compiled module itself or no stack."""
    if not nn_module_stack:
        return ""
    path = str(list(nn_module_stack.values())[-1][0])
    path = _ROOT.sub("", path)
    return _PATH_PARTS.sub(lambda m: "." + (m.group(1) or m.group(2)), path).lstrip(".")


def _node_info(node) -> tuple[str, str]:
    """(module path, aten op) of one post-grad FX node; op "" for non-aten nodes."""
    aten = node.meta.get("original_aten") or node.target
    packet = getattr(aten, "_overloadpacket", None)
    op = getattr(packet, "__name__", "") if packet is not None else ""
    return module_path(node.meta.get("nn_module_stack")), op


# FX graph cache key -> its post-grad nodes' (module, op), for every graph compiled in this
# process while recording: a later compile of the same graph (another mode of tracekit.profile)
# hits Inductor's cache, and then no pass runs. The pass's id is this process's own, so the
# cache (part of whose key the id is) never serves a graph another process compiled, whose
# nodes this process never saw: while recording, Inductor compiles each graph once per process
# even where TORCHINDUCTOR_CACHE_DIR holds it (runs compile cold by default anyway).
_NODES_BY_KEY: dict[str, dict[str, tuple[str, str]]] = {}
_PROCESS = f"{os.getpid()}-{secrets.token_hex(4)}"


class InductorProvenance:
    """Context manager recording, for every graph Inductor compiles while it is open,
    its call sites in the order the generated code makes them.

    ``graphs`` after exit: a list of ``{"key": FX graph cache key (the name of the
    ``## Call CompiledFxGraph <key> ##`` range in traces), "compile_id": "0/0",
    "calls": [[kernel or library call, debug handle, [module paths], [aten ops]], ...]}``
    ordered by debug handle (Inductor numbers call sites as it generates them).
    ``problem``: why nothing could be recorded ("" when fine).
    """

    def __init__(self):
        self.graphs: list[dict] = []
        self.problem = ""
        self._nodes: dict[str, tuple[str, str]] = {}   # post-grad node name -> (module, op), last graph
        self._nodes_of_last: dict[str, tuple[str, str]] = {}
        self._undo: list = []

    # The custom pass: it sees the post-grad graph with its node metadata.
    def _pass_class(self):
        from torch._inductor.custom_graph_pass import CustomGraphPass
        recorder = self

        class RecordNodes(CustomGraphPass):
            def __call__(self, graph) -> None:
                recorder._nodes = {n.name: _node_info(n) for n in graph.nodes if n.op == "call_function"}

            def uuid(self) -> str:
                return f"tracekit-record-nodes-2-{_PROCESS}"
        return RecordNodes()

    def _artifact(self, record: logging.LogRecord) -> None:
        """A structured-trace record: a graph's call sites come with its node mappings;
        its cache key comes next (cache on); on a cache hit no pass ran, so the nodes
        are those recorded when the same graph was compiled earlier."""
        meta = getattr(record, "metadata", None) or {}
        name = (meta.get("artifact") or {}).get("name", "")
        if name == "inductor_provenance_tracking_node_mappings":
            mapping = _json(getattr(record, "payload", None)) or {}
            self.graphs.append({"key": "", "compile_id": f"{meta.get('frame_id')}/{meta.get('frame_compile_id')}",
                                "calls": _calls(mapping, self._nodes), "mapping": mapping})
            self._nodes_of_last, self._nodes = self._nodes, {}
        elif name in ("fx_graph_cache_miss", "fx_graph_cache_hit") and self.graphs and not self.graphs[-1]["key"]:
            graph = self.graphs[-1]
            graph["key"] = key = (_json(getattr(record, "payload", None)) or {}).get("key", "")
            if name.endswith("miss"):
                _NODES_BY_KEY[key] = self._nodes_of_last
            elif key in _NODES_BY_KEY:
                graph["calls"] = _calls(graph["mapping"], _NODES_BY_KEY[key])
            else:  # compiled by an earlier process: no pass ran, node metadata unknown
                self.problem = ("FX graph cache hit on a graph compiled by another process: its kernels' "
                                "modules are unknown (run with a cold cache: unset TORCHINDUCTOR_CACHE_DIR)")

    def __enter__(self) -> "InductorProvenance":
        try:
            import torch._inductor.config as config
            from torch._logging._internal import trace_log
        except ImportError as exc:
            self.problem = f"Inductor not importable ({exc})"
            return self
        if not hasattr(config.trace, "provenance_tracking_level"):
            self.problem = f"torch {torch.__version__} has no Inductor provenance tracking"
            return self
        if config.post_grad_custom_post_pass is not None:
            self.problem = "a post-grad custom pass is already set; module paths of compiled kernels not recorded"
            return self
        recorder = self

        class Handler(logging.Handler):
            def emit(self, record):
                recorder._artifact(record)

        handler = Handler()
        old = (config.trace.provenance_tracking_level, config.post_grad_custom_post_pass, trace_log.level)
        config.trace.provenance_tracking_level = 1
        config.post_grad_custom_post_pass = self._pass_class()
        trace_log.addHandler(handler)
        trace_log.setLevel(logging.DEBUG)

        def undo():
            trace_log.removeHandler(handler)
            trace_log.setLevel(old[2])
            config.trace.provenance_tracking_level, config.post_grad_custom_post_pass = old[0], old[1]
        self._undo.append(undo)
        return self

    def __exit__(self, *exc) -> None:
        while self._undo:
            self._undo.pop()()

    def to_dict(self) -> dict:
        """``{"graphs": [...], "problem": str}``: run.json's ``attribution.provenance``."""
        return {"graphs": [{k: v for k, v in g.items() if k != "mapping"} for g in self.graphs],
                "problem": self.problem}


def _json(payload):
    import json

    try:
        return json.loads(payload) if isinstance(payload, str) else None
    except ValueError:
        return None


def _calls(mapping: dict, nodes: dict[str, tuple[str, str]]) -> list[list]:
    """Call sites from Inductor's ``cppCodeToPost`` (``"<kernel>:<handle>" -> post-grad
    node names``), sorted by handle, each with the modules and ops of its nodes.

    A node an earlier call site already computed is a recomputation (Inductor inlines
    cheap pointwise producers into each kernel that reads them: every block's first
    kernel recomputes the embedding add): it does not count for this call unless the call
    computes nothing else. View-like ops are left out unless there is nothing else. A
    library call (``extern_kernels.mm``, ``torch.ops.aten.<op>``) lists the nodes that feed
    it too (an attention mask built by the model); the node of its own op, where there is
    one, alone places it.
    """
    sites = []
    for site, names in (mapping.get("cppCodeToPost") or {}).items():
        kernel, _, handle = site.rpartition(":")
        sites.append((int(handle) if handle.isdigit() else -1, kernel, names))
    out, seen = [], set()
    for handle, kernel, names in sorted(sites, key=lambda c: c[0]):
        own = [n for n in names if n not in seen] or names
        seen.update(names)
        info = [nodes[n] for n in own if n in nodes]
        real = [(m, o) for m, o in info if o and o not in VIEW_OPS] or info
        if not kernel.startswith(("triton_", "cpp_")):   # a library call: its own op's node says where it is
            real = [(m, o) for m, o in real if normalize_op(o) == normalize_op(kernel)] or real
        out.append([kernel, handle, sorted({m for m, _ in real}), sorted({o for _, o in real if o})])
    return out


@contextmanager
def capture_recording(device: str, provenance: InductorProvenance, record: dict, scopes_of=None):
    """Profile the calls made inside the context (CPU and CUDA activities) and put the
    launches of the CUDA graphs captured there into ``record["captures"]``
    (:func:`tracekit.analysis.attribution.graph_capture.captured_launches`); on failure, the reason
    in ``record["captures_problem"]``. ``scopes_of``: a module to give module scopes
    while capturing (an eager model captured whole). Does nothing off CUDA."""
    if not device.startswith("cuda"):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="tracekit-capture-") as tmp:
        path = Path(tmp) / "capture.pt.trace.json"
        with kineto_lines_dropped(), profiler(device, detailed=False) as prof, \
                (module_scopes(scopes_of) if scopes_of is not None else nullcontext()):
            yield
        try:
            prof.export_chrome_trace(str(path))
            from tracekit.analysis.attribution.graph_capture import (
                captured_launches,  # pandas: only once a capture is read
            )
            from tracekit.trace import load
            recorded = Attribution(provenance=Provenance.of(provenance.to_dict()))
            record["captures"] = captured_launches(load(path), recorded)
        except Exception as exc:  # noqa: BLE001 - a missing capture record only costs attribution
            record["captures_problem"] = f"{type(exc).__name__}: {exc}"[:500]


class ProvenanceRecorder:
    """Everything a run records for attribution, for its stages: Inductor provenance
    while the context is open, the CUDA-graph capture where the backend makes one
    (:meth:`capture`), module scopes in the profiled window (:meth:`scopes`).
    :meth:`result` is run.json's ``attribution``."""

    def __init__(self, backend):
        self.backend = backend
        self.provenance = InductorProvenance()
        self.record: dict = {"module_scopes": backend.module_scopes}

    def __enter__(self) -> "ProvenanceRecorder":
        self.provenance.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.provenance.__exit__(*exc)

    def capture(self, where: str, device: str, module: torch.nn.Module):
        """Records the CUDA-graph capture if the backend captures ``where`` ("prepare" or "warmup"),
        unless the environment sets ``TRACEKIT_CAPTURE_RECORD=0``."""
        if self.backend.graph_capture != where:
            return nullcontext()
        if os.environ.get("TRACEKIT_CAPTURE_RECORD", "1") == "0":  # a way out, should profiling a capture fail
            self.record["captures_problem"] = "not recorded (TRACEKIT_CAPTURE_RECORD=0)"
            return nullcontext()
        return capture_recording(device, self.provenance, self.record,
                                 module if self.backend.module_scopes else None)

    def scopes(self, module: torch.nn.Module):
        """Module scopes around the profiled iterations, for backends that run the module's Python."""
        return module_scopes(module) if self.backend.module_scopes else nullcontext()

    def result(self) -> Attribution:
        """What was recorded, as run.json's ``attribution``: module scopes (bool), the captured
        CUDA graphs' launches (or why not), Inductor's provenance."""
        return Attribution.of({**self.record, "provenance": self.provenance.to_dict()})

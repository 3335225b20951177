"""Plain CUDA graphs: launch overhead removed without any fusion (the control experiment).

``cudagraphs``: the eager module captured once with ``torch.cuda.graph`` after a
warm-up, as in PyTorch's CUDA graphs documentation
(https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs); each call copies
the inputs into the captured buffers and replays the graph. For ``forward-backward`` and
``train-step`` the whole iteration is captured (forward, backward and AdamW with its step
count on the GPU), as the documentation's "whole-network capture" does: gradients are
set to None before the capture, so the graph's backward allocates them from its own
memory pool and each replay writes them afresh. The warm-up steps' updates of the weights
are undone after the capture (AdamW's moments keep them), so the first call starts from
eager's weights. For ``decode`` the step's inputs are the decode step's buffers (the last tokens, and
the position where the model takes one: :class:`tracekit.models.kv_cache.DecodeStep`): each replay
copies them into the graph's, as serving engines replay a captured decode step with the position
advanced; the KV cache is the model's, written in place by the replay.

On a rank of a job (DDP or FSDP2 over NCCL) the collectives are captured with the step, as
the documentation's "Usage with DistributedDataParallel" asks: the module is wrapped (DDP
constructed, FSDP2 sharded) on the stream the warm-up and the capture use (the prepare stage
enters it: :func:`tracekit.capture.stages.prepare`; the same stream for all three, as
Megatron-LM's full-iteration capture found necessary: NVIDIA/Megatron-LM#6021), at least
:data:`JOB_WARMUP` eager steps run there before the capture, and NCCL's asynchronous error
handling is off (the launcher's environment: :func:`tracekit.capture.launcher.launch`). A job over
gloo cannot be captured (its collectives run on the host): skipped, saying so.
``cudagraphs-compile``: ``torch.compile(backend="cudagraphs")``, the same idea
through Dynamo (no Inductor kernels); under DDP, Dynamo's DDPOptimizer splits the graph at the
gradient buckets and the all-reduces stay outside the captured graphs.
"""

from __future__ import annotations

import torch

from tracekit.backends.backend import Backend, Prepared, needs_cuda, register
from tracekit.backends.torch_compile import mark_step
from tracekit.capture.environment import process_group_backend
from tracekit.capture.phases import make_step
from tracekit.manifest.spec import PHASES, RunSpec

WARMUP = 3  # eager calls before capture (allocator and cuDNN/cuBLAS warm-up)
# A job's: "at least 11 DDP-enabled eager iterations" before the capture (PyTorch's CUDA semantics
# notes, "Usage with DistributedDataParallel": DDP's reducer collects runtime statistics, with event
# queries a capture forbids, in its first 10 iterations); FSDP2 gets the same.
JOB_WARMUP = 11
# FSDP2's reduce-scatter (torch._chunk_cat) allocates pinned host memory, which a CUDA graph capture
# could not until the caching host allocator learnt memory pools (pytorch/pytorch#164264, #167507,
# late 2025; FSDP2's capture tested upstream from pytorch/pytorch#171835, January 2026): the first
# release after it. Not checked on a GPU by us yet.
FSDP_CAPTURE_TORCH = (2, 11)


def _torch_version() -> tuple[int, int]:
    major, minor = str(torch.__version__).split(".")[:2]
    return int(major), int(minor)


def unavailable(spec: RunSpec) -> str | None:
    """Why ``cudagraphs`` cannot run ``spec`` here, or None: no CUDA (:func:`needs_cuda`); a job
    whose ranks would share GPUs (gloo: collectives on the host, which a graph cannot hold); FSDP2
    on a torch before :data:`FSDP_CAPTURE_TORCH`."""
    if reason := needs_cuda(spec):
        return reason
    if spec.nproc > 1 and process_group_backend("cuda", spec.nproc)[0] != "nccl":
        return (f"a CUDA graph captures a job's collectives only over NCCL, one GPU per rank: {spec.nproc} ranks "
                f"on {torch.cuda.device_count()} GPUs would use gloo, whose collectives run on the host")
    if spec.nproc > 1 and spec.parallel.startswith("fsdp") and _torch_version() < FSDP_CAPTURE_TORCH:
        return (f"FSDP2 cannot be captured in a CUDA graph before torch {'.'.join(map(str, FSDP_CAPTURE_TORCH))} "
                f"(its reduce-scatter allocates pinned host memory: pytorch/pytorch#164264); this is torch "
                f"{torch.__version__}")
    return None


def _capture_stream() -> torch.cuda.Stream:
    """The stream to warm up and capture on: the caller's where it is a side stream (the prepare
    stage's, on which a job's model was wrapped too), else a new one that first waits for the
    caller's work (a capture cannot run on the default stream)."""
    caller = torch.cuda.current_stream()
    if caller != torch.cuda.default_stream():
        return caller
    stream = torch.cuda.Stream()
    stream.wait_stream(caller)
    return stream


def capture(module, inputs, spec) -> Prepared:
    """``module`` (eager, on CUDA; a rank's wrapped in DDP or FSDP2) captured in one CUDA graph for
    ``spec.phase`` after :data:`WARMUP` eager calls (:data:`JOB_WARMUP` on a job), on the caller's
    side stream (:func:`_capture_stream`). ``inputs``: example tensors as the module takes them,
    copied into the graph's own buffers at each call. Returns the replaying callable (and, for a
    training phase, the whole step); the weights are eager's again when it returns.

    Raises:
        RuntimeError: what torch raises where the step cannot be captured (a host sync, a
            collective that is not NCCL's...).
    """
    static = tuple(x.clone() for x in inputs)
    training = spec.phase in ("forward-backward", "train-step")
    step = make_step(module, module, spec.phase, capturable=True) if training else None
    weights = [p.detach().clone() for p in module.parameters()] if training else []
    stream, caller = _capture_stream(), torch.cuda.current_stream()
    with torch.cuda.stream(stream):
        for _ in range(JOB_WARMUP if spec.nproc > 1 else WARMUP):
            step(static) if training else _inference(module, static)
    graph = torch.cuda.CUDAGraph()
    if training:
        module.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph, stream=stream):
        out = step(static) if training else _inference(module, static)
    caller.wait_stream(stream)
    with torch.no_grad():  # the warm-up steps trained the weights: back to eager's (in place: the graph holds them)
        for p, w in zip(module.parameters(), weights):
            p.copy_(w)

    def replay(*xs):
        for dst, src in zip(static, xs):
            if dst.data_ptr() != src.data_ptr():
                dst.copy_(src)
        graph.replay()
        return out
    what = "the whole training step" if training else "the eager module"
    if spec.nproc > 1:
        what += f" with its collectives ({spec.parallel}, {spec.nproc} ranks)"
    return Prepared(replay, "cuda", {"cuda_graph": f"torch.cuda.graph capture of {what}"},
                    step=(lambda inputs: replay(*inputs)) if training else None)


def _inference(module, inputs):
    with torch.no_grad():
        return module(*inputs)


register(Backend("cudagraphs", "CUDA graph capture of the eager model (no fusion; a training phase captured whole)",
                 capture, unavailable=unavailable,
                 phases=frozenset({"inference", "forward-backward", "train-step", "decode"}),
                 module_scopes=True, graph_capture="prepare"))
register(Backend("cudagraphs-compile", "torch.compile(backend='cudagraphs'): Dynamo + CUDA graphs, no Inductor",
                 lambda module, inputs, spec: mark_step(torch.compile(module, backend="cudagraphs")),
                 unavailable=needs_cuda, phases=frozenset(PHASES), graph_capture="warmup"))

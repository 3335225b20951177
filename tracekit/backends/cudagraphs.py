"""Plain CUDA graphs: launch overhead removed without any fusion (the control experiment).

``cudagraphs``: the eager module captured once with ``torch.cuda.graph`` after a
warm-up on a side stream, as in PyTorch's CUDA graphs documentation
(https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs); each call copies
the inputs into the captured buffers and replays the graph. For ``forward-backward`` and
``train-step`` the whole iteration is captured (forward, backward and AdamW with its step
count on the GPU), as the documentation's "whole-network capture" does: gradients are
set to None before the capture, so the graph's backward allocates them from its own
memory pool and each replay writes them afresh. The warm-up steps' updates of the weights
are undone after the capture (AdamW's moments keep them), so the first call starts from
eager's weights.
``cudagraphs-compile``: ``torch.compile(backend="cudagraphs")``, the same idea
through Dynamo (no Inductor kernels).
"""

from __future__ import annotations

import torch

from tracekit.backends.backend import Backend, Prepared, needs_cuda, register
from tracekit.backends.torch_compile import mark_step
from tracekit.capture.phases import make_step

WARMUP = 3  # eager calls on a side stream before capture (allocator and cuDNN/cuBLAS warm-up)


def capture(module, inputs, spec) -> Prepared:
    static = tuple(x.clone() for x in inputs)
    training = spec.phase != "inference"
    step = make_step(module, module, spec.phase, capturable=True) if training else None
    weights = [p.detach().clone() for p in module.parameters()] if training else []
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(WARMUP):
            step(static) if training else _inference(module, static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    if training:
        module.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        out = step(static) if training else _inference(module, static)
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
    return Prepared(replay, "cuda", {"cuda_graph": f"torch.cuda.graph capture of {what}"},
                    step=(lambda inputs: replay(*inputs)) if training else None)


def _inference(module, inputs):
    with torch.no_grad():
        return module(*inputs)


register(Backend("cudagraphs", "CUDA graph capture of the eager model (no fusion; a training phase captured whole)",
                 capture, unavailable=needs_cuda, phases=frozenset({"inference", "forward-backward", "train-step"}),
                 module_scopes=True, graph_capture="prepare"))
register(Backend("cudagraphs-compile", "torch.compile(backend='cudagraphs'): Dynamo + CUDA graphs, no Inductor",
                 lambda module, inputs, spec: mark_step(torch.compile(module, backend="cudagraphs")),
                 unavailable=needs_cuda, graph_capture="warmup"))

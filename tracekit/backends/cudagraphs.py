"""Plain CUDA graphs: launch overhead removed without any fusion (the control experiment).

``cudagraphs``: the eager module captured once with ``torch.cuda.graph`` after a
warm-up on a side stream, as in PyTorch's CUDA graphs documentation
(https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs); each call copies
the inputs into the captured buffers and replays the graph.
``cudagraphs-compile``: ``torch.compile(backend="cudagraphs")``, the same idea
through Dynamo (no Inductor kernels).
"""

from __future__ import annotations

import torch

from tracekit.backends import Backend, Prepared, needs_cuda, register
from tracekit.backends.torch_compile import mark_step

WARMUP = 3  # eager calls on a side stream before capture (allocator and cuDNN/cuBLAS warm-up)


def capture(module, inputs, spec) -> Prepared:
    static = tuple(x.clone() for x in inputs)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(stream):
        for _ in range(WARMUP):
            module(*static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        out = module(*static)

    def replay(*xs):
        for dst, src in zip(static, xs):
            if dst.data_ptr() != src.data_ptr():
                dst.copy_(src)
        graph.replay()
        return out
    return Prepared(replay, "cuda", {"cuda_graph": "torch.cuda.graph capture of the eager module"})


register(Backend("cudagraphs", "CUDA graph capture of the eager model (no fusion)", capture,
                 unavailable=needs_cuda, phases=frozenset({"inference"}), module_scopes=True, graph_capture="prepare"))
register(Backend("cudagraphs-compile", "torch.compile(backend='cudagraphs'): Dynamo + CUDA graphs, no Inductor",
                 lambda module, inputs, spec: mark_step(torch.compile(module, backend="cudagraphs")),
                 unavailable=needs_cuda, graph_capture="warmup"))

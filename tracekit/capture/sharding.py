"""How a job's ranks share the model (``--parallel``): DDP or FSDP2, each with the overlap of its
communication and computation that PyTorch gives it, or the same program with that overlap taken
away (``*-no-overlap``: the twin that ``tracekit whatif --overlap-comm`` predicts from).

A no-overlap variant issues the very collectives of its overlapped twin, from the same hooks, so
its host work is the same; only the computation now waits for each collective on the GPU:

* DDP: a communication hook (``DistributedDataParallel.register_comm_hook``, PyTorch's "DDP
  Communication Hooks") all-reduces each bucket as the default hook does, then waits for it on the
  current stream (``Work.wait``): the rest of backward starts after the bucket's reduction;
* FSDP2: the streams its communication context would run the all-gathers, their copies and the
  reduce-scatters on (FSDP2's ``FSDPCommContext``: separate streams for "implicit prefetching") are
  the computation's own stream, so a block's all-gather runs after the previous block's compute
  and backward waits for each reduce-scatter. This reads FSDP2's private state
  (``_get_fsdp_state()._comm_ctx``); a PyTorch without it raises RuntimeError naming it.

Each no-overlap variant registers its overlapped program as its twin (:mod:`tracekit.capture.twins`):
the hook that does not wait, FSDP2's own streams back.
"""

import torch

from tracekit.capture import twins


def wrap(module: torch.nn.Module, parallel: str, device: str) -> torch.nn.Module:
    """``module`` shared over the job's ranks as ``parallel`` says (:data:`tracekit.manifest.spec.PARALLEL`):

    * "ddp": DistributedDataParallel with PyTorch's buckets (1 MiB first, then 25 MiB), each
      bucket's all-reduce started as backward fills it, overlapping the rest of backward;
    * "fsdp": FSDP2's ``fully_shard`` on each of the model's blocks (:func:`blocks`), then on the
      whole: each block all-gathered before its forward and its backward and its gradients
      reduce-scattered after, overlapping the neighbouring blocks' compute;
    * "ddp-no-overlap", "fsdp-no-overlap": the same, the computation waiting for each collective
      (module docstring).

    Raises:
        RuntimeError: "fsdp-no-overlap" on a PyTorch whose FSDP2 has no communication context.
    """
    if parallel.startswith("ddp"):
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(module, device_ids=[torch.device(device).index]
                                      if device.startswith("cuda") else None)
        if parallel == "ddp-no-overlap":
            state = _Waits()
            ddp.register_comm_hook(state, _waited_all_reduce)
            twins.register(module, "overlap", "ddp: the same hook's all-reduces not waited for (overlapped)",
                           lambda twin: setattr(state, "wait", not twin))
        return ddp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.split(":")[0], (torch.distributed.get_world_size(),))
    for block in blocks(module):
        fully_shard(block, mesh=mesh)
    root = fully_shard(module, mesh=mesh)
    if parallel == "fsdp-no-overlap":
        _one_stream(root)
    return root


class _Waits:
    """The no-overlap DDP hook's state: whether the computation waits for each all-reduce (its
    twin's does not)."""

    wait = True


def _waited_all_reduce(state: _Waits, bucket) -> torch.futures.Future[torch.Tensor]:
    """A DDP communication hook: the bucket's gradients averaged over the ranks by one all-reduce
    (as PyTorch's default ``allreduce_hook``), the current stream waiting for it before backward
    goes on (unless ``state.wait`` is off: the twin)."""
    group = torch.distributed.group.WORLD
    tensor = bucket.buffer().div_(torch.distributed.get_world_size(group))
    work = torch.distributed.all_reduce(tensor, group=group, async_op=True)
    if state.wait:
        work.wait()
    return work.get_future().then(lambda fut: fut.value()[0])


STREAMS = ("all_gather_copy_in_stream", "all_gather_stream", "reduce_scatter_stream", "all_reduce_stream")


def _one_stream(root: torch.nn.Module) -> None:
    """FSDP2's communication streams made the current stream once its context is set up (at the
    first forward), for the root ``root`` and every block (they share the context); FSDP2's own
    streams back in the twin."""
    try:
        context = root._get_fsdp_state()._comm_ctx
        setup = context.lazy_init
    except AttributeError:
        raise RuntimeError(f"fsdp-no-overlap needs FSDP2's communication context (_comm_ctx), which torch "
                           f"{torch.__version__} does not have") from None
    own: dict[str, object] = {}   # FSDP2's streams, once set up
    twin = [False]

    def apply() -> None:
        if own:
            current = context.device_handle.current_stream()
            for name in STREAMS:
                setattr(context, name, own[name] if twin[0] else current)

    def lazy_init(*args, **kwargs) -> None:   # (device) in torch 2.13; its arguments passed on as they are
        setup(*args, **kwargs)
        own.update({name: getattr(context, name) for name in STREAMS})
        apply()

    def switch(on: bool) -> None:
        twin[0] = on
        apply()

    context.lazy_init = lazy_init
    twins.register(root, "overlap", "fsdp: FSDP2's own communication streams (overlapped)", switch)


def blocks(module: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's blocks, FSDP2's units under "fsdp": the children of each stack of blocks, a
    ``ModuleList`` or a ``Sequential`` of two or more modules of one class (ViT's blocks, a ResNet's
    layers; not an MLP's Linear, activation, Linear), the outermost stacks only (a block's own
    stacks stay in its unit)."""
    found: list[torch.nn.Module] = []
    for child in module.children():
        kinds = {type(m) for m in child.children()}
        if isinstance(child, torch.nn.ModuleList) or (isinstance(child, torch.nn.Sequential) and len(child) > 1
                                                       and len(kinds) == 1):
            found.extend(child.children())
        else:
            found.extend(blocks(child))
    return found

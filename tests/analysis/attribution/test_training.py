"""Rules 5-6 of attribution (tracekit.analysis.attribution.training): a training step's backward
kernels belong to the module whose forward op made their autograd node, the optimizer's to
"(optimizer)". A hand-made trace of known answer, and our real eager MLP training step."""

from __future__ import annotations

from tests.tracebuilder import TID, TraceBuilder, add_cpu_range
from tracekit.analysis.attribution.gpu_ops import UNATTRIBUTED, attribute
from tracekit.analysis.attribution.training import OPTIMIZER
from tracekit.trace import load

AUTOGRAD = TID + 1  # the autograd engine's device thread
SEQ = "Sequence number"


def _on(t: TraceBuilder, tid: int) -> None:
    """Move the launch call of the kernel just added (and its flow start) to thread ``tid``."""
    for e in t.events[-4:-2]:
        e["tid"] = tid


def training_step() -> TraceBuilder:
    """fc (linear > addmm, sequence 7) in module scopes, the loss outside them (mean, 8); backward
    on the autograd thread: MeanBackward0 (8), AddmmBackward0 (7, two kernels), a node of a number
    no forward op has (9); then AdamW's step. An op of the autograd thread, outside every scope,
    has number 7 too, before the forward op."""
    t = TraceBuilder()
    t.step(1, 0, 300)
    t.cpu_op("aten::fill_", 0.5, 0.2, tid=AUTOGRAD, **{SEQ: 7})  # the autograd thread numbers its own ops
    add_cpu_range(t, "module::", 1, 40, cat="user_annotation")
    add_cpu_range(t, "module::fc", 2, 30)
    t.cpu_op("aten::linear", 3, 25, **{SEQ: 7})
    t.cpu_op("aten::addmm", 4, 20, **{SEQ: 7})
    t.kernel("gemm", start=50, dur=10, launch_at=6)
    t.cpu_op("aten::mean", 45, 10, **{SEQ: 8})
    t.kernel("reduce", start=62, dur=2, launch_at=47)
    t.cpu_op("autograd::engine::evaluate_function: MeanBackward0", 100, 20, tid=AUTOGRAD, **{SEQ: 8})
    t.kernel("fill", start=125, dur=2, launch_at=105)
    _on(t, AUTOGRAD)
    t.cpu_op("autograd::engine::evaluate_function: AddmmBackward0", 130, 40, tid=AUTOGRAD, **{SEQ: 7})
    t.cpu_op("AddmmBackward0", 131, 38, tid=AUTOGRAD, **{SEQ: 7})
    t.cpu_op("aten::mm", 132, 10, tid=AUTOGRAD)
    t.kernel("gemm_dgrad", start=175, dur=8, launch_at=134)
    _on(t, AUTOGRAD)
    t.cpu_op("aten::sum", 150, 10, tid=AUTOGRAD)
    t.kernel("bias_grad", start=185, dur=2, launch_at=152)
    _on(t, AUTOGRAD)
    t.cpu_op("autograd::engine::evaluate_function: CloneBackward0", 172, 6, tid=AUTOGRAD, **{SEQ: 9})
    t.kernel("clone_grad", start=188, dur=1, launch_at=173)
    _on(t, AUTOGRAD)
    t.cpu_op("Optimizer.step#AdamW.step", 200, 50, cat="user_annotation")
    t.cpu_op("aten::_foreach_add_", 205, 10)
    t.kernel("multi_tensor_apply_kernel", start=260, dur=5, launch_at=207)
    return t


def test_backward_kernels_belong_to_the_module_of_their_forward_op(tmp_path):
    att = attribute(load(training_step().write(tmp_path / "t.json")))
    got = {k: (m, o, r) for k, m, o, r in att[["kernel", "module", "op", "rule"]].itertuples(index=False)}
    assert got["gemm"] == ("fc", "addmm", "module scope")
    assert got["gemm_dgrad"] == ("fc", "mm", "backward of a module")
    assert got["bias_grad"] == ("fc", "sum", "backward of a module")
    assert got["fill"][0] == UNATTRIBUTED and got["reduce"][0] == UNATTRIBUTED   # the loss: outside the scopes
    assert got["clone_grad"][0] == UNATTRIBUTED                                    # no forward op of its number
    assert got["multi_tensor_apply_kernel"] == (OPTIMIZER, "_foreach_add_", "optimizer")


def test_a_real_training_step_and_its_cuda_graph_replay_give_each_module_the_same_kernels():
    """Our MLP's train step on an H100 (tests/data/README.md): eager, every backward kernel of the
    Linear layers by sequence number and the AdamW step's; the captured step's replay, the same
    kernels for every module of the model (its optimizer is the capturable one: other kernels)."""
    from owndata import DATA

    from tracekit.manifest import Manifest

    def by_module(mode):
        folder = DATA / "h100" / "mlp-train-step" / mode
        att = attribute(load(next(folder.glob("*.pt.trace.json.gz"))), Manifest.read(folder).attribution)
        return att, att.groupby(["module", "op"], observed=True).size().to_dict()
    eager, counts = by_module("eager")
    backward = eager[eager["rule"] == "backward of a module"]
    assert set(backward["module"]) == {"0", "1", "2", "3", "4"}                 # Linear, ReLU, ..., Linear
    assert counts[("4", "mm")] == 2 * 3 and counts[("0", "mm")] == 3            # weight and input grads; no input grad
    assert set(eager.loc[eager["rule"] == "optimizer", "op"]) >= {"_foreach_addcdiv_", "_foreach_lerp_"}
    assert eager.loc[eager["module"] == UNATTRIBUTED, "op"].isin({"pow", "mean", "add", "fill_", "div", "mul",
                                                                  "copy_"}).all()   # only the loss, outside the model
    replay, replayed = by_module("cudagraphs")
    assert (replay["rule"] == "graph capture").sum() > len(replay) * 0.8
    model = lambda c: {k: v for k, v in c.items() if k[0] not in (OPTIMIZER, UNATTRIBUTED)}  # noqa: E731
    assert model(replayed) == model(counts) and len(model(counts)) == 13

"""What one iteration returns: the tensors of any output structure, and the loss a backward uses."""

from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path

import torch

from tracekit.bench import plan
from tracekit.capture.outputs import tensors
from tracekit.capture.phases import _loss, make_step, model_loss
from tracekit.manifest import Manifest
from tracekit.manifest.spec import RunSpec
from tracekit.manifest.suite_toml import load_suite

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Output:
    logits: torch.Tensor
    aux: tuple
    cache: object = None


def test_tensors_of_nested_outputs_in_order():
    a, b, c, d = (torch.full((2,), float(i)) for i in range(4))
    pair = namedtuple("Pair", "x y")
    out = {"first": a, "nested": [Output(b, (c, None)), pair(d, "text")], "none": None}
    assert [t[0].item() for t in tensors(out)] == [0.0, 1.0, 2.0, 3.0]
    assert tensors(None) == [] and tensors(object()) == []


def test_the_models_own_loss_is_used_else_the_mean_of_squares():
    own = torch.tensor(2.5)
    assert model_loss({"loss": own, "logits": torch.ones(3)}) is own and _loss({"loss": own}) is own
    assert model_loss({"loss": None, "logits": torch.ones(3)}) is None
    synthetic = _loss(Output(torch.full((2, 2), 2.0), (torch.full((3,), 3.0), torch.arange(3))))
    assert synthetic.item() == 4.0 + 9.0  # integer tensors get no gradient and are left out


def test_a_train_step_trains_through_a_dict_output():
    model = torch.nn.Linear(3, 2)

    def fn(x):
        return {"logits": model(x)}

    before = model.weight.detach().clone()
    make_step(fn, model, "train-step")((torch.randn(4, 3),))
    assert not torch.equal(before, model.weight)


def test_specs_without_a_sequence_length_read_as_before():
    # `seq` is left out of a spec that has none, so cells run before it existed stay done (resumable).
    assert "seq" not in RunSpec("mlp").to_dict() and RunSpec("hf:gpt2", seq=512).to_dict()["seq"] == 512
    committed = ROOT / "reports" / "h100" / "compile-modes" / "traces"  # example cells of the full H100 study
    planned = plan(load_suite(ROOT / "workloads" / "compile-modes.toml"), committed, device="cuda")
    # The committed H100 runs of this suite: the spec each cell would run is the one its run.json holds.
    kept = [p for p in planned if (committed / p.name / "run.json").exists()]
    assert len(kept) >= 2 and all(p.spec == Manifest.read(committed / p.name).spec for p in kept)

"""The decode phase's CUDA-graph modes on a GPU (issue 41; skipped without one): the cudagraphs backend's
captured decode step, replayed with its buffers copied in and the position advanced, decodes what eager
decodes, through the cache's wraps; the eager, cudagraphs and reduce-overhead runs of one workload end
ok, the captured ones with a handful of launches a token, and the what-if predicts the eager run's ms
per token with CUDA graphs."""

import importlib.util

import pytest
import torch

import tracekit
from tracekit import models
from tracekit.analysis.runs import analyze
from tracekit.capture import runner
from tracekit.capture.phases import make_step
from tracekit.manifest.spec import RunSpec

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                                   reason="transformers not installed")]
GPT2 = "hf:gpt2?layers=2&hidden=256&heads=4&vocab=1000"
LLAMA = "hf:llama?layers=2&hidden=256&heads=4&kv_heads=2&ffn=512&vocab=1000"
STEPS = 6


@pytest.mark.parametrize("name", [GPT2, LLAMA, "lm-tiny-32"])
def test_a_captured_decode_step_replays_what_eager_decodes(name):
    from tracekit.backends.cudagraphs import capture

    family, match = models.lookup(name)
    seq = None if name.startswith("lm-") else 32

    def build():
        step, inputs = models.build_decoder(family, match, name, 2, "fp32", "cuda", 0, seq, STEPS)
        step.prefill(0)
        return step, inputs

    (eager, eager_inputs), (graphed, inputs) = build(), build()
    prepared = capture(graphed, inputs, RunSpec(name, mode="cudagraphs", phase="decode", device="cuda"))
    a, b = make_step(eager, eager, "decode"), make_step(prepared.fn, graphed, "decode")
    for _ in range(3 * STEPS + 1):   # the cache wraps three times
        torch.testing.assert_close(b(inputs), a(eager_inputs), rtol=1e-4, atol=1e-4)
        assert torch.equal(graphed.ids, eager.ids)
    assert graphed.wraps == eager.wraps == 3


@pytest.mark.slow
def test_decode_runs_in_the_cuda_graph_modes_and_the_whatif_predicts_per_token(tmp_path):
    counts = dict(batch=2, seq=32, phase="decode", warmup=5, iters=20, profile_iters=3)
    made = {mode: runner.run(RunSpec(LLAMA, mode=mode, **counts), tmp_path, log=lambda s: None)
            for mode in ("eager", "cudagraphs", "reduce-overhead")}
    for mode, m in made.items():
        assert m.status == "ok", (mode, m.reason)
        assert m.diff_ok and m.decode.tokens_per_s.median > 0
    runs = analyze(tmp_path).runs.set_index("mode")
    assert runs.loc["eager", "launches_per_iter"] > 30   # every op of two layers launched a token
    for mode in ("cudagraphs", "reduce-overhead"):   # one replay, its inputs copied in, the greedy token and position
        assert runs.loc[mode, "launches_per_iter"] <= 10, mode
    p = tracekit.whatif(tmp_path / made["eager"].label / "eager", cuda_graphs=True)
    assert p.tokens_per_step == 2 and p.to_dict()["per"] == "token"
    assert 0 < p.predicted_latency_ms < p.measured_latency_ms

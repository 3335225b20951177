"""The decode step over a static KV cache (issue 41): the logits of every step equal a full forward of
the same tokens without a cache, the position goes back to the prompt's end when the cache is full, a
step replayed from copies of its buffers (what a captured CUDA graph replays) decodes the same tokens,
and the cache's size is what its layout says."""

import importlib.util

import pytest
import torch

from tracekit import models
from tracekit.capture.phases import make_step

needs_transformers = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                        reason="transformers not installed (pip install -e '.[models]')")
GPT2 = "hf:gpt2?layers=2&hidden=64&heads=4&vocab=1000"
LLAMA = "hf:llama?layers=2&hidden=64&heads=4&kv_heads=2&ffn=128&vocab=1000"   # grouped-query attention
QWEN2 = "hf:qwen2?layers=2&hidden=64&heads=4&kv_heads=2&ffn=128&vocab=1000"
MISTRAL = "hf:mistral?layers=2&hidden=64&heads=4&kv_heads=2&ffn=128&vocab=1000"   # sliding_window 4096
LM = "lm-tiny-12"
NAMES = [pytest.param(n, marks=needs_transformers) for n in (GPT2, LLAMA, QWEN2, MISTRAL)] + [LM]
PROMPT, STEPS, BATCH = 12, 5, 2


def decoder(name: str, steps: int = STEPS):
    family, match = models.lookup(name)
    seq = None if name.startswith("lm-") else PROMPT
    return models.build_decoder(family, match, name, BATCH, "fp32", "cpu", 0, seq, steps)


def prompt_of(step) -> torch.Tensor:
    """The prompt :meth:`DecodeStep.prefill` writes (its seed 0)."""
    return torch.randint(0, step.vocab, (step.batch, step.prompt_tokens), generator=torch.Generator().manual_seed(0))


def full_logits(step, tokens: torch.Tensor) -> torch.Tensor:
    """The model's logits after the last of ``tokens`` (batch, n), one forward without a cache."""
    with torch.no_grad():
        if step.kind.startswith("transformers"):
            return step.model(input_ids=tokens, use_cache=False).logits[:, -1]
        return step.model(tokens)[:, -1]


@pytest.mark.parametrize("name", NAMES)
def test_each_step_is_the_full_forward_of_its_tokens_and_wraps_at_the_prompts_end(name):
    step, inputs = decoder(name)
    assert step.prompt_tokens == PROMPT and step.cache_tokens == PROMPT + STEPS and inputs[0] is step.ids
    prompt = prompt_of(step)
    after_prompt = step.prefill(0)
    torch.testing.assert_close(after_prompt, full_logits(step, prompt), rtol=1e-4, atol=1e-4)
    assert torch.equal(step.ids, after_prompt.argmax(-1, keepdim=True))
    decode = make_step(step, step, "decode")
    context = prompt
    for i in range(2 * STEPS + 2):   # past the cache's end twice: positions go back to the prompt's end
        context = torch.cat([context, step.ids], dim=1)
        logits = decode(inputs)
        torch.testing.assert_close(logits, full_logits(step, context), rtol=1e-4, atol=1e-4)
        assert torch.equal(step.ids, logits.argmax(-1, keepdim=True))   # greedy: the next input
        if (i + 1) % STEPS == 0:
            context = prompt   # the cache was full: the next token is written at the prompt's end again
    assert (step.steps, step.wraps) == (2 * STEPS + 2, 2)


@pytest.mark.parametrize("name", NAMES)
def test_a_step_replayed_from_copies_of_its_buffers_decodes_the_same_tokens(name):
    """What the cudagraphs mode does on a GPU (tracekit.backends.cudagraphs.capture's replay): the step
    called on static copies of its inputs, refreshed from them before each call. Every state a step
    changes is in its buffers and its cache, so the tokens and logits are the eager step's."""
    eager, eager_inputs = decoder(name)
    replayed, inputs = decoder(name)
    for step in (eager, replayed):
        step.prefill(0)
    static = tuple(x.clone() for x in inputs)

    def replay(*xs):
        for dst, src in zip(static, xs):
            dst.copy_(src)
        return replayed(*static)

    a, b = make_step(eager, eager, "decode"), make_step(replay, replayed, "decode")
    for _ in range(3 * STEPS):
        assert torch.equal(a(eager_inputs), b(inputs))
        assert torch.equal(eager.ids, replayed.ids)


@pytest.mark.parametrize("name, kv_heads", [pytest.param(GPT2, 4, marks=needs_transformers),
                                            pytest.param(LLAMA, 2, marks=needs_transformers), (LM, 2)])
def test_the_cache_is_the_size_its_layout_says(name, kv_heads):
    step, _ = decoder(name)
    head_dim = 64 if name == LM else 16   # lm-tiny: width 128, 2 heads; the hf configs: hidden 64, 4 heads
    by_hand = 2 * 2 * BATCH * kv_heads * (PROMPT + STEPS) * head_dim * 4   # (k, v) x layers x ... x fp32
    assert step.planned_bytes() == by_hand and step.allocated_bytes() is None
    step.prefill(0)
    assert step.allocated_bytes() == by_hand


@needs_transformers
def test_the_position_is_where_the_next_token_goes():
    """The model's position, its input or the cache's own count (transformers' cumulative_length),
    advances with each step and goes back to the prompt's end on a rewind."""
    step, inputs = decoder(LLAMA)

    def written():
        if step.position is not None:
            return int(step.position)
        counts = {int(layer.cumulative_length) for layer in step.cache.layers}
        assert len(counts) == 1
        return counts.pop()

    step.prefill(0)
    assert written() == PROMPT
    decode = make_step(step, step, "decode")
    for i in range(3):
        decode(inputs)
        assert written() == PROMPT + i + 1
    step.rewind()
    assert written() == PROMPT


@needs_transformers
def test_a_sliding_window_longer_than_the_cache_is_full_attention():
    step, _ = decoder(MISTRAL)
    step.prefill(0)
    assert step.model.config.sliding_window is None
    assert not any(getattr(layer, "is_sliding", False) for layer in step.cache.layers)


def test_only_causal_lms_decode_and_within_their_positions():
    for name in ("vit16x6x384", "mlp"):
        with pytest.raises(ValueError, match=r"is not a causal LM: phase decode runs hf:<type> with a causal-lm "
                                             r"head .*lm-\{size\}-\{ctx\}.* runs phases inference, forward"):
            models.check_decode(*models.lookup(name), name, None, 10)
    if importlib.util.find_spec("transformers") is not None:
        with pytest.raises(ValueError, match="not a causal LM"):
            models.check_decode(*models.lookup("hf:bert"), "hf:bert", 128, 10)
        name = "hf:gpt2?layers=2&positions=64"
        assert models.check_decode(*models.lookup(name), name, 54, 10) == 54
        with pytest.raises(ValueError, match=r"has 64 positions: a 55-token prompt and 10 decode steps .* need 65; "
                                             r".*positions=65"):
            models.check_decode(*models.lookup(name), name, 55, 10)
    assert models.check_decode(*models.lookup("lm-tiny-100000"), "lm-tiny-100000", None, 10) == 100000

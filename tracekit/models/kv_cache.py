"""A causal LM's decode step over a static KV cache (issue 41): :class:`DecodeStep`, the module the
decode phase prepares and times, and :class:`TransformersDecodeStep` for ``hf:`` causal LMs over
transformers' ``StaticCache`` (the built-in ``lm-*`` models keep their own cache:
:mod:`tracekit.models.lm`).

The cache holds ``cache_tokens``: the prompt (prefilled once, :meth:`DecodeStep.prefill`) and the decode
steps a run counts (:func:`tracekit.manifest.spec.decode_steps`). A step reads each sequence's last
token (``ids``, (batch, 1) int64) at the next position, writes its keys and values into the cache in
place and attends over the whole cache, masked to the positions written: the shapes never change, as
torch.compile and CUDA graphs need, and a step costs the same at every position (transformers'
static layers return the whole cache, ``StaticLayer.update``). Greedy decoding: the next input is the
argmax of the step's logits (:meth:`DecodeStep.advance`). When the cache is full, the next step goes
back to the prompt's end (``wraps``): the timers' calls beyond the counted steps reuse positions.

Positions: a model that takes its position (``cache_position``: transformers before its pull request
44181 of March 2026 removed cache positions; the built-in LMs) gets ``position``, a (1,) int64 buffer, as
its second input, advanced by the host after each step (replays of a captured step copy it in, as
serving engines do). A model whose cache counts for itself (transformers' ``StaticLayer.cumulative_length``,
a tensor the step advances in place) takes the ids alone; a rewind sets the count.
"""

from __future__ import annotations

import inspect

import torch
from torch import nn


class DecodeStep(nn.Module):
    """One decode step: ``forward(ids[, position]) -> logits`` ((batch, vocab), of the next token of each
    sequence). Subclasses give the model's call (:meth:`logits`), its prompt's (:meth:`prompt_logits`),
    the cache's layout (:meth:`planned_bytes`, :meth:`allocated_bytes`, :meth:`allocate`) and, where
    the cache counts for itself, :meth:`set_count`.

    Args:
        model: the causal LM. batch: sequences. prompt_tokens: the prompt's tokens (prefilled).
        cache_tokens: the KV cache's length (prompt + counted decode steps; > prompt_tokens).
        vocab: the vocabulary size (the prompt's random tokens are below it).
        takes_position: the model takes its position as an input (the ``position`` buffer).

    Attributes: ``ids`` (batch, 1) and ``position`` (1,) (None without) are the step's inputs
    (:attr:`inputs`); ``steps`` (decode steps made), ``wraps`` (times the cache was full and the
    position went back to the prompt's end).
    """

    kind = ""   # whose cache (run.json's decode.kv_cache)

    def __init__(self, model: nn.Module, batch: int, prompt_tokens: int, cache_tokens: int, vocab: int,
                 takes_position: bool):
        super().__init__()
        if cache_tokens <= prompt_tokens:
            raise ValueError(f"a KV cache of {cache_tokens} tokens has no room after a {prompt_tokens}-token prompt")
        self.model = model
        self.batch, self.prompt_tokens, self.cache_tokens, self.vocab = batch, prompt_tokens, cache_tokens, vocab
        self.register_buffer("ids", torch.zeros(batch, 1, dtype=torch.long), persistent=False)
        self.register_buffer("position", torch.zeros(1, dtype=torch.long) if takes_position else None,
                             persistent=False)
        self.steps = self.wraps = self._since_rewind = 0

    @property
    def inputs(self) -> tuple[torch.Tensor, ...]:
        """The step's inputs: (ids,) or (ids, position), the buffers the step updates."""
        return (self.ids,) if self.position is None else (self.ids, self.position)

    @property
    def capacity(self) -> int:
        """Decode steps the cache holds after the prompt."""
        return self.cache_tokens - self.prompt_tokens

    def forward(self, ids: torch.Tensor, position: torch.Tensor | None = None) -> torch.Tensor:
        return self.logits(ids, position)

    def logits(self, ids: torch.Tensor, position: torch.Tensor | None) -> torch.Tensor:
        """The next token's logits (batch, vocab) after ``ids`` (batch, 1) at the next position."""
        raise NotImplementedError

    def prompt_logits(self, prompt: torch.Tensor) -> torch.Tensor:
        """The prompt (batch, prompt_tokens) through the model into the cache from position 0: the
        logits (batch, vocab) after its last token."""
        raise NotImplementedError

    def planned_bytes(self) -> int:
        """The keys and values of every layer for ``cache_tokens`` tokens, bytes, from the model's
        sizes (what :meth:`allocate` or the first prefill asks for)."""
        raise NotImplementedError

    def allocated_bytes(self) -> int | None:
        """The bytes of the cache's tensors as allocated; None before."""
        raise NotImplementedError

    def allocate(self) -> None:
        """Allocate the cache where it is not allocated at the prefill's first write."""

    def set_count(self, tokens: int) -> None:
        """Set a cache's own count of tokens written (where it keeps one)."""

    def prefill(self, seed: int = 0) -> torch.Tensor:
        """The prompt (random tokens below ``vocab``, from ``seed``) written into the cache from
        position 0; ``ids`` set to its greedy next tokens and the position to the prompt's end.
        Returns the logits (batch, vocab) after the prompt. Raises what the model or the cache's
        allocation raises (out of memory)."""
        device = self.ids.device
        generator = torch.Generator().manual_seed(seed)
        prompt = torch.randint(0, self.vocab, (self.batch, self.prompt_tokens), generator=generator).to(device)
        self._move_to(0)
        with torch.no_grad():
            logits = self.prompt_logits(prompt)
            self.ids.copy_(logits.argmax(-1, keepdim=True))
        self.rewind()
        return logits

    def rewind(self) -> None:
        """The next step writes at the prompt's end (each sequence's next token after the prompt)."""
        self._move_to(self.prompt_tokens)
        self._since_rewind = 0

    def advance(self, logits: torch.Tensor) -> None:
        """After a step: its greedy tokens (argmax of ``logits``, (batch, vocab)) become ``ids``, the
        position advances, and after ``capacity`` steps it goes back to the prompt's end. The argmax is
        written into ``ids`` (``out=``): no copy, as a bare loop makes none."""
        torch.argmax(logits, dim=-1, keepdim=True, out=self.ids)
        self.steps += 1
        self._since_rewind += 1
        if self._since_rewind == self.capacity:
            self.wraps += 1
            self.rewind()
        elif self.position is not None:
            self.position.add_(1)

    def _move_to(self, tokens: int) -> None:
        if self.position is not None:
            self.position.fill_(tokens)
        self.set_count(tokens)


def _parameters(model: nn.Module) -> set[str]:
    return set(inspect.signature(model.forward).parameters)


class TransformersDecodeStep(DecodeStep):
    """A transformers causal LM (``AutoModelForCausalLM``) over its ``StaticCache``, made at the first
    prefill on the model's device and dtype (transformers allocates it there, or at construction in
    its 4.x releases). The model's config must have ``use_cache`` honoured; ``sliding_window`` longer
    than the cache is dropped by :func:`tracekit.models.hf` (it changes nothing and would make the
    cache count in a Python int that compiled steps cannot follow).

    Works with transformers' three calling conventions, read from the model's ``forward`` signature:
    the cache passed as ``past_key_values`` (before 5.x's rename) or ``cache``; ``cache_position``
    given where the model takes it, else the cache's own ``cumulative_length`` counts; the logits of the
    last position only (``logits_to_keep``, earlier ``num_logits_to_keep``) for the prompt.
    """

    kind = "transformers StaticCache"

    def __init__(self, model: nn.Module, batch: int, prompt_tokens: int, cache_tokens: int):
        params = _parameters(model)
        config = model.config
        super().__init__(model, batch, prompt_tokens, cache_tokens, config.vocab_size, "cache_position" in params)
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self.keep_arg = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
        self.cache = None

    def _make_cache(self):
        from transformers import StaticCache

        p = next(self.model.parameters())
        offered = {"config": self.model.config, "max_cache_len": self.cache_tokens, "max_batch_size": self.batch,
                   "batch_size": self.batch, "device": p.device, "dtype": p.dtype}
        taken = set(inspect.signature(StaticCache.__init__).parameters)
        return StaticCache(**{k: v for k, v in offered.items() if k in taken})

    def allocate(self) -> None:
        if self.cache is None:
            self.cache = self._make_cache()

    def _call(self, ids: torch.Tensor, position: torch.Tensor | None, **more) -> torch.Tensor:
        kw = {self.cache_arg: self.cache, "use_cache": True, **more}
        if position is not None:
            kw["cache_position"] = position
        return self.model(input_ids=ids, **kw).logits[:, -1]

    def logits(self, ids, position):
        return self._call(ids, position)

    def prompt_logits(self, prompt):
        self.allocate()
        position = (torch.arange(self.prompt_tokens, device=prompt.device) if self.position is not None else None)
        return self._call(prompt, position, **({self.keep_arg: 1} if self.keep_arg else {}))

    def _layers(self) -> list:
        return list(getattr(self.cache, "layers", None) or [])

    def set_count(self, tokens: int) -> None:
        counts = [c for c in (getattr(layer, "cumulative_length", None) for layer in self._layers())
                  if isinstance(c, torch.Tensor)]
        if counts:   # two launches, whatever the layers (a wrap happens once per `capacity` steps)
            torch._foreach_zero_(counts)
            torch._foreach_add_(counts, tokens)

    def planned_bytes(self) -> int:
        c = self.model.config
        heads = c.num_attention_heads
        kv_heads = getattr(c, "num_key_value_heads", None) or heads
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
        item = next(self.model.parameters()).element_size()
        return 2 * c.num_hidden_layers * self.batch * kv_heads * self.cache_tokens * head_dim * item

    def allocated_bytes(self) -> int | None:
        if self.cache is None:
            return None
        layers = self._layers()
        tensors = ([t for layer in layers for t in (getattr(layer, "keys", None), getattr(layer, "values", None))]
                   if layers else [*getattr(self.cache, "key_cache", []), *getattr(self.cache, "value_cache", [])])
        tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
        return sum(t.numel() * t.element_size() for t in tensors) if tensors else None

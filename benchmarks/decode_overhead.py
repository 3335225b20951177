"""tracekit's own cost per decode step (issue 41), against a bare eager decode loop: the target is under 2%
of an eager step on the GPU.

Usage: python benchmarks/decode_overhead.py [--out OUT.json] [--model NAME ...] [--batch B] [--seq S]
       [--dtype bf16] [--device cuda] [--steps 200] [--rounds 20]

For each model, one decode step over one static KV cache (tracekit's, built as a decode run builds it:
:func:`tracekit.models.build_decoder`) is run three ways, in alternating blocks of ``--steps`` steps
(``--rounds`` rounds, the arms' order rotating from round to round, the position rewound before each
block, so every arm sees the same host and the same cache positions):

* ``bare``: the loop a user writes without tracekit, as transformers' static-cache recipe and gpt-fast
  write it: the model called on the last tokens (and the position tensor, advanced in place, where the
  model takes one), the greedy tokens taken as the next input;
* ``tracekit``: the decode phase's step (:func:`tracekit.capture.phases.make_step` over the
  :class:`~tracekit.models.kv_cache.DecodeStep`), what the timing stage calls: the wrapper module, the
  greedy tokens copied into the step's buffer, the position advanced, the steps counted, the cache
  rewound when full;
* ``tracekit+events``: the same with a CUDA event recorded before and after each step, as the per-call
  timer records them (:func:`tracekit.capture.timers.time_calls`; the CPU has none).

Each block is timed by a clock read after a device synchronize at each end (ms per step); the report is
each arm's median over the rounds and the overheads (median of the per-round ratio to the bare block
of the same round, less 1). The ``ProfilerStep#N`` markers and module scopes exist only inside the
profiled window, whose overhead is the profiler's (reported by every analysis); they are not here.

Prints and writes JSON: per model its sizes, the arms' ms per step (median, p10, p90 over rounds), and
overhead_tracekit, overhead_events (fractions) with their 95% bootstrap intervals (``*_ci95``), with the
machine (torch, device name).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from tracekit import models
from tracekit.capture.environment import describe
from tracekit.capture.phases import make_step

MODELS = ["hf:gpt2", "hf:llama?layers=16&hidden=2048&heads=32&kv_heads=8&ffn=8192&vocab=128256&positions=8448"]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def bare_loop(step):
    """The bare eager decode loop over ``step``'s model and cache (see the module docstring): a
    callable of n steps."""
    if hasattr(step, "cache_arg"):   # transformers
        def call(ids, position):
            kw = {step.cache_arg: step.cache, "use_cache": True}
            if position is not None:
                kw["cache_position"] = position
            return step.model(input_ids=ids, **kw).logits[:, -1]
    else:   # the built-in LMs
        def call(ids, position):
            return step.model.decode(ids, position, step.caches, step.slots)

    def run(n: int) -> None:
        ids = step.ids.clone()
        position = None if step.position is None else step.position.clone()
        with torch.no_grad():
            for _ in range(n):
                ids = call(ids, position).argmax(-1, keepdim=True)
                if position is not None:
                    position += 1
    return run


def tracekit_loop(step, events: bool):
    """The decode phase's step, ``n`` times (with a CUDA event pair around each where ``events``)."""
    decode, inputs = make_step(step, step, "decode"), step.inputs
    cuda = step.ids.device.type == "cuda"

    def run(n: int) -> None:
        if events and cuda:
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
            for start, end in pairs:
                start.record()
                decode(inputs)
                end.record()
        else:
            for _ in range(n):
                decode(inputs)
    return run


def measure(name: str, batch: int, seq: int | None, dtype: str, device: str, steps: int, rounds: int) -> dict:
    family, match = models.lookup(name)
    step, _ = models.build_decoder(family, match, name, batch, dtype, device, 0, seq, steps + 1)
    step.prefill(0)
    arms = {"bare": bare_loop(step), "tracekit": tracekit_loop(step, False),
            "tracekit+events": tracekit_loop(step, True)}
    for run in arms.values():   # warm-up: the libraries' first calls, the allocator
        step.rewind()
        run(min(steps, 20))
    times = {arm: [] for arm in arms}
    names = list(arms)
    for i in range(rounds):
        for arm in names[i % 3:] + names[:i % 3]:   # each arm first in a third of the rounds
            run = arms[arm]
            step.rewind()
            _sync(device)
            t0 = time.perf_counter()
            run(steps)
            _sync(device)
            times[arm].append((time.perf_counter() - t0) * 1e3 / steps)
    stats = {arm: {"median": float(np.median(t)), "p10": float(np.percentile(t, 10)),
                   "p90": float(np.percentile(t, 90))} for arm, t in times.items()}
    ratio = lambda arm: float(np.median(np.array(times[arm]) / np.array(times["bare"])) - 1)  # noqa: E731
    return {"model": name, "batch": batch, "prompt_tokens": step.prompt_tokens, "cache_tokens": step.cache_tokens,
            "dtype": dtype, "device": device, "steps_per_block": steps, "rounds": rounds, "ms_per_step": stats,
            "overhead_tracekit": ratio("tracekit"), "overhead_events": ratio("tracekit+events"),
            "overhead_tracekit_ci95": bootstrap_ci(times["tracekit"], times["bare"]),
            "overhead_events_ci95": bootstrap_ci(times["tracekit+events"], times["bare"])}


def bootstrap_ci(arm: list[float], bare: list[float], draws: int = 4000) -> list[float]:
    """95% interval of the median per-round overhead (arm / bare - 1, fractions), by the percentile
    bootstrap over rounds (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13): the
    rounds resampled with replacement ``draws`` times, a fixed seed so that a report can be remade."""
    ratios = np.array(arm) / np.array(bare) - 1
    rng = np.random.default_rng(0)
    medians = np.median(rng.choice(ratios, size=(draws, len(ratios)), replace=True), axis=1)
    return [float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--model", action="append", help=f"decoder LMs (default: {', '.join(MODELS)})")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=128, help="the prompt's tokens (hf: models)")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=200, help="decode steps a block")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    results = []
    for name in args.model or MODELS:
        seq = None if name.startswith("lm-") else args.seq
        r = measure(name, args.batch, seq, args.dtype, args.device, args.steps, args.rounds)
        results.append(r)
        s = r["ms_per_step"]
        print(f"{name} b{args.batch} {args.dtype} {args.device}: bare {s['bare']['median']:.4f} ms/step, tracekit "
              f"{s['tracekit']['median']:.4f} ({r['overhead_tracekit']:+.2%}, 95% CI "
              f"{r['overhead_tracekit_ci95'][0]:+.2%} to {r['overhead_tracekit_ci95'][1]:+.2%}), with the timer's "
              f"events {s['tracekit+events']['median']:.4f} ({r['overhead_events']:+.2%}, 95% CI "
              f"{r['overhead_events_ci95'][0]:+.2%} to {r['overhead_events_ci95'][1]:+.2%})", flush=True)
    machine = describe(args.device)
    out = {"torch": torch.__version__, "device_name": machine.get("device_name"), "results": results}
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

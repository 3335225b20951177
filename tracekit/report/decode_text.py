"""The sentences of a decode run (phase ``decode``, issue 41): one decode step makes one token of each
sequence, so its figures per iteration are per token and its speedup is a gain in tokens/s. The
answer of a decode workload, the unit of its figures, the line ``tracekit trace`` prints for it, its
table's explanation and the what-if's per-token line are written here; the figures are the
analysis's (``tokens_per_step``, ``tokens_per_s``... of :mod:`tracekit.analysis.manifest_fields`) and
run.json's ``decode`` section."""

from __future__ import annotations

import math

DECODE_TEXT = ("A decode run times one decode step an iteration: each sequence's next token from its last one over "
               "a static KV cache (greedy), after a prompt prefilled once. Its figures per iteration are per token: "
               "ms per token is the step's unprofiled latency (p10-p90 over the timed steps), tokens/s the batch "
               "over it; kernels, launches, GPU busy (profiled) and idle (the unprofiled latency less the busy "
               "time) per decode step. The prefill is the prompt's forward into the cache with the eager model, "
               "timed once after one untimed prefill.")


def is_decode(row: dict) -> bool:
    """Whether a run or comparison row is a decode run's (it makes tokens_per_step tokens a step)."""
    tokens = row.get("tokens_per_step")
    return isinstance(tokens, (int, float)) and not math.isnan(tokens) and tokens > 0


def per(row: dict) -> str:
    """The unit of a row's figures per iteration: "token" for a decode run, else "iter"."""
    return "token" if is_decode(row) else "iter"


def answer(r: dict, base: dict, speedup: str, baseline: str, device: str, failed: str) -> str:
    """The first line of a decode workload's answer: ``reduce-overhead 2.90x (2.71-3.05) more tokens/s over
    eager (1,117 -> 3,240 tokens/s, 0.895 -> 0.309 ms per token)`` (a slower mode: ``0.80x ... the
    tokens/s of eager``). ``r``, ``base``: the comparison rows of the mode and the baseline; ``speedup``:
    r's speedup as shown (:func:`tracekit.report.comparison_text.speedup_text`); ``device``, ``failed``:
    the answer's other parts (a different device, the modes that failed)."""
    gain = f"more tokens/s over {baseline}" if r["speedup"] >= 1 else f"the tokens/s of {baseline}"
    slower = f"every mode is slower than {baseline}, the least: " if r["speedup"] < 1 else ""
    return (f"{slower}{r['mode']} {speedup} {gain}{device} ({base['tokens_per_s']:,.0f} -> {r['tokens_per_s']:,.0f} "
            f"tokens/s, {base['latency_median_ms']:.3f} -> {r['latency_median_ms']:.3f} ms per token){failed}")


def _known(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def status_line(decode: dict) -> str:
    """What ``tracekit trace`` prints of a decode run's ``decode`` section (run.json):
    ``decode: 0.310 ms per token (p10-p90 0.301-0.322), 3,226 tokens/s (1 sequence); prefill 12.1 ms
    (128 tokens); KV cache 4.6 MB (195 tokens, transformers StaticCache), wrapped 3 times``; "" without
    a section."""
    if not decode:
        return ""
    parts = []
    ms, rate = decode.get("ms_per_token") or {}, decode.get("tokens_per_s") or {}
    n = decode.get("tokens_per_step")
    if _known(ms.get("median")):
        parts.append(f"{ms['median']:.3f} ms per token (p10-p90 {ms['p10']:.3f}-{ms['p90']:.3f}), "
                     f"{rate['median']:,.0f} tokens/s ({n} sequence{'s' if n != 1 else ''})")
    if _known(decode.get("prefill_ms")):
        parts.append(f"prefill {decode['prefill_ms']:.1f} ms ({decode['prompt_tokens']} tokens)")
    if _known(decode.get("kv_cache_MB")):
        wraps = decode.get("wraps")
        times = f"{wraps} time{'s' if wraps != 1 else ''}"
        parts.append(f"KV cache {decode['kv_cache_MB']:.1f} MB ({decode['cache_tokens']} tokens, {decode['kv_cache']})"
                     + (f", back to the prompt's end {times} when full" if wraps else ""))
    return "decode: " + "; ".join(parts) if parts else ""


def prediction_line(predicted_ms: float, tokens_per_s: float, tokens_per_step: int,
                    interval_ms: tuple[float, float] | None = None) -> str:
    """The what-if's figure for a decode run: ``predicted 0.310 ms per token (0.300-0.320 ms; 3,226 tokens/s at
    1 sequence a step)`` (:meth:`tracekit.analysis.critical_path.prediction.Prediction.to_dict`'s figures; the
    interval, low and high ms per token, where there is one)."""
    span = f"{interval_ms[0]:.3f}-{interval_ms[1]:.3f} ms; " if interval_ms else ""
    return (f"predicted {predicted_ms:.3f} ms per token ({span}{tokens_per_s:,.0f} tokens/s at {tokens_per_step} "
            f"sequence{'s' if tokens_per_step != 1 else ''} a step)")

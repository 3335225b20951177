"""The decode phase through the one capture (issue 41), on the CPU: a prefill, then each call one decode
step (warm-up, timing and the profiled window count steps, each profiled step with its marker), the
decode section of run.json, the usage errors, an out-of-memory cache as an oom row, the modes that do
not decode as skipped rows. (tests/test_decode_gpu.py: the cudagraphs and reduce-overhead modes.)"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracekit.analysis.runs import analyze
from tracekit.capture import runner
from tracekit.cli import main
from tracekit.errors import ExitCode
from tracekit.manifest import Manifest
from tracekit.manifest.spec import RunSpec, decode_steps

needs_transformers = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                        reason="transformers not installed (pip install -e '.[models]')")
GPT2 = "hf:gpt2?layers=2&hidden=64&heads=4&vocab=1000"
LLAMA = "hf:llama?layers=2&hidden=64&heads=4&kv_heads=2&ffn=128&vocab=1000"
QUICK = dict(warmup=1, iters=4, profile_iters=2, threads=1, phase="decode", device="cpu")
quiet = lambda line: None  # noqa: E731


def kv_bytes(layers: int, batch: int, kv_heads: int, tokens: int, head_dim: int, item: int = 4) -> int:
    """Keys and values of every layer, by hand."""
    return 2 * layers * batch * kv_heads * tokens * head_dim * item


def check_decode_run(m: Manifest, folder: Path, prompt: int, batch: int, cache_bytes: int) -> None:
    """run.json's decode section against what the run did, and the trace's profiled steps."""
    d = m.decode
    assert m.status == "ok", m.reason
    assert (d.prompt_tokens, d.tokens_per_step, d.cache_tokens) == (prompt, batch, prompt + decode_steps(m.spec))
    assert d.kv_cache_MB == cache_bytes / 2**20 and d.prefill_ms > 0 and d.prefill_first_ms > 0
    # Every call of the capture is one decode step: the first, the warm-up, each timing round's untimed call,
    # its timed calls and its wall-clock block, the host's calls, the profiler's warm-up step and the profiled.
    i = m.interleaving
    made = (1 + m.spec.warmup + i.rounds + sum(i.latency_calls) + i.rounds * i.wall_calls + m.host_ms.n
            + 1 + m.spec.profile_iters)
    assert d.steps == made and d.wraps == made // decode_steps(m.spec)
    assert (d.ms_per_token.median, d.ms_per_token.p10) == (m.latency_ms.median, m.latency_ms.p10)
    assert d.tokens_per_s.median == pytest.approx(batch / m.latency_ms.median * 1e3)
    assert d.tokens_per_s.p10 == pytest.approx(batch / m.latency_ms.p90 * 1e3)
    row = analyze(folder).runs.iloc[0]
    assert row["iterations"] == m.spec.profile_iters   # one ProfilerStep#N marker per profiled decode step
    assert row["tokens_per_step"] == batch and row["tokens_per_s"] == pytest.approx(d.tokens_per_s.median)
    assert (row["prompt_tokens"], row["kv_cache_MB"], row["prefill_ms"]) == (prompt, d.kv_cache_MB, d.prefill_ms)


@pytest.mark.parametrize("name, sizes", [pytest.param(GPT2, (2, 4, 16), marks=needs_transformers),
                                         pytest.param(LLAMA, (2, 2, 16), marks=needs_transformers),
                                         ("lm-tiny-16", (2, 2, 64))])
def test_eager_decode_runs_through_the_one_capture(tmp_path, name, sizes):
    seq = None if name.startswith("lm-") else 16
    m = runner.run(RunSpec(name, batch=2, seq=seq, **QUICK), tmp_path, log=quiet)
    layers, kv_heads, head_dim = sizes
    folder = tmp_path / m.label / "eager"
    check_decode_run(m, folder, 16, 2, kv_bytes(layers, 2, kv_heads, 16 + decode_steps(m.spec), head_dim))
    assert m.max_abs_diff == 0 and m.diff_ok   # the first step against eager's reference step at the same position
    assert m.label.endswith("-decode-t1")


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(GPT2, marks=needs_transformers),
                                  pytest.param(LLAMA, marks=needs_transformers), "lm-tiny-16"])
def test_compiled_decode_runs_and_matches_eager(tmp_path, name):
    seq = None if name.startswith("lm-") else 16
    m = runner.run(RunSpec(name, mode="default", batch=2, seq=seq, **QUICK), tmp_path, log=quiet)
    assert m.status == "ok", m.reason
    assert m.diff_ok and m.decode.steps > decode_steps(m.spec) and m.decode.tokens_per_s.median > 0


def test_modes_that_do_not_decode_are_skipped_saying_why(tmp_path):
    m = runner.run(RunSpec("lm-tiny-16", mode="jit", **QUICK), tmp_path, log=quiet)
    assert m.status == "skipped"
    assert m.reason.startswith("mode jit does not run the decode phase (a step that updates the KV cache in place; "
                               "modes that do: ") and "reduce-overhead" in m.reason and "cudagraphs" in m.reason


def _trace(args: list[str], out: Path):
    return CliRunner().invoke(main, ["trace", *args, "--phase", "decode", "--out", str(out), "--iters", "2"])


def test_decode_of_a_model_that_is_no_causal_lm_is_a_usage_error(tmp_path):
    own = tmp_path / "my_model.py"
    own.write_text("import torch\n\ndef my_model(batch, dtype, device):\n"
                   "    return torch.nn.Linear(4, 4).to(device, dtype), (torch.randn(batch, 4, device=device),)\n")
    names = ["vit16x6x384", f"{own}:my_model"]
    if importlib.util.find_spec("transformers") is not None:
        names.append("hf:bert?layers=2&hidden=64&heads=4")
    for name in names:
        r = _trace(["--model", name], tmp_path / "traces")
        assert r.exit_code == ExitCode.USAGE, r.output
        assert "is not a causal LM: phase decode runs hf:<type> with a causal-lm head (hf:gpt2" in r.output
        assert "runs phases inference, forward, forward-backward and train-step" in r.output
        assert "Traceback" not in r.output
    assert not (tmp_path / "traces").exists()


@needs_transformers
def test_a_context_past_the_models_positions_is_a_usage_error(tmp_path):
    name = "hf:gpt2?layers=2&hidden=64&heads=4&vocab=1000&positions=64"
    steps = decode_steps(RunSpec(name, iters=2))
    r = _trace(["--model", name, "--seq", str(64 - steps + 1)], tmp_path / "traces")
    assert r.exit_code == ExitCode.USAGE, r.output
    assert f"has 64 positions: a {64 - steps + 1}-token prompt and {steps} decode steps" in r.output
    assert f"need 65; give a shorter --seq or fewer --iters, or more positions ({name[:-2]}65)" in r.output
    assert not (tmp_path / "traces").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux") or Path("/proc/sys/vm/overcommit_memory").read_text().strip()
                    == "1", reason="needs Linux refusing an allocation past its memory (overcommit_memory 0 or 2)")
def test_a_kv_cache_that_does_not_fit_is_an_oom_row_with_its_size(tmp_path):
    """lm-tiny at a 65,536-token prompt and 65,536 sequences: a KV cache of 2 TB (by hand), refused at once."""
    spec = RunSpec("lm-tiny-65536", batch=65536, **QUICK)
    tokens = 65536 + decode_steps(spec)
    planned = kv_bytes(2, 65536, 2, tokens, 64) / 2**20
    r = CliRunner().invoke(main, ["trace", "--model", "lm-tiny-65536", "--batch", "65536", "--phase", "decode",
                                  "--threads", "1", "--iters", "4", "--warmup", "1", "--profile-iters", "2",
                                  "--out", str(tmp_path)])
    assert r.exit_code == ExitCode.RUN_FAILED, r.output
    data = json.loads((tmp_path / "lm-tiny-65536-b65536-decode-t1" / "eager" / "run.json").read_text())
    assert data["status"] == "oom" and data["stage"].startswith("prefill")
    assert data["reason"].startswith(f"CacheOutOfMemory: out of memory with a KV cache of {planned:.1f} MB "
                                     f"(65536 sequences x {tokens} tokens, tracekit's (lm-*)): ")
    assert data["decode"]["kv_cache_MB"] == planned and "prefill_ms" not in data["decode"]
    assert f"oom: CacheOutOfMemory: out of memory with a KV cache of {planned:.1f} MB" in r.output


@pytest.mark.slow
def test_a_decode_run_in_several_processes_gives_its_figures_per_token_from_the_pooled_latency(tmp_path):
    m = runner.run(RunSpec("lm-tiny-16", batch=2, repeats=2, **QUICK), tmp_path, log=quiet)
    assert m.status == "ok" and m.repeats.n == 2, m.reason
    assert (m.decode.ms_per_token.median, m.decode.ms_per_token.p90) == (m.latency_ms.median, m.latency_ms.p90)
    assert m.decode.tokens_per_s.median == pytest.approx(2 / m.latency_ms.median * 1e3)
    assert m.decode.tokens_per_s.p10 == pytest.approx(2 / m.latency_ms.p90 * 1e3)

"""A decode workload in every report (issue 41): the answer speaks in tokens/s and splits Δ busy + Δ idle
per token, every format has the per-token table, CSV, JSON and the Python API carry tokens/s, prompt,
KV cache and prefill, `tracekit trace` prints the decode line, and `tracekit whatif` of an eager decode
run predicts ms per token. The runs are hand-made (tests/tracebuilder.py): their figures are known."""

import json

import pandas as pd
import pytest
from click.testing import CliRunner
from tracebuilder import eager_trace, graph_trace, write_run

import tracekit
from tracekit.analysis.result import Result
from tracekit.analysis.runs import analyze
from tracekit.cli import main
from tracekit.manifest import Manifest
from tracekit.report import write_reports
from tracekit.report.formats.run_status import run_status_lines
from tracekit.report.views import answers
from tracekit.report.worded import worded

BATCH = 8
MODEL = "hf:llama?layers=2"


def decode_run(folder, trace, mode: str, latency_ms: tuple[float, float, float], prefill_ms: float = 3.25):
    spec = {"model": MODEL, "mode": mode, "batch": BATCH, "seq": 128, "dtype": "bf16", "device": "cuda",
            "phase": "decode"}
    decode = {"prompt_tokens": 128, "tokens_per_step": BATCH, "cache_tokens": 195,
              "kv_cache": "transformers StaticCache", "kv_cache_MB": 12.5, "prefill_ms": prefill_ms,
              "prefill_first_ms": 40.0, "steps": 400, "wraps": 5}
    return write_run(folder, trace, model=MODEL, mode=mode, batch=BATCH, latency_ms=latency_ms, spec=spec,
                     decode=decode)


@pytest.fixture
def decode_study(tmp_path):
    """eager (launch-bound, 0.080 ms a step) and reduce-overhead (one graph launch a step, 0.040 ms) of one
    decode workload, and an inference run of another workload."""
    decode_run(tmp_path / "d" / "eager", eager_trace(), "eager", (0.08, 0.07, 0.09))
    decode_run(tmp_path / "d" / "reduce-overhead", graph_trace(), "reduce-overhead", (0.04, 0.035, 0.05), 3.5)
    write_run(tmp_path / "v" / "eager", eager_trace(), mode="eager", latency_ms=(0.08, 0.07, 0.09))
    return tmp_path


def test_the_answer_speaks_in_tokens_per_second_and_per_token(decode_study):
    t = Result.of(analyze(decode_study))
    first, why = next((a, b) for a, b in answers(t.comparison, t.analysis.runs, "eager") if "decode" in a)
    # tokens/s = batch / ms per token x 1000: 8 / 0.08 and 8 / 0.04; the range 0.07/0.05 - 0.09/0.035
    assert first == ("hf:llama?layers=2 b8 s128 bf16 decode cuda: reduce-overhead 2.00x (1.40-2.57) more tokens/s over "
                     "eager (100,000 -> 200,000 tokens/s, 0.080 -> 0.040 ms per token)")
    row = t.comparison.set_index("mode").loc["reduce-overhead"]
    row = row[row["phase"] == "decode"] if isinstance(row, pd.DataFrame) else row
    assert why.startswith(f"why: Δ GPU busy {row['d_busy_per_iter_ms']:+.3f} + Δ idle {row['d_idle_est_ms']:+.3f} "
                          "ms/token: idle dominates")
    other = next(a for a, b in answers(t.comparison, t.analysis.runs, "eager") if "decode" not in a)
    assert "tokens" not in other
    finding = worded(t).comparison.set_index("run").loc["d/reduce-overhead", "finding"]
    assert finding.startswith(f"less GPU idle time (launch overhead, syncs) dominates: Δ latency -0.040 ms = "
                              f"Δ GPU busy {row['d_busy_per_iter_ms']:+.3f} + Δ idle {row['d_idle_est_ms']:+.3f} "
                              "ms per token")


def test_every_format_and_the_api_carry_the_figures_per_token(decode_study, tmp_path):
    out = tmp_path / "reports"
    write_reports(Result.of(analyze(decode_study)), out, source=str(decode_study))
    md = (out / "summary.md").read_text()
    assert "## Decode: per token" in md
    # busy per token: the traces' 40 µs of kernels over 2 steps; idle: the unprofiled latency less it
    assert ("| hf:llama?layers=2 b8 s128 bf16 decode cuda | reduce-overhead | 0.040 | 0.035-0.050 | 200,000 | 8 | "
            "128 | 3.50 | 12.5 | 2.0 | 1.0 | 0.020 | 0.020 |") in md
    assert "<h2>Decode: per token</h2>" in (out / "index.html").read_text()
    comp = pd.read_csv(out / "comparison.csv")
    decode = comp[comp["phase"] == "decode"].set_index("mode")
    assert decode.loc["eager", "tokens_per_s"] == pytest.approx(100_000)
    assert decode.loc["reduce-overhead", ["prompt_tokens", "kv_cache_MB", "prefill_ms"]].tolist() == [128, 12.5, 3.5]
    assert comp[comp["phase"] != "decode"]["tokens_per_s"].isna().all()
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs.loc[runs["phase"] == "decode", "tokens_per_step"]) == {BATCH}
    data = json.loads((out / "runs.json").read_text())
    assert {r["mode"]: r["tokens_per_s"] for r in data["comparison"] if r["phase"] == "decode"} == pytest.approx(
        {"eager": 100_000, "reduce-overhead": 200_000})
    api = tracekit.analyze(decode_study).comparison
    assert api.loc[api["phase"] == "decode", "tokens_per_s"].tolist() == pytest.approx([100_000, 200_000])
    r = CliRunner().invoke(main, ["analyze", str(decode_study), "--out", str(tmp_path / "again")],
                           env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "decode: per token (a step makes one token of each sequence)" in r.output


def test_tracekit_trace_prints_a_decode_runs_figures_per_token():
    run = Manifest.from_dict({"label": "hf-llama-decode", "mode": "eager", "status": "ok", "reason": "",
                              "compile_s": 0.25, "latency_ms": {"median": 2.0, "p10": 1.9, "p90": 2.2},
                              "wall_ms": {"median": 2.02}, "decode": {
                                  "prompt_tokens": 128, "tokens_per_step": 8, "cache_tokens": 195,
                                  "kv_cache": "transformers StaticCache", "kv_cache_MB": 12.5, "prefill_ms": 3.25,
                                  "wraps": 5, "ms_per_token": {"median": 2.0, "p10": 1.9, "p90": 2.2},
                                  "tokens_per_s": {"median": 4000.0, "p10": 3636.4, "p90": 4210.5}}})
    assert run_status_lines(run)[1] == (
        "decode: 2.000 ms per token (p10-p90 1.900-2.200), 4,000 tokens/s (8 sequences); prefill 3.2 ms (128 tokens); "
        "KV cache 12.5 MB (195 tokens, transformers StaticCache), back to the prompt's end 5 times when full")


def test_whatif_of_an_eager_decode_run_predicts_ms_per_token(decode_study):
    run = decode_study / "d" / "eager"
    r = CliRunner().invoke(main, ["whatif", str(run), "--cuda-graphs", "--json"])
    out = json.loads(r.output)
    assert r.exit_code == 0 and out["per"] == "token" and out["tokens_per_step"] == BATCH
    p = tracekit.whatif(run, cuda_graphs=True)   # the same prediction from Python, unrounded
    assert p.tokens_per_step == BATCH
    assert out["predicted_tokens_per_s"] == round(BATCH / p.predicted_latency_ms * 1e3, 1)
    assert out["measured_tokens_per_s"] == pytest.approx(100_000)
    r = CliRunner().invoke(main, ["whatif", str(run), "--cuda-graphs"])
    lines = r.output.splitlines()
    rate = out["predicted_tokens_per_s"]
    low, high = out["predicted_low_ms"], out["predicted_high_ms"]
    assert low <= out["predicted_latency_ms"] <= high
    assert lines[1].startswith(f"  predicted {out['predicted_latency_ms']:.3f} ms per token ({low:.3f}-{high:.3f} ms; "
                               f"{rate:,.0f} tokens/s at "
                               f"8 sequences a step), from {out['modelled_latency_ms']:.3f} ms per token modelled "
                               "(calibrated to the unprofiled 0.080 ms")
    assert lines[2].startswith("  critical path before (per token): ")
    inference = CliRunner().invoke(main, ["whatif", str(decode_study / "v" / "eager"), "--cuda-graphs", "--json"])
    assert "per" not in json.loads(inference.output) and "tokens_per_step" not in inference.output

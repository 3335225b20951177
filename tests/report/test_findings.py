"""A suite's findings, "what the traces show" (tracekit.report.findings): sentences from the numbers of
its comparison (the runs of tests/analysis/comparison/test_suite_comparison.py)."""

import pandas as pd

from tests.analysis.comparison.test_suite_comparison import RUNS, _row
from tracekit.analysis.comparison.suite_comparison import check_claims, comparison
from tracekit.report.findings import suite_findings
from tracekit.report.worded import claims_view


def test_findings_are_sentences_from_the_numbers():
    lines = suite_findings(comparison(RUNS))
    text = "\n".join(lines)
    assert "reduce-overhead vs eager: faster on 1 of 1 workloads, speedup 1.25x" in text
    assert "default vs eager: faster on 0 of 1 workloads" in text
    assert "slower than eager on 1: vit b8 fp32 cuda (0.8x)" in text
    assert "reduce-overhead: 64 kernels per iteration from 2.0 host launches, 32.0 kernels per launch" in text
    # Where the time went per profiled iteration: busy 1700 -> 1600 us, idle 1200 -> 100 us,
    # of it waiting on the host 1000 -> 50 us (10,000 and 500 us over 10 iterations).
    assert ("-1.20 ms in all vs eager: -0.10 ms of GPU busy time (kernel work), -0.95 ms of GPU idle waiting on "
            "the host (launches, Python) and -0.15 ms of other GPU idle") in text
    assert "reduce-overhead: peak GPU memory 1.5x eager's" in text
    # Each op by the resource nearer its peak: matmul by FLOP/s, softmax by bandwidth.
    assert "matmul: achieved TFLOP/s 229–687; highest 687 TFLOP/s (matmul4096 b8 fp16 cuda, eager), 69% of" not in text
    assert "matmul: achieved TFLOP/s 687; highest 687 TFLOP/s (matmul4096 b8 fp16 cuda, eager), 69% of the" in text
    assert "softmax: achieved GB/s 2.68e+03–3.36e+03; highest 3.36e+03 GB/s" in text
    assert "softmax: achieved TFLOP" not in text
    assert "oom: big/eager." in text


def test_cpu_only_runs_are_said_to_have_no_gpu_figures():
    cpu = RUNS.assign(device_type="cpu", device_name="AMD EPYC", has_gpu=False)
    assert suite_findings(comparison(cpu))[0].startswith("All 7 finished runs ran on the CPU (AMD EPYC)")


def test_a_run_on_another_device_than_asked_is_said():
    onnx = _row("vit/onnx", "vit", "onnx", 50.0, device_type="cpu", device_name="Intel Xeon", has_gpu=False,
                requested_device="cuda")
    cmp = comparison(pd.concat([RUNS, pd.DataFrame([onnx])], ignore_index=True))
    said = [line for line in suite_findings(cmp) if line.startswith("onnx ran on")]
    assert said == ["onnx ran on the cpu (Intel Xeon) although cuda was asked, on 1 workloads (latency 50 ms): "
                    "not compared with the cuda eager runs, since that speedup would compare devices, not modes."]
    assert not any("ran on the" in line for line in suite_findings(comparison(RUNS)))


def test_where_the_answer_changes_with_size():
    """default vs eager on softmax at four sizes: slower, slower, within 2%, faster (latencies
    chosen so); layer_norm faster at both sizes: no sentence (its answer does not change)."""
    runs = []
    for n, eager_ms, default_ms in ((1024, 1.0, 2.0), (2048, 1.0, 1.25), (4096, 1.0, 0.99), (8192, 2.0, 1.0)):
        runs += [_row(f"sm{n}/eager", f"softmax{n}", "eager", eager_ms, op=f"softmax{n}", dtype="fp16"),
                 _row(f"sm{n}/default", f"softmax{n}", "default", default_ms, op=f"softmax{n}", dtype="fp16")]
    for n in (256, 512):
        runs += [_row(f"ln{n}/eager", f"layernorm{n}", "eager", 1.0, op=f"layernorm{n}"),
                 _row(f"ln{n}/default", f"layernorm{n}", "default", 0.5, op=f"layernorm{n}")]
    lines = [f for f in suite_findings(comparison(pd.DataFrame(runs))) if "changes with size" in f]
    assert lines == ["default vs eager on softmax# (fp16, inference, cuda) changes with size: slower at "
                     "softmax1024–softmax2048 (0.5–0.8x); no clear difference at softmax4096 (1.01x); faster at "
                     "softmax8192 (2x)."]


def test_model_sizes_of_a_family_are_read_in_order_of_eager_latency():
    """ViTs whose names differ in more than the last number (vit16x6x384, vit32x12x768,
    vit32x18x1024) are one family, sized by eager's latency: reduce-overhead within 2% at the
    largest, faster at the two smaller; at batch 1 faster at all three (no sentence)."""
    runs = []
    for name, eager_ms, ro_ms in (("vit32x18x1024", 8.0, 7.9), ("vit16x6x384", 2.0, 1.6), ("vit32x12x768", 4.0, 2.9)):
        for batch, scale in ((8, 1.0), (1, 0.5)):
            runs += [_row(f"{name}-{batch}/eager", name, "eager", eager_ms * scale, op=name, batch=batch),
                     _row(f"{name}-{batch}/ro", name, "reduce-overhead", ro_ms * scale * (0.8 if batch == 1 else 1),
                          op=name, batch=batch)]
    lines = [f for f in suite_findings(comparison(pd.DataFrame(runs))) if "changes with size" in f]
    assert lines == ["reduce-overhead vs eager on vit#x#x# (fp32, inference, cuda, sizes in order of eager's "
                     "latency) changes with size: faster at vit16x6x384–vit32x12x768 (1.25–1.38x); no clear "
                     "difference at vit32x18x1024 (1.01x)."]


def test_claims_are_shown_with_what_they_measure_and_each_value():
    claims = [{"text": "a", "metric": "speedup", "model": "vit", "mode": ["reduce-overhead"], "range": [1.3, 1.4]},
              {"text": "b", "metric": "launches_vs_eager", "mode": "reduce-overhead", "range": [0.005, 0.04]},
              {"text": "e", "metric": "speed", "model": "nothing", "range": [1, 2]}]
    shown = claims_view(check_claims(claims, comparison(RUNS)))
    assert list(shown.columns) == ["claim", "measure", "claimed range", "measured", "verdict"]
    assert shown.values.tolist() == [
        ["a", "latency speedup over eager (median latencies)", "1.3–1.4", "vit b8 fp32 cuda reduce-overhead: 1.25",
         "contradicted"],
        ["b", "host launches per iteration, relative to eager", "0.005–0.04",
         "vit b8 fp32 cuda reduce-overhead: 0.0303", "consistent"],
        ["e", "unknown metric 'speed'", "1–2", "-", "no data"]]

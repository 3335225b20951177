"""The terminal report (issue 32): the answer for each workload first, then tables that fit
COLUMNS (100 off a terminal): all-n/a columns left out, long names shortened with a legend,
``--wide`` for every column."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from owndata import CPU_RUNS, H100_STUDY
from tracebuilder import eager_trace, graph_trace, write_run

from tracekit.analysis.result import Result
from tracekit.analysis.runs import analyze
from tracekit.cli import main
from tracekit.report.comparison_text import speedup_text
from tracekit.report.fit import Fit, Legend

LLAMA = "hf:llama?layers=16&hidden=2048&heads=32&kv_heads=8&ffn=8192"
LLAMA_FOLDER = "hf-llama-layers16-hidden2048-heads32-kv_heads8-ffn8192-bf16-b1"


def run(args: list[str], columns: str | None = None):
    """``tracekit ARGS`` off a terminal (as in a pipe or CI), with COLUMNS set or not."""
    r = CliRunner().invoke(main, args, env={"COLUMNS": columns})
    assert r.exit_code == 0, r.output
    return r.stdout.splitlines()


def test_analyze_leads_with_the_answer_and_fits_100_columns(tmp_path):
    lines = run(["analyze", str(H100_STUDY), "--out", str(tmp_path)])
    assert max(map(len, lines)) <= 100
    # The answer for each workload: its fastest mode, the speedup with its range, and the split.
    comp = Result.of(analyze(H100_STUDY)).comparison
    for i, (workload, g) in enumerate(comp.groupby("workload", sort=False)):
        best = g[~g["inconclusive"]].sort_values("speedup").iloc[-1]
        base = g[g["run"] == g["baseline_run"]].iloc[0]
        text = speedup_text(best["speedup"], best["speedup_low"], best["speedup_high"], False)
        assert lines[2 * i] == (f"{workload}: {best['mode']} {text} over eager "
                                f"({base['latency_median_ms']:.3f} -> {best['latency_median_ms']:.3f} ms)")
        assert lines[2 * i + 1].startswith(f"  why: Δ GPU busy {best['d_busy_per_iter_ms']:+.3f} + Δ idle "
                                           f"{best['d_idle_est_ms']:+.3f} ms/iter: idle dominates (")
    assert lines[0] == "vit16x6x384 b1 fp32 cuda: reduce-overhead 4.30x (4.12-4.63) over eager (2.650 -> 0.616 ms)"
    # Run names over 20 characters get their folder's key; the legend says which.
    i = lines.index("short names in the tables:")
    assert lines[i + 1:i + 3] == ["  A = vit16x6x384", "  B = vit16x6x384-b1"]
    assert any(line.startswith("│ B/reduce-overhead ") for line in lines)
    assert not any("vit16x6x384-b1/reduce-overhead" in line for line in lines if line.startswith("│"))


def test_tables_fit_the_columns_asked_for_and_wide_shows_everything(tmp_path):
    narrow = run(["analyze", str(H100_STUDY), "--out", str(tmp_path)], columns="80")
    assert max(map(len, narrow)) <= 80
    assert any("(--wide shows them)" in line for line in narrow)
    wide = run(["analyze", str(H100_STUDY), "--out", str(tmp_path), "--wide"], columns="80")
    headers = " ".join(line for line in wide if line.startswith("┃"))
    assert all(h in headers for h in ("launches ×", "mean kernel (µs)", "first call (s)", "feed ratio"))
    assert any(line.startswith("│ vit16x6x384-b1/reduce-overhead ") for line in wide)   # names in full
    assert not any("not shown" in line or "short names" in line for line in wide)


def test_cpu_runs_drop_their_na_columns(tmp_path):
    lines = run(["analyze", str(CPU_RUNS), "--out", str(tmp_path)])
    runs_header = next(i for i, line in enumerate(lines) if "tracekit: runs" in line)
    header = " ".join(lines[runs_header + 1:runs_header + 6])
    assert "kernels" not in header and "launches" not in header and "verdict" not in header
    assert any(line.startswith("  not shown: n/a in every row: kernels, launches, GPU busy (ms)") for line in lines)
    assert lines[1] == ("  why: no GPU activity (CPU only): time in CPU ops 412.533 -> 222.542 ms per "
                        "profiled iteration")


def test_long_library_model_names_get_a_key(tmp_path):
    for mode, trace, latency in (("eager", eager_trace(), (1.0, 0.9, 1.1)), ("reduce-overhead", graph_trace(),
                                                                             (0.5, 0.45, 0.55))):
        write_run(tmp_path / "t" / LLAMA_FOLDER / mode, trace, model=LLAMA, mode=mode, latency_ms=latency, batch=1)
    lines = run(["analyze", str(tmp_path / "t"), "--out", str(tmp_path / "r")])
    assert max(map(len, lines)) <= 100
    assert f"  A = {LLAMA_FOLDER}" in lines and f"  B = {LLAMA} b1 fp32 cuda" in lines
    rows = [line for line in lines if line.startswith("│")]
    assert any(r.startswith("│ B ") and " reduce-overhead " in r for r in rows)          # the workload's key
    assert any(r.startswith("│ A/reduce-overhead ") for r in rows)                        # the run's folder's
    assert lines[0].startswith(f"{LLAMA} b1 fp32 cuda: reduce-overhead 2.00x")           # the answer: in full


def test_compare_leads_with_the_answer(study):
    lines = run(["compare", str(study / "a" / "first"), str(study / "b" / "second")])
    assert lines[0].startswith("vit16x6x384 b8 fp32 cuda: reduce-overhead 2.00x (1.40-2.57) over eager")


def test_the_columns_left_out_are_named():
    fit = Fit()
    headers = ["run", "status", "kernels", "verdict"]
    rows = [["a", "ok", "n/a", "launch-bound"], ["b", "ok", "n/a", "gpu-bound"]]
    shown, widths, notes = fit.columns(headers, rows, width=30)
    assert [headers[i] for i in shown] == ["run", "verdict"] and sum(w + 3 for w in widths) + 1 <= 30
    assert notes == ["n/a in every row: kernels", "the same in every row: status ok"]
    shown, _, notes = fit.columns(headers, rows, width=200)
    assert [headers[i] for i in shown] == ["run", "status", "verdict"]          # room: the constant column stays
    shown, _, notes = Fit(wide=True).columns(headers, rows, width=10)
    assert shown == [0, 1, 2, 3] and notes == []


@pytest.mark.parametrize("names, short", [
    (["mlp/eager", "mlp/default"], ["mlp/eager", "mlp/default"]),
    (["vit16x6x384/eager", "vit16x6x384/reduce-overhead"], ["A/eager", "A/reduce-overhead"]),
    (["vm_20159.1795369894972227534.pt.trace.json.gz"], ["A"]),
])
def test_legend_keys(names, short):
    legend = Legend.of(runs=names)
    assert [legend.short(n) for n in names] == short

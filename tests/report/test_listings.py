"""The lines of `tracekit models` and `tracekit backends` (report/listings.py), from hand-made rows."""

import subprocess
import sys

from tracekit.report.listings import backend_lines, model_lines


def test_models_are_listed_under_their_kind_with_where_they_come_from():
    rows = [{"kind": "built-in", "name": "mlp", "batch": 4, "description": "MLP", "source": {}},
            {"kind": "library", "name": "hf:gpt2", "batch": 1, "seq": 128, "description": "GPT-2",
             "source": {"library": "transformers", "version": "4.1"}},
            {"kind": "library", "name": "timm:", "batch": 8, "description": "timm", "source": {},
             "missing": "pip install timm"},
            {"kind": "workload file", "name": "bad", "problem": "SyntaxError (line 3)"}]
    assert model_lines(rows, "workloads") == [
        "built-in models:",
        "  mlp                  batch 4    MLP",
        "library models (random weights, nothing downloaded):",
        "  hf:gpt2              batch 1    seq 128  GPT-2  [transformers 4.1]",
        "  timm:                batch 8    timm  [pip install timm]",
        "workload functions (workloads/*.py):",
        "  bad                  cannot be used: SyntaxError (line 3)"]


def test_backends_say_their_phases_why_not_and_what_differs_here():
    rows = [{"mode": "cudagraphs", "available": False, "description": "CUDA graphs", "phases": ["inference"],
             "reason": "needs CUDA", "note": ""},
            {"mode": "reduce-overhead", "available": True, "description": "Inductor",
             "phases": ["inference", "train-step"], "reason": "", "note": "no CUDA graphs on cpu"}]
    assert backend_lines(rows) == [
        "cudagraphs                  unavailable  CUDA graphs",
        "                            phases: inference; needs CUDA",
        "reduce-overhead             available  Inductor",
        "                            phases: inference, train-step",
        "                            here: no CUDA graphs on cpu"]


def test_the_lines_cost_no_report_format():
    """Importing them loads none of the formats (nor pandas): `tracekit models` stays as fast as its listing."""
    code = "import sys, tracekit.report.listings; print(sorted(m for m in ('pandas', 'tracekit.report.formats.html') " \
           "if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"

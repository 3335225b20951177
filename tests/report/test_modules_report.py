"""The module-by-module comparison in reports (issue 20 part 3): the findings name the top modules,
summary.md and index.html show the per-module table, plots/ has busy time per module per mode."""

from __future__ import annotations

import re

import pandas as pd

from tests.analysis.attribution.test_diff import RECORD, compiled_mlp, eager_mlp
from tests.tracebuilder import add_cpu_range, write_run
from tracekit.analysis.result import Result
from tracekit.analysis.runs import analyze
from tracekit.report import write_reports
from tracekit.report.worded import worded


def test_reports_show_modules(tmp_path):
    write_run(tmp_path / "t" / "mlp" / "eager", eager_mlp(), model="mlp", mode="eager",
              attribution={"module_scopes": True})
    write_run(tmp_path / "t" / "mlp" / "default", compiled_mlp(), model="mlp", mode="default", attribution=RECORD,
              latency_ms=(0.8, 0.7, 0.9))
    tables = Result.of(analyze(tmp_path / "t"))
    default = worded(tables).comparison.set_index("mode").loc["default"]
    assert default["top_modules"] == "blocks.*.mlp busy -4.0 µs, launches -2"
    assert default["finding"].endswith("; by module: blocks.*.mlp busy -4.0 µs, launches -2")
    busy = tables.module_busy.set_index(["mode", "module"])["busy_per_iter_us"]
    assert busy[("eager", "blocks.*.mlp")] == 25 and busy[("default", "blocks.*.mlp")] == 21
    written = {p.name for p in write_reports(tables, tmp_path / "r")}
    assert {"modules.csv", "mlp-b8-fp32-cuda-modules.png"} <= written
    md = (tmp_path / "r" / "summary.md").read_text()
    assert "## Where the time went, module by module" in md
    assert "4 kernels (addmm x2, gelu, add) became 2 Triton kernels" in md
    html = (tmp_path / "r" / "index.html").read_text()
    assert "Where the time went, module by module" in html and "became 2 Triton kernels" in html
    assert pd.read_csv(tmp_path / "r" / "modules.csv")["d_busy_us"].sum() == -4.0


def _mlp_with_input_copy():
    """The eager MLP plus a copy kernel (1 µs an iteration) launched by the model itself, in no submodule."""
    t = eager_mlp()
    for o in (0, 200):
        add_cpu_range(t, "aten::copy_", o + 145, 5)
        t.kernel("copy_kernel", start=o + 170, dur=1, launch_at=o + 146)
    return t


def test_the_models_own_row_is_named_and_the_table_wraps_to_the_page(tmp_path):
    """The model's own module (path "") is "(model)" in every module table, and the sentences of
    "what changed" wrap in index.html instead of widening the table past the page."""
    write_run(tmp_path / "t" / "mlp" / "eager", _mlp_with_input_copy(), model="mlp", mode="eager",
              attribution={"module_scopes": True})
    write_run(tmp_path / "t" / "mlp" / "default", compiled_mlp(), model="mlp", mode="default", attribution=RECORD,
              latency_ms=(0.8, 0.7, 0.9))
    tables = Result.of(analyze(tmp_path / "t"))
    assert "" in set(tables.modules["module"])                 # the data keeps the path; reports name it
    write_reports(tables, tmp_path / "r")
    md = (tmp_path / "r" / "summary.md").read_text()
    assert "| mlp b8 fp32 cuda | default | (model) | 1.0 | 0.0 | -1.0 |" in md
    html = (tmp_path / "r" / "index.html").read_text()
    assert '<td class="text">(model)</td>' in html and '<td class="text"></td>' not in html
    assert '<td class="text wrap">4 kernels (addmm x2, gelu, add) became 2 Triton kernels' in html
    assert re.search(r"td\.wrap \{[^}]*white-space: normal", html)
    assert "(model) busy -1.0 µs" in worded(tables).comparison.set_index("mode").loc["default", "top_modules"]

"""The module-by-module comparison in reports (issue 20 part 3): the findings name the top modules,
summary.md and index.html show the per-module table, plots/ has busy time per module per mode."""

from __future__ import annotations

import pandas as pd

from tests.analysis.test_diff import RECORD, compiled_mlp, eager_mlp
from tests.tracebuilder import write_run
from tracekit.analysis.tables import Tables
from tracekit.analysis.runs import analyze
from tracekit.report import write_reports


def test_reports_show_modules(tmp_path):
    write_run(tmp_path / "t" / "mlp" / "eager", eager_mlp(), model="mlp", mode="eager",
              attribution={"module_scopes": True})
    write_run(tmp_path / "t" / "mlp" / "default", compiled_mlp(), model="mlp", mode="default", attribution=RECORD,
              latency_ms=(0.8, 0.7, 0.9))
    tables = Tables.of(analyze(tmp_path / "t"))
    default = tables.comparison.set_index("mode").loc["default"]
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

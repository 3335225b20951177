"""index.html in a real browser: headless Chromium (Debian's package) loads the report of
the project's H100 ViT runs (tests/data) and shows its tables and plots, without console errors.

Set TRACEKIT_SCREENSHOT=path.png to keep the screenshot (it is in pytest's tmp_path otherwise).
"""

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
from chromium import Chromium, find_browser
from owndata import H100_STUDY as STUDY

from tracekit.analysis.result import Result
from tracekit.analysis.runs import analyze
from tracekit.report import write_reports

pytest.importorskip("websocket", reason="websocket-client is not installed (make setup installs it)")
if find_browser() is None:
    pytest.skip("Chromium is not installed: `make setup-browser` (apt-get install chromium) installs it",
                allow_module_level=True)



@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reports")
    write_reports(Result.of(analyze(STUDY)), out, source="tests/data/h100/vit-study")
    return out / "index.html"


def test_index_html_renders_tables_and_plots(report, tmp_path):
    with Chromium(tmp_path / "profile") as page:
        page.open(report)
        tables = page.evaluate("Array.from(document.querySelectorAll('table')).map(t => t.tBodies[0].rows.length)")
        images = page.evaluate("Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
        shown = page.evaluate("Array.from(document.querySelectorAll('table, img'))"
                              ".every(e => e.getBoundingClientRect().width > 0)")
        speedups = page.evaluate("Array.from(document.querySelectorAll('table')[0].tBodies[0].rows)"
                                 ".map(r => r.cells[3].textContent)")
        shot = page.screenshot(tmp_path / "index.png", height=2600)
        # Sorting: a click on "latency p50 (ms)" orders the rows by it, a second click reverses.
        sort = ("(() => { const t = document.querySelectorAll('table')[0]; const th = t.tHead.rows[0].cells[2];"
                " th.click(); const up = Array.from(t.tBodies[0].rows).map(r => parseFloat(r.cells[2].textContent));"
                " th.click(); const down = Array.from(t.tBodies[0].rows).map(r => parseFloat(r.cells[2].textContent));"
                " return [up, down]; })()")
        up, down = page.evaluate(sort)
        errors = page.errors
    assert tables == [6, 6, 6, 6, 6, 6]  # speedup, profiled, details, overhead, runs, idle: 6 runs each
    assert len(images) == 5 and all(done and w > 0 and h > 0 for done, w, h in images)  # overview + 2 a workload
    assert shown
    assert sum(s.startswith("1.00x") for s in speedups) == 2  # the 2 eager baselines
    assert up == sorted(up) and down == sorted(up, reverse=True)
    assert errors == []
    assert shot.stat().st_size > 50_000 and shot.read_bytes()[:4] == b"\x89PNG"
    if keep := os.environ.get("TRACEKIT_SCREENSHOT"):
        shutil.copy(shot, keep)


def test_the_check_sees_errors_and_broken_images(tmp_path):
    """The same checks fail on a page with a console error, an exception and a broken image."""
    bad = tmp_path / "bad.html"
    bad.write_text('<img src="missing.png"><script>console.error("boom"); undefinedFunction();</script>')
    with Chromium(tmp_path / "profile") as page:
        page.open(bad)
        images = page.evaluate("Array.from(document.images).map(i => i.naturalWidth)")
        errors = page.errors
    assert images == [0]
    assert any("boom" in e for e in errors) and any("undefinedFunction" in e or "Uncaught" in e for e in errors)
    assert any("missing.png" in e for e in errors)


def test_the_module_table_fits_the_page(tmp_path):
    """The per-module table of the H100 attribution runs (reports/h100/diff: GPT-2 and ViT, their
    "what changed" sentences up to 400 characters) wraps to the page instead of running off it."""
    tables = Result.of(analyze(STUDY))
    tables.modules = pd.read_csv(Path(__file__).parents[2] / "reports/h100/diff/attribution-h100/modules.csv",
                                 keep_default_na=False, na_values=[""])
    write_reports(tables, tmp_path / "r")
    with Chromium(tmp_path / "profile") as page:
        page.open(tmp_path / "r" / "index.html")
        table, page_width = page.evaluate(
            "(() => { const h = Array.from(document.querySelectorAll('h2')).find(h => h.textContent.includes("
            "'module by module')); const box = h.nextElementSibling;"
            " return [box.querySelector('table').getBoundingClientRect().width, box.clientWidth]; })()")
    assert 0 < table <= page_width

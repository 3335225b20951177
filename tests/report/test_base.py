"""The report formats' registry: a format is a registered Renderer, found by the type of data it takes."""

import io
import pkgutil
from dataclasses import dataclass

import pytest
from rich.console import Console

from tracekit.report import RENDERERS, Renderer, Report, formats, print_reports, register, write_reports


@dataclass
class Shopping:
    items: list[str]


@pytest.fixture
def shopping_formats():
    """Two formats of a data type of the test's own, registered for the test only."""

    @register
    class Lines(Renderer):
        name = "test-lines"
        takes = Shopping

        def write(self, r: Report):
            path = r.out / "list.txt"
            path.write_text("\n".join(r.data.items) + f"\nafter: {[p.name for p in r.written]}\n")
            return [path]

        def show(self, r: Report, console: Console):
            console.print(f"{r.source}: {len(r.data.items)} items" + ("!" if r.options.get("loud") else ""))

    @register
    class Count(Renderer):
        name = "test-count"
        takes = Shopping
        order = 0

        def write(self, r: Report):
            path = r.out / "count.txt"
            path.write_text(str(len(r.data.items)))
            return [path]

    yield
    del RENDERERS["test-lines"], RENDERERS["test-count"]


def test_a_registered_format_is_written_for_its_data_only_and_in_order(shopping_formats, tmp_path):
    written = write_reports(Shopping(["eggs", "milk"]), tmp_path)
    assert [p.name for p in written] == ["count.txt", "list.txt"]  # order 0 first
    assert (tmp_path / "list.txt").read_text() == "eggs\nmilk\nafter: ['count.txt']\n"
    assert write_reports(object(), tmp_path / "other") == []       # no format takes it
    out = io.StringIO()
    print_reports(Shopping(["eggs"]), source="monday", console=Console(file=out), loud=True)
    assert out.getvalue() == "monday: 1 items!\n"                   # Count has no terminal form


def test_every_module_of_formats_registers_a_renderer():
    modules = {m.name for m in pkgutil.iter_modules(formats.__path__)}
    assert modules, "no format modules found"
    registered = {type(r).__module__.rsplit(".", 1)[1] for r in RENDERERS.values()}
    assert modules <= registered

"""The package's import graph has no cycle (issue 33): every module of tracekit/ parsed with ast,
an edge for each import of a tracekit module wherever it is written (at the top or inside a
function; not under ``if TYPE_CHECKING:``, which never runs): ``import tracekit.x`` and
``from tracekit.x import y`` reach ``tracekit.x.y`` where that is a module, else ``tracekit.x``.
A registry is a small module its plug-ins import (``tracekit.report.base``, ``tracekit.cli.group``),
never the package that imports them."""

import ast
from pathlib import Path

import tracekit

PACKAGE = Path(tracekit.__file__).parent


def _modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package (a package by its __init__.py)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["tracekit", *path.relative_to(PACKAGE).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _runs(node: ast.AST) -> list[ast.AST]:
    """The nodes under ``node`` that run, ``if TYPE_CHECKING:`` bodies left out."""
    out = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            out += [n for c in child.orelse for n in [c, *_runs(c)]]
            continue
        out += [child, *_runs(child)]
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the tracekit modules it imports."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in _runs(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                edges |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "tracekit.report.base" in graph["tracekit.report.formats.csvjson"]      # from tracekit.report.base import
    assert "tracekit.analysis.trace_analysis" in graph["tracekit.analysis.runs"]    # an import inside a function
    assert "tracekit.analysis.metrics.cpu_ops" in graph["tracekit.analysis.result"]  # from package import module
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_package_has_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_module_name_is_used_twice_and_the_top_level_holds_the_api():
    """A module's name says what it holds and is used once in the package (DESIGN.md); the top level
    holds the API (``__init__``, ``api``, ``errors``), the CLI entry (``__main__``), the file helpers
    every layer writes with (``io``) and the packages, not loose modules (issue 37)."""
    names = [p.name for p in PACKAGE.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "api.py", "errors.py", "io.py"]


# What each layer may import (DESIGN.md: data flows one way; issue 37): the layer itself and those below it.
# The CLI and the API (tracekit.api) are above every layer; report/ renders what analysis/ made.
LAYERS = {
    "tracekit.trace": ("tracekit.trace", "tracekit.errors", "tracekit.io"),
    "tracekit.analysis": ("tracekit.analysis", "tracekit.trace", "tracekit.manifest", "tracekit.errors", "tracekit.io"),
    "tracekit.report": ("tracekit.report", "tracekit.analysis", "tracekit.trace", "tracekit.manifest",
                        "tracekit.errors", "tracekit.io", "tracekit"),  # tracekit: its __version__ only
}


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``"module -> imported"`` for each import of a module of a layer of ``LAYERS`` that is not
    allowed to it (a bare ``tracekit`` allows the package's root module only)."""
    out = []
    for module, imported in sorted(graph.items()):
        for layer, allowed in LAYERS.items():
            if _in(module, layer):
                out += [f"{module} -> {i}" for i in sorted(imported)
                        if not any(i == a if a == "tracekit" else _in(i, a) for a in allowed)]
    return out


def test_each_layer_imports_only_the_layers_below_it():
    """trace/ and analysis/ import nothing of report/, cli/ or the API, report/ nothing of cli/ or the
    API: every sentence a user reads is written in report/ (issue 37)."""
    assert upward_imports({"tracekit.analysis.x": {"tracekit.report.views", "tracekit.trace.reader"},
                           "tracekit.report.y": {"tracekit.api", "tracekit.analysis.runs", "tracekit"},
                           "tracekit.trace.z": {"tracekit.manifest"}}) == \
        ["tracekit.analysis.x -> tracekit.report.views", "tracekit.report.y -> tracekit.api",
         "tracekit.trace.z -> tracekit.manifest"]
    found = upward_imports(import_graph())
    assert not found, "imports against the layers:\n" + "\n".join(found)

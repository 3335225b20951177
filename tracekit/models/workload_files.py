"""Workload files: your own model as a plain Python function.

A workload function takes ``(batch: int, dtype: torch.dtype, device: str)`` and
returns ``(nn.Module, tuple of example input tensors)``, built on ``device`` in
``dtype``; the runner calls ``module(*inputs)``. It needs no tracekit import. An
optional ``seq`` parameter with a default makes it take ``--seq`` (token inputs).
The optional :func:`workload` decorator adds metadata.

Names (``tracekit trace --model``, suite files, :func:`load`):

* ``path/to/file.py:fn``: a file (relative to the current folder); its folder is
  put on ``sys.path`` so it can import its neighbours, as ``python file.py`` would;
* ``package.module:fn``: an importable module (the current folder is on the path,
  as for ``python -m``);
* ``fn``: a function of a file in ``workloads/`` (``$TRACEKIT_WORKLOADS`` names
  another folder), found by name without running the files (:func:`find`).

A file that cannot be imported, a missing function, a function that cannot be
called as ``fn(batch, dtype, device)``, raises, or returns something else is a
:class:`WorkloadError`: one line naming the file and the problem.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch

from tracekit.models.family import DTYPES, Family, Unavailable

ATTRIBUTE = "__tracekit_workload__"
DEFAULT_BATCH = 1


class WorkloadError(ValueError):
    """A workload file or function that cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class Meta:
    """What :func:`workload` records on a function."""

    batch: int = DEFAULT_BATCH
    description: str = ""
    cost: Callable[[int, torch.dtype], dict] | None = None
    compile_targets: str = ""


def workload(fn: Callable | None = None, *, batch: int = DEFAULT_BATCH, description: str = "",
             cost: Callable[[int, torch.dtype], dict] | None = None, compile_targets: str = ""):
    """Mark a workload function and give it metadata; the function itself is unchanged.

    Usable bare (``@tracekit.workload``) or with arguments::

        @tracekit.workload(batch=32, description="ResNet-50, 224x224",
                           compile_targets="layer4.*")
        def resnet50(batch, dtype, device): ...

    Args:
        batch: the default batch size (without it: 1).
        description: shown by ``tracekit models`` (default: the docstring's first line).
        cost: ``cost(batch, dtype) -> {"flop": ..., "bytes": ...}``, the FLOP and DRAM
            bytes one call needs at least, for achieved TFLOP/s and GB/s in reports.
        compile_targets: comma-separated ``fnmatch`` patterns of submodule names that
            ``--mode surgical`` compiles by default.
    """
    def mark(f: Callable) -> Callable:
        setattr(f, ATTRIBUTE, Meta(batch, description, cost, compile_targets))
        return f
    return mark(fn) if fn is not None else mark


def folder() -> Path:
    """The folder whose files' functions are found by bare name: ``$TRACEKIT_WORKLOADS``, else ``workloads``."""
    return Path(os.environ.get("TRACEKIT_WORKLOADS", "workloads"))


def _where(exc: BaseException, path: Path | None) -> str:
    """`` (line N)`` of the deepest frame of ``exc`` in ``path``, or ""."""
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f" (line {exc.lineno})"
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if path and Path(f.filename) == path]
    return f" (line {lines[-1]})" if lines else ""


def _one_line(exc: BaseException, path: Path | None) -> str:
    text = " ".join(str(exc.msg if isinstance(exc, SyntaxError) else exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text[:300]}{_where(exc, path)}"


_FILES: dict[tuple[Path, int], object] = {}


def _import_file(shown: str, path: Path):
    """The module of a Python file, imported once per file version."""
    if not path.is_file():
        raise WorkloadError(f"{shown}: no such file")
    path = path.resolve()
    key = (path, path.stat().st_mtime_ns)
    if key in _FILES:
        return _FILES[key]
    name = f"tracekit_workload_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses, pickling and torch.compile look modules up by name
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure of the user's file is one line
        del sys.modules[name]
        raise WorkloadError(f"{shown}: cannot import it: {_one_line(exc, path)}") from None
    _FILES[key] = module
    return module


def _import_module(shown: str, dotted: str):
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError as exc:
        if exc.name and dotted.startswith(exc.name):
            raise WorkloadError(f"{shown}: no module named {exc.name!r} (looked in the current folder and "
                                "the Python path)") from None
        raise WorkloadError(f"{shown}: cannot import it: {_one_line(exc, None)}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        raise WorkloadError(f"{shown}: cannot import it: {_one_line(exc, None)}") from None


def _is_workload(node: ast.FunctionDef) -> bool:
    """A top-level function that looks like a workload: decorated with ``workload`` or
    taking (batch, dtype, device)."""
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if (getattr(target, "id", None) or getattr(target, "attr", None)) == "workload":
            return True
    return [a.arg for a in node.args.args[:3]] == ["batch", "dtype", "device"]


def _functions(path: Path, all_public: bool = False) -> list[str]:
    """Top-level workload functions of a file (every public one with ``all_public``),
    from its syntax alone (the file is not run); [] if it cannot be parsed."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not n.name.startswith("_") and (all_public or _is_workload(n))]


def _check(out, shown: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    expected = "a workload returns (nn.Module, tuple of input tensors)"
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise WorkloadError(f"{shown} returned {type(out).__name__}"
                            + (f" of {len(out)}" if isinstance(out, (tuple, list)) else "") + f"; {expected}")
    module, inputs = out
    if not isinstance(module, torch.nn.Module):
        raise WorkloadError(f"{shown} returned a {type(module).__name__} as the model; {expected}")
    inputs = (inputs,) if isinstance(inputs, torch.Tensor) else inputs
    if not isinstance(inputs, (tuple, list)) or not all(isinstance(x, torch.Tensor) for x in inputs):
        kinds = ", ".join(type(x).__name__ for x in inputs) if isinstance(inputs, (tuple, list)) else \
            type(inputs).__name__
        raise WorkloadError(f"{shown} returned inputs of {kinds}; {expected}")
    return module, tuple(inputs)


def _family(name: str, shown: str, fn: Callable, source: dict, path: Path | None) -> Family:
    """The Family of a workload function (its signature and metadata checked)."""
    signature = inspect.signature(fn)
    try:
        signature.bind(1, torch.float32, "cpu")
    except TypeError:
        raise WorkloadError(f"{shown}: {fn.__name__}{signature} cannot be called as "
                            f"{fn.__name__}(batch, dtype, device)") from None
    meta = getattr(fn, ATTRIBUTE, Meta())
    seq = signature.parameters.get("seq")
    if seq is not None and not isinstance(seq.default, int):
        raise WorkloadError(f"{shown}: its seq parameter needs an integer default (the sequence length "
                            "used without --seq)")
    options = ("dtype", "device", "seq") if seq is not None else ("dtype", "device")

    def builder(match, batch: int, dtype: torch.dtype, device: str, seq: int | None = None):
        try:
            out = fn(batch, dtype, device, **({"seq": seq} if seq is not None else {}))
        except (Unavailable, torch.cuda.OutOfMemoryError):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug in the user's function is one line, not a run
            if "out of memory" in str(exc).lower():
                raise
            raise WorkloadError(f"{shown}: {fn.__name__}(batch={batch}, dtype={dtype}, device={device!r}) raised "
                                f"{_one_line(exc, path)}") from None
        return _check(out, f"{shown}: {fn.__name__}")

    doc = (inspect.getdoc(fn) or "").strip().splitlines()
    cost = None
    if meta.cost is not None:
        by_size = {d.itemsize: d for d in DTYPES.values()}
        cost = lambda match, batch, element_bytes: meta.cost(batch, by_size[element_bytes])  # noqa: E731
    return Family(None, name, meta.batch, builder, meta.description or (doc[0] if doc else source["function"]),
                         meta.compile_targets, cost, seq.default if seq is not None else None, options, source)


def _file_source(path: Path) -> dict:
    path = path.resolve()
    return {"kind": "file", "file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def load(name: str) -> Family:
    """The Family of a workload reference ``path/to/file.py:fn`` or ``package.module:fn``.

    Imports the file or module (once per version of a file). The family builds
    with ``fn(batch, dtype, device[, seq])`` and checks what it returns.

    Raises:
        WorkloadError: no such file or module, an import error, no function ``fn``,
            or one that cannot be called as ``fn(batch, dtype, device)``.
    """
    ref, _, fn_name = name.rpartition(":")
    if not ref or not fn_name.isidentifier():
        raise WorkloadError(f"{name}: a workload is named path/to/file.py:function or package.module:function")
    is_file = ref.endswith(".py") or "/" in ref or os.sep in ref
    if is_file:
        path = Path(ref).resolve()
        module = _import_file(ref, path)
        source = {**_file_source(path), "function": fn_name}
    else:
        if not all(part.isidentifier() for part in ref.split(".")):
            raise WorkloadError(f"{name}: {ref!r} is neither a .py file nor a package.module name")
        module = _import_module(ref, ref)
        path = Path(module.__file__).resolve() if getattr(module, "__file__", None) else None
        source = {"kind": "module", "module": ref, "function": fn_name, **({"file": str(path)} if path else {})}
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        defined = [n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_")
                   and v.__module__ == module.__name__]
        what = "no function" if fn is None else f"{type(fn).__name__}, not a function:"
        raise WorkloadError(f"{ref}: {what} {fn_name!r} (functions there: {', '.join(defined) or 'none'})")
    return _family(name, ref, fn, source, path)


def find(name: str) -> Family | None:
    """The workload function ``name`` of a file in :func:`folder`, or None when no file defines it.

    Files are searched by their syntax (not run); only the file that defines
    ``name`` is imported.

    Raises:
        WorkloadError: several files define ``name``, or the defining file fails (see :func:`load`).
    """
    if not name.isidentifier() or not folder().is_dir():
        return None
    files = [p for p in sorted(folder().glob("*.py")) if name in _functions(p, all_public=True)]
    if len(files) > 1:
        raise WorkloadError(f"{name}: defined in {' and '.join(map(str, files))}; name one, e.g. {files[0]}:{name}")
    if not files:
        return None
    family = load(f"{files[0]}:{name}")
    return replace(family, source={**family.source, "found_in": str(folder())})


def discover() -> list[dict]:
    """The workload functions of the files in :func:`folder`, for ``tracekit models``.

    Returns one dict per function: name, batch, seq, description, source (as
    run.json records it); or, for a file that cannot be imported, name and
    ``problem``.
    """
    rows = []
    for path in sorted(folder().glob("*.py")) if folder().is_dir() else []:
        for fn in _functions(path):
            try:
                f = load(f"{path}:{fn}")
            except WorkloadError as exc:
                rows.append({"name": fn, "problem": str(exc), "source": {"kind": "file", "file": str(path)}})
                continue
            rows.append({"name": fn, "batch": f.default_batch, "seq": f.default_seq, "description": f.description,
                         "source": {**f.source, "found_in": str(folder())}})
    return rows

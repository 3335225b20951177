"""Find runs under a path: trace files, each with the ``run.json`` beside it if any."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tracekit.errors import ExitCode
from tracekit.trace.file_kinds import unreadable_file
from tracekit.trace.reader import TraceError, is_trace_file, trace_files

MANIFEST = "run.json"


@dataclass
class Run:
    """One run: its trace files (none for a run that failed) and its manifest.

    ``manifest`` is the parsed ``run.json`` written by the runner, or None for
    a bare trace file (one taken by another script) or an unreadable run.json
    (then ``problem`` says why).
    """

    name: str
    traces: list[Path]
    manifest: dict | None
    problem: str | None = None


def _read_manifest(path: Path) -> tuple[dict | None, str | None]:
    if (problem := unreadable_file(path)) is not None:   # a FIFO is never opened: it would block
        return None, f"unreadable run manifest ({problem})"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return None, f"unreadable run manifest ({exc})"
    if not isinstance(manifest, dict):
        return None, "run manifest is not a JSON object"
    return manifest, None


def _files(path: Path, unreadable: list | None) -> list[Path]:
    """Every file under ``path``, sorted; folders that cannot be listed go to ``unreadable``."""
    def skip(err: OSError) -> None:
        if unreadable is not None:
            unreadable.append((err.filename, f"unreadable folder ({err.strerror.lower() if err.strerror else err})"))

    return sorted(Path(d) / f for d, _, files in os.walk(path, onerror=skip) for f in files)


def existing(path: Path | str) -> Path:
    """``path`` as a Path, where it exists (following links).

    Raises:
        TraceError: it does not ("no such file or folder"), or is a link that cannot be followed
            (broken, looping: :func:`tracekit.trace.file_kinds.unreadable_file` says which); code NOT_FOUND.
    """
    path = Path(path)
    if not path.exists():
        problem = unreadable_file(path)
        raise TraceError(path, "no such file or folder" if problem == "no such file" else problem, ExitCode.NOT_FOUND)
    return path


def discover(path: Path | str, unreadable: list | None = None) -> list[Run]:
    """List the runs under ``path`` (a trace file, or a folder searched recursively).

    A folder with a ``run.json`` is one run holding every trace file in it; any
    other trace file is a run of its own, named by its path. Runs come sorted
    by name. Subfolders that cannot be listed (permission denied) are appended to
    ``unreadable`` as (path, problem) when it is given. A name of a trace file that is no
    regular file (a broken link, a FIFO) is a run all the same: its reader says what it is
    (:func:`tracekit.trace.file_kinds.unreadable_file`); folders named like trace files are searched.

    Raises:
        TraceError: ``path`` does not exist, or is a link that cannot be followed (code NOT_FOUND).
    """
    path = existing(path)
    if not path.is_dir():   # a file, or a FIFO or device given by name: its reader says which
        return [Run(name=path.name, traces=[path], manifest=None)]
    files = _files(path, unreadable)
    runs = []
    for manifest_path in (p for p in files if p.name == MANIFEST):
        folder = manifest_path.parent
        traces = trace_files(folder)
        manifest, problem = _read_manifest(manifest_path)
        runs.append(Run(name=str(folder.relative_to(path)) if folder != path else folder.name,
                        traces=traces, manifest=manifest, problem=problem))
    owned = {p for r in runs for p in r.traces}
    for p in files:
        if is_trace_file(p) and p not in owned:
            runs.append(Run(name=str(p.relative_to(path)), traces=[p], manifest=None))
    return sorted(runs, key=lambda r: r.name)

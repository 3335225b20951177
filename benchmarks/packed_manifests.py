"""A suite's per-cell ``run.json`` manifests packed into one file, and back.

A committed suite folder (``reports/<machine>/<suite>/``) keeps its cells' manifests in
``manifests.jsonl.gz``: gzipped JSON Lines, one line per cell,
``{"cell": "<workload>/<mode>", "manifest": {...}}``, sorted by cell, where ``manifest`` is the
cell's ``run.json`` as ``tracekit`` wrote it, less its ``attribution`` section (module scopes,
Inductor's provenance, each CUDA graph's launches: what an analysis reads beside the cell's trace,
which is not kept; it was 85% of a decode cell's manifest), and ``cell`` its folder under the
suite's traces (``traces/<cell>/run.json``). Gzip at level 9 with no timestamp, so the same cells give the same
bytes. Only the example cells keep a folder under ``traces/``: their trace with its ``run.json``.

Usage (standard library only: it runs on the lent machine before tracekit is on the path):

    python benchmarks/packed_manifests.py unpack PACKED DIR             # DIR/<cell>/run.json, each cell
    python benchmarks/packed_manifests.py add [--finished] PACKED DIR   # DIR/**/run.json into PACKED
    python benchmarks/packed_manifests.py show PACKED CELL              # one cell's run.json

``unpack`` is how ``benchmarks/lease_call.sh`` resumes a suite (``tracekit bench`` skips a cell
whose ``run.json`` holds a final status); ``add --finished`` is how ``benchmarks/lease_unpack.sh``
records the cells a call brought back (a cell already there is replaced). Without the script:
``zcat PACKED | grep '"cell": "CELL"'``, or ``pandas.read_json(PACKED, lines=True)``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

# A cell is finished when its run.json holds one of tracekit.bench.plan.FINAL: a cell "skipped",
# still "running" or "interrupted" is not done (and must not replace a finished one).
NOT_FINISHED = ("skipped", "running", "interrupted")


def read(packed: Path) -> dict[str, dict]:
    """cell name -> its manifest (the parsed run.json) from ``packed``; {} when the file is absent.

    Raises:
        OSError, EOFError, json.JSONDecodeError: the file is not gzipped JSON Lines.
    """
    if not packed.exists():
        return {}
    with gzip.open(packed, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {row["cell"]: row["manifest"] for row in rows}


def write(packed: Path, cells: dict[str, dict]) -> None:
    """Write ``cells`` (cell name -> manifest) to ``packed``, sorted by cell, reproducibly."""
    lines = "".join(json.dumps({"cell": c, "manifest": cells[c]}, ensure_ascii=False) + "\n" for c in sorted(cells))
    packed.parent.mkdir(parents=True, exist_ok=True)
    packed.write_bytes(gzip.compress(lines.encode("utf-8"), compresslevel=9, mtime=0))


def add(packed: Path, runs: Path, finished: bool = False) -> int:
    """Put every ``runs/<cell>/run.json`` into ``packed`` (replacing a cell already there), without
    its ``attribution``.

    ``finished``: leave out a cell whose status is in ``NOT_FINISHED``. Returns the number of
    cells added or replaced.
    """
    cells = read(packed)
    added = 0
    for path in sorted(runs.rglob("run.json")) if runs.is_dir() else []:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if finished and manifest.get("status") in NOT_FINISHED:
            continue
        manifest.pop("attribution", None)   # read with the trace only (module docstring)
        cells[path.parent.relative_to(runs).as_posix()] = manifest
        added += 1
    if added:
        write(packed, cells)
    return added


def unpack(packed: Path, runs: Path) -> int:
    """Write each cell of ``packed`` to ``runs/<cell>/run.json`` (as tracekit writes it); the count."""
    cells = read(packed)
    for cell, manifest in cells.items():
        folder = runs / cell
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "run.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n",
                                         encoding="utf-8")
    return len(cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("unpack", help="PACKED's cells to DIR/<cell>/run.json")
    p.add_argument("packed", type=Path)
    p.add_argument("runs", type=Path, metavar="DIR")
    p = sub.add_parser("add", help="DIR/<cell>/run.json into PACKED, replacing a cell already there")
    p.add_argument("--finished", action="store_true", help="only cells with a final status")
    p.add_argument("packed", type=Path)
    p.add_argument("runs", type=Path, metavar="DIR")
    p = sub.add_parser("show", help="one cell's run.json")
    p.add_argument("packed", type=Path)
    p.add_argument("cell")
    args = parser.parse_args(argv)
    try:
        if args.command == "unpack":
            print(f"{unpack(args.packed, args.runs)} cells unpacked from {args.packed}")
        elif args.command == "add":
            n = add(args.packed, args.runs, args.finished)
            done = sum(m.get("status") not in NOT_FINISHED for m in read(args.packed).values())
            print(f"{done} cells done ({n} added or replaced in {args.packed})")
        else:
            cells = read(args.packed)
            if args.cell not in cells:
                print(f"error: {args.packed}: no cell {args.cell!r}", file=sys.stderr)
                return 2
            print(json.dumps(cells[args.cell], indent=1, ensure_ascii=False))
    except (OSError, EOFError, ValueError, KeyError) as exc:
        print(f"error: {args.packed}: not a packed manifests file ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

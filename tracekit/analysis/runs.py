"""Analyze every run under a path: one metrics row per trace file, plus failed runs.

This is the library call behind ``tracekit analyze``; it needs no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tracekit.analysis.summary import per_iteration, summarize
from tracekit.trace import NotATrace, Run, TraceError, discover, load

# Manifest fields copied into each row, with units in the names.
_LATENCY_FIELDS = ("median", "mean", "p10", "p90", "std", "min")


@dataclass
class Analysis:
    """What ``analyze`` found.

    runs:       one row per trace file (or per failed run without a trace):
                identity (run, trace, model, mode, batch, dtype, device_type,
                device_name, status, reason, note), the manifest's timings
                (latency_*_ms, compile_s, peak_memory_MB, max_abs_diff) and the
                trace metrics of :func:`tracekit.analysis.summary.summarize`.
    iterations: per-iteration rows (run, step, ...) for traces with markers.
    errors:     (path, problem) for each file that could not be read.
    skipped:    (path, why) for JSON files found in a folder that are not
                traces (a summary.json, an ONNX Runtime profile).
    """

    runs: pd.DataFrame
    iterations: pd.DataFrame
    errors: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict:
        """All tables as lists of records (JSON-ready after :func:`tracekit.io.jsonable`)."""
        return {"runs": self.runs.to_dict("records"), "iterations": self.iterations.to_dict("records"),
                "errors": [{"path": p, "problem": e} for p, e in self.errors],
                "skipped": [{"path": p, "why": w} for p, w in self.skipped]}


def _manifest_fields(manifest: dict | None) -> dict:
    if not manifest:
        return {"status": "trace only", "reason": ""}
    spec = manifest.get("spec", {})
    env = manifest.get("environment", {})
    lat = manifest.get("latency_ms") or {}
    row = {
        "model": manifest.get("model"), "mode": manifest.get("mode"), "batch": spec.get("batch"),
        "dtype": spec.get("dtype"), "device_type": manifest.get("device_type"),
        "device_name": env.get("device_name"), "status": manifest.get("status", "unknown"),
        "reason": manifest.get("reason", ""), "note": manifest.get("note", ""),
        "compile_s": manifest.get("compile_s", math.nan),
        "peak_memory_MB": manifest.get("peak_memory_MB", math.nan),
        "max_abs_diff": manifest.get("max_abs_diff", math.nan),
        "latency_timer": lat.get("timer"),
    }
    row.update({f"latency_{k}_ms": lat.get(k, math.nan) for k in _LATENCY_FIELDS})
    return row


def _analyze_run(run: Run, root: Path, result: Analysis, scanned: bool) -> None:
    base = {"run": run.name, **_manifest_fields(run.manifest)}
    if not run.traces:
        result.runs.append({**base, "trace": ""})
        return
    profile_iters = (run.manifest or {}).get("profile", {}).get("iterations")
    for path in run.traces:
        try:
            tables = load(path)
        except NotATrace as exc:
            # Found by scanning a folder, a JSON that is no trace is passed over, not an error.
            (result.skipped if scanned and run.manifest is None else result.errors).append((str(path), exc.problem))
            continue
        except TraceError as exc:
            result.errors.append((str(path), exc.problem))
            continue
        metrics = summarize(tables, iterations=profile_iters)
        note = "; ".join(n for n in (base.get("note"), metrics.pop("note")) if n)
        rel = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        if base.get("device_type") is None:
            base = {**base, "device_type": "cuda" if tables.has_gpu else "cpu",
                    "device_name": tables.devices["name"].iloc[0] if len(tables.devices) else None}
        result.runs.append({**base, "trace": rel, **metrics, "note": note})
        it = per_iteration(tables)
        if len(it):
            result.iterations.append(it.assign(run=run.name, trace=rel))


def _ordered(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs of one workload together, eager (the usual baseline) first, then by name."""
    if runs.empty or "model" not in runs:
        return runs
    workload = runs["run"].str.rsplit("/", n=1).str[0]
    key = pd.DataFrame({"w": workload, "e": runs["mode"] != "eager", "r": runs["run"]})
    return runs.loc[key.sort_values(["w", "e", "r"]).index].reset_index(drop=True)


def analyze(path: Path | str, only: set[str] | None = None) -> Analysis:
    """Analyze a trace file or every run under a folder (recursively).

    Args:
        path: a trace file or a folder.
        only: if given, analyze just the runs with these names (folder paths
            relative to ``path``, e.g. ``"vit16x6x384/eager"``).

    Returns:
        An :class:`Analysis`; unreadable files are listed in ``errors`` and do
        not stop the others.

    Raises:
        TraceError: ``path`` does not exist.
    """
    root = Path(path)
    runs = [r for r in discover(root) if only is None or r.name in only]
    scanned = root.is_dir()
    # Collect rows in lists first, then turn them into tables.
    result = Analysis(runs=[], iterations=[])
    for run in runs:
        _analyze_run(run, root if scanned else root.parent, result, scanned)
    result.runs = _ordered(pd.DataFrame(result.runs))
    result.iterations = pd.concat(result.iterations, ignore_index=True) if result.iterations else pd.DataFrame()
    return result

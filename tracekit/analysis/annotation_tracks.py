"""What ``tracekit analyze --annotate`` draws on a trace's own timeline, as tables of slices.

Each function turns a table tracekit computes into tracks (track name -> one row per slice:
``name``, ``start_us``, ``end_us`` and the slice's args);
:func:`tracekit.trace.annotate.write` writes them into a copy of the trace, beside it,
which Perfetto, TensorBoard and HolisticTraceAnalysis open as they open the original.

* ``critical path`` (:func:`critical_path_tracks`): the critical path of each iteration
  (:func:`tracekit.analysis.critical_path.analyze`, as traced: not calibrated, so each
  segment lies over the events it stands for), one slice per segment named by its part
  (cpu, launch, launch_latency, gpu_gap, kernel, transfer, comm, sync, stream_wait,
  rank_wait, untracked: :mod:`tracekit.analysis.critical_path.path`), args the iteration's
  ``step``, the ``event`` (host call or GPU op) of the segment and a kernel's ``class``. An
  iteration's slices run back to back from the previous iteration's finish to its own: they
  add up to its latency. Iterations whose windows overlap (an annotation nested in itself)
  go on a further track, ``critical path (2)``...; ``critical path: iterations`` has one
  slice per iteration with its ``latency_us`` and the time of each part (``<part>_us``).
* ``GPU idle (device D)`` (:func:`idle_tracks`): each idle gap of the device
  (:func:`tracekit.analysis.metrics.idle.gaps`), named by its cause (host_wait, launch_latency,
  sync, other), args ``gap_us``, ``iteration`` and ``next_correlation`` (the op after it).
* ``modules (device D, stream S)`` (:func:`module_tracks`): the module of each GPU op of
  the stream (:func:`tracekit.analysis.attribution.gpu_ops.attribute`): a slice per run of
  consecutive ops of one module, nested by module path (``blocks`` > ``blocks.0`` >
  ``blocks.0.mlp``; ``(model)`` for the model's own ops), the ops' aten op as the innermost
  slice (args ``module``, ``op``, ``gpu_ops``, ``rule``). A track under the stream rather than
  an arg on each GPU op: Perfetto shows a slice's args only once it is selected, while a
  track shows which module ran across a whole iteration at a glance and sums the time per
  module over a selection; and the trace's own events stay byte for byte as they were.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.analysis import critical_path
from tracekit.analysis.attribution.gpu_ops import attribute
from tracekit.analysis.critical_path.path import PARTS
from tracekit.analysis.metrics import idle
from tracekit.manifest import Attribution, Manifest
from tracekit.trace import TraceError, discover, load
from tracekit.trace.annotate import annotated_path, write
from tracekit.trace.reader import ANNOTATED, EventTables

MODEL = "(model)"   # the name of the module path "" (the model itself) on a module track
COLUMNS = ["trace", "annotated", "tracks", "notes", "failed"]
# The notes of a trace (reasons, worded by tracekit.report.annotation_text): an annotated copy itself; a trace
# without GPU ops; one that cannot be read (its ``problem``); a ``track`` that could not be made (``why``: a
# critical path's reason, an error's message or repr); a limit of the critical path (``note``: its reason); a
# trace tracekit failed on (``error``: the exception's type and message; a bug).
ANNOTATED_COPY, NOTHING, UNREADABLE, NO_TRACK, PATH_NOTE, FAILED = ("annotated copy", "nothing to annotate",
                                                                    "unreadable", "no track", "critical path",
                                                                    "internal error")


def critical_path_tracks(cp: critical_path.CriticalPath) -> dict[str, pd.DataFrame]:
    """The ``critical path`` tracks (module docstring) of ``cp``'s segments and iterations."""
    segs = cp.segments
    if segs.empty:
        return {}
    window = segs.groupby(["rank", "step"], sort=False).agg(lo=("start_us", "min"), hi=("end_us", "max"))
    window = window.reset_index().sort_values(["lo", "hi"], kind="stable")
    lane, ends = {}, []
    for rank, step, lo, hi in window.itertuples(index=False):   # the first track free at the window's start
        k = next((i for i, e in enumerate(ends) if e <= lo), len(ends))
        ends[k:k + 1] = [hi]
        lane[(rank, step)] = k
    on = np.array([lane[k] for k in zip(segs["rank"].tolist(), segs["step"].tolist())])
    slices = pd.DataFrame({"name": segs["part"], "start_us": segs["start_us"], "end_us": segs["end_us"],
                           "step": segs["step"], "event": segs["name"].astype(str), "class": segs["class"]})
    out = {("critical path" if k == 0 else f"critical path ({k + 1})"): slices[on == k] for k in range(len(ends))}
    its = window.merge(cp.split, on=["rank", "step"], how="left").sort_values(["rank", "step"])
    out["critical path: iterations"] = pd.DataFrame({
        "name": "iteration " + its["step"].astype(str), "start_us": its["lo"], "end_us": its["hi"],
        "step": its["step"], "latency_us": its["latency_us"],
        **{f"{p}_us": its[f"{p}_us"] for p in PARTS}})
    return out


def idle_tracks(gaps: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The ``GPU idle (device D)`` tracks of :func:`tracekit.analysis.metrics.idle.gaps`' table (device gaps)."""
    return {f"GPU idle (device {d})": pd.DataFrame({
        "name": g["cause"], "start_us": g["start"], "end_us": g["end"], "gap_us": g["gap_us"],
        "iteration": g["iteration"], "next_correlation": g["next_correlation"]})
        for d, g in gaps.groupby("device", sort=True)}


def _levels(module: str) -> list[str]:
    """The module paths a GPU op's slices are named by, outermost first."""
    if module == "":
        return [MODEL]
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _runs(key: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of equal consecutive ``key`` (ops in time order): first index, op count and the
    latest end (µs) of each."""
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    return first, np.diff(np.r_[first, len(key)]), np.maximum.reduceat(end, first)


def module_tracks(att: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The ``modules (device D, stream S)`` tracks of the table of
    :func:`tracekit.analysis.attribution.gpu_ops.attribute`."""
    out = {}
    for (device, stream), ops in att.sort_values("ts", kind="stable").groupby(["device", "stream"], sort=True):
        ts, dur = ops["ts"].to_numpy(float), ops["dur"].to_numpy(float)
        end = ts + dur
        code, modules = pd.factorize(ops["module"].astype(str))
        levels = [_levels(m) for m in modules]
        parts = []
        for d in range(max(map(len, levels))):   # the module paths of depth d + 1 (None: a shorter path)
            names = np.array([lv[d] if d < len(lv) else None for lv in levels], dtype=object)[code]
            key = pd.factorize(names)[0]
            first, n, hi = _runs(key, end)
            keep = key[first] >= 0
            parts.append(pd.DataFrame({"name": names[first], "start_us": ts[first], "end_us": hi,
                                       "module": names[first], "op": None, "gpu_ops": n, "rule": None})[keep])
        module, op = modules.to_numpy(object)[code], ops["op"].astype(str).to_numpy(object)
        first, n, hi = _runs(pd.factorize(module + "\0" + op)[0], end)
        parts.append(pd.DataFrame({"name": np.where(op[first] == "", "(no op)", op[first]), "start_us": ts[first],
                                   "end_us": hi, "module": module[first], "op": op[first], "gpu_ops": n,
                                   "rule": ops["rule"].astype(str).to_numpy(object)[first]}))
        out[f"modules (device {device}, stream {stream})"] = pd.concat(parts, ignore_index=True)
    return out


def tracks(tables: EventTables, record: Attribution | None = None) -> tuple[dict[str, pd.DataFrame], list[dict]]:
    """Every track of one trace (module docstring), and notes: a reason per track that could
    not be made (``NO_TRACK``) and per limit of the critical path (``PATH_NOTE``: markers or edges
    the trace lacks, :mod:`~tracekit.analysis.critical_path.reasons`).

    Args:
        tables: the trace's event tables.
        record: run.json's ``attribution`` record (module scopes...), or None.
    """
    made, notes = {}, []

    def path() -> dict:
        cp = critical_path.analyze(tables)
        notes.extend({"code": PATH_NOTE, "note": p} for p in [*cp.missing, *cp.problems])
        return critical_path_tracks(cp)

    for what, make in (("critical path", path), ("GPU idle", lambda: idle_tracks(idle.gaps(tables))),
                       ("modules", lambda: module_tracks(attribute(tables, record)))):
        try:
            made.update(make())
        except Exception as exc:  # noqa: BLE001 - a track that cannot be made is a note; the others stand
            why = critical_path.cannot_reason(exc) if isinstance(exc, ValueError) else repr(exc)
            notes.append({"code": NO_TRACK, "track": what, "why": why})
    return made, notes


def annotate(path: Path | str, out: Path | str | None = None) -> pd.DataFrame:
    """Write the annotated copy of every trace under ``path`` (:mod:`tracekit.trace.annotate`).

    Args:
        path: a trace file or a folder (searched as ``tracekit analyze`` searches it:
            :func:`tracekit.trace.discover`, which skips annotated copies).
        out: where the copies go, in the folders the traces have under ``path``
            (default: beside each trace).

    Returns:
        One row per trace: trace (Path), annotated (the copy's Path, None where none was
        written: an unreadable trace, nothing to add), tracks (the names of the tracks
        written), notes (reasons: tracks left out and why, see ``NOTHING``...; :func:`tracekit.annotate`
        gives them in words), failed (True where tracekit failed on the trace, a bug: its note is
        ``FAILED``; the others are written).

    Raises:
        TraceError: ``path`` does not exist.
    """
    path = Path(path)
    rows = []
    for run in discover(path):
        record = Manifest.from_dict(run.manifest).attribution if run.manifest else None
        for trace in run.traces:
            where = None if out is None else Path(out) / (trace.parent.relative_to(path) if path.is_dir() else "")
            rows.append(_annotate_one(trace, record, where))
    return pd.DataFrame(rows, columns=COLUMNS)


def _annotate_one(trace: Path, record: Attribution | None, out: Path | None) -> list:
    if trace.name.endswith((ANNOTATED, ANNOTATED + ".gz")):
        return [trace, None, [], [{"code": ANNOTATED_COPY}], False]
    try:
        tables = load(trace)
        if not tables.has_gpu:
            return [trace, None, [], [{"code": NOTHING}], False]
        made, notes = tracks(tables, record)
        kept = [name for name, slices in made.items() if len(slices)]
        return [trace, write(trace, made, annotated_path(trace, out)) if kept else None, kept, notes, False]
    except TraceError as exc:
        return [trace, None, [], [{"code": UNREADABLE, "problem": exc.problem}], False]
    except Exception as exc:  # noqa: BLE001 - a bug on one trace loses that trace's copy only
        return [trace, None, [], [{"code": FAILED, "error": f"{type(exc).__name__}: {exc}"}], True]

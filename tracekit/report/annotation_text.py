"""The words of ``tracekit analyze --annotate``'s notes (:mod:`tracekit.analysis.annotation_tracks`):
why a trace has no annotated copy or lacks a track, and the critical path's limits
(:mod:`tracekit.report.path_text`). :func:`tracekit.annotate` returns them in words."""

from __future__ import annotations

import pandas as pd

from tracekit.analysis.annotation_tracks import ANNOTATED_COPY, FAILED, NO_TRACK, NOTHING, PATH_NOTE, UNREADABLE
from tracekit.report.path_text import path_note

# Each reason's words, by its code.
TEXTS = {
    ANNOTATED_COPY: lambda r: "already an annotated copy",
    NOTHING: lambda r: "no GPU ops in the trace: nothing to annotate",
    UNREADABLE: lambda r: r["problem"],
    NO_TRACK: lambda r: f"no {r['track']} track: {path_note(r['why'])}",
    PATH_NOTE: lambda r: f"critical path: {path_note(r['note'])}",
    FAILED: lambda r: f"internal error: {r['error']}",
}


def annotation_note(reason: dict) -> str:
    """One note of an annotated trace in words."""
    return TEXTS[reason["code"]](reason)


def worded_annotations(rows: pd.DataFrame) -> pd.DataFrame:
    """:func:`tracekit.analysis.annotation_tracks.annotate`'s rows with their notes in words."""
    return rows.assign(notes=[[annotation_note(n) for n in notes] for notes in rows["notes"]])

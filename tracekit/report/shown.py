"""What the Python API returns: the analysis' records as classes that show themselves.

:func:`tracekit.analyze` and :func:`tracekit.profile` return a :class:`ShownResult`,
:func:`tracekit.whatif` a :class:`ShownPrediction`: the records of
:mod:`tracekit.analysis` (:class:`~tracekit.analysis.result.Result`,
:class:`~tracekit.analysis.critical_path.prediction.Prediction`), every field and method
theirs, with ``print()`` (and the repr) giving a short text and a notebook a table; a
result's tables hold the texts the reports show (:func:`tracekit.report.worded.worded`:
the comparison's finding and warning...). The records themselves write no sentence; the
report formats take either. :func:`tracekit.diff` returns its diffs worded the same way.
"""

from __future__ import annotations

from dataclasses import fields

import pandas as pd

from tracekit.analysis.critical_path.prediction import Prediction
from tracekit.analysis.result import Result
from tracekit.report.column_specs import SPEEDUP
from tracekit.report.draw import headline
from tracekit.report.formats.whatif import prediction_text
from tracekit.report.views import answers, comparison_view
from tracekit.report.worded import WordedPrediction, WordedResult, worded


class ShownResult(WordedResult):
    """A :class:`~tracekit.analysis.result.Result` with its texts (:func:`tracekit.report.worded.worded`),
    whose repr is a few lines (what was analyzed, the answer for each workload:
    :func:`tracekit.report.views.answers`, unreadable files, the tables by name) and which a
    notebook shows as its speedup table."""

    def __repr__(self) -> str:
        lines = [f"tracekit.Result: {len(self.runs)} run(s) under {self.root}, compared with {self.baseline}"]
        for first, why in answers(self.comparison, self.runs, self.baseline):
            lines += [f"  {first}"] + ([f"    {why}"] if why else [])
        if self.errors:
            lines.append(f"  {len(self.errors)} unreadable file(s) in .errors")
        shape = lambda df: f"{len(df)}x{len(df.columns)}"  # noqa: E731
        frames = [f".{name} {shape(self[name])}" for name in self.FRAMES if name in ("runs", "comparison", "overhead")
                  or len(self[name])]
        lines.append("  " + ", ".join(frames) + "; .tables: " + ", ".join(n for n, t in self.tables.items() if len(t)))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        headers, rows = headline(comparison_view(self.comparison), SPEEDUP)
        table = pd.DataFrame(rows, columns=headers).to_html(index=False) if rows else "<p>no runs</p>"
        return (f"<p>tracekit: {len(self.runs)} run(s) under {self.root}, compared with "
                f"<code>{self.baseline}</code></p>{table}")


class ShownPrediction(WordedPrediction):
    """A :class:`~tracekit.analysis.critical_path.prediction.Prediction` with its notes in words
    (:func:`tracekit.report.worded.worded`), whose repr is what ``tracekit whatif`` prints
    (:func:`tracekit.report.formats.whatif.prediction_text`)."""

    def __repr__(self) -> str:
        return prediction_text(self)


def shown(record: Result | Prediction) -> ShownResult | ShownPrediction:
    """``record`` as the class above that shows it, worded (:func:`tracekit.report.worded.worded`: a
    result's new tables with their texts, a prediction's notes in words, its other fields the same
    objects, not copies)."""
    cls = ShownResult if isinstance(record, Result) else ShownPrediction
    record = worded(record)
    return cls(**{f.name: getattr(record, f.name) for f in fields(record)})

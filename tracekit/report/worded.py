"""The texts a reader sees in the tables, added in one place: :func:`worded`.

The analysis gives figures, categories and short reasons (:mod:`tracekit.analysis`); a record's
tables get here the columns that say them in words, where every report format
(:class:`tracekit.report.base.Report` words its data), ``runs.csv``, ``comparison.csv``,
``runs.json`` and the Python API (:func:`tracekit.report.shown.shown`) show them:

* a :class:`~tracekit.analysis.result.Result`'s runs: ``integrity_detail`` after ``integrity``,
  ``evidence`` in place of ``verdict_reason``, ``note`` with the trace's notes, ``timing_warning``
  in place of ``host_cpus_end`` (:mod:`tracekit.report.run_lines`), ``critical_path_note``
  (:mod:`tracekit.report.path_text`); its comparison:
  ``timing_warning`` (the run's), ``timer_verdicts`` in place of the timers' verdicts, ``finding``
  and ``warning`` in place of the figures only they read, ``top_modules``
  (:mod:`tracekit.report.comparison_text`); its tables: the integrity checks' ``detail``, the
  verdict evidence's ``rule``, launch_vs_fusion's ``finding``, the modules' ``ops``, the jobs'
  ``evidence``, ``no_straggler_because``, ``cp_note`` and ``finding`` and the ranks' ``evidence``
  (:mod:`tracekit.report.job_text`); its module diffs' lists and ``change``
  (:mod:`tracekit.report.module_text`);
* a :class:`~tracekit.analysis.attribution.run_diff.RunDiff`'s (and a ``DiffSet``'s) module diffs and
  its inputs' integrity checks' ``detail``;
* a :class:`~tracekit.analysis.comparison.suite_comparison.SuiteTables`' results and ranking:
  ``speedup_text``, ``timing_warning``, ``regression``; its claims as report.md shows them;
* a :class:`~tracekit.analysis.critical_path.prediction.Prediction`'s ``notes``, ``missing`` and
  ``cannot_predict`` (:mod:`tracekit.report.path_text`; its ``to_dict()``, ``tracekit whatif
  --json``, then holds them in words), and its integrity checks' ``detail``.

Each column stands where it stood when the analysis wrote it, so every file and frame is as before.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import pandas as pd

from tracekit.analysis.attribution.run_diff import DiffSet, RunDiff
from tracekit.analysis.comparison.suite_comparison import SuiteTables
from tracekit.analysis.critical_path.prediction import Prediction
from tracekit.analysis.result import Result
from tracekit.report import comparison_text as said
from tracekit.report.job_text import worded_jobs
from tracekit.report.module_text import module_ops_text, worded_diff
from tracekit.report.path_text import path_note, path_notes
from tracekit.report.run_lines import (EVIDENCE_RULES, evidence_text, integrity_detail, integrity_text, note,
                                       timing_warning)

# The comparison's figures that only its texts read (compare()'s warnings), left out where it is shown.
WARNING_FIGURES = ("baseline_status", "baseline_threads", "overhead", "baseline_overhead", "baseline_unreliable",
                   "baseline_runs")
VERDICTS = ("timer_verdict", "wall_verdict", "wall_speedup_low", "wall_speedup_high")
# What a claim's metric measures (tracekit.analysis.comparison.suite_comparison.CLAIM_METRICS).
CLAIM_MEASURES = {"speedup": "latency speedup over eager (median latencies)",
                  "kernels_vs_eager": "kernels executed per iteration, relative to eager",
                  "launches_vs_eager": "host launches per iteration, relative to eager"}


class WordedResult(Result):
    """A :class:`~tracekit.analysis.result.Result` whose tables hold their texts (:func:`worded`)."""


class WordedPrediction(Prediction):
    """A :class:`~tracekit.analysis.critical_path.prediction.Prediction` whose notes, missing and
    cannot_predict are words (:func:`worded`)."""


def worded(data):
    """``data`` with the texts of its tables (the module docstring); data of another kind, or
    worded already, as it is. The frames are new; the records they came from are left as they were."""
    if isinstance(data, Result) and not isinstance(data, WordedResult):
        return _result(data)
    if isinstance(data, RunDiff):
        return replace(data, modules=worded_diff(data.modules), ops=worded_diff(data.ops),
                       integrity=_checks(data.integrity))
    if isinstance(data, DiffSet):
        return replace(data, diffs=[worded(d) for d in data.diffs])
    if isinstance(data, SuiteTables) and "speedup_low_vs_eager" in data.results and "speedup_text" not in data.results:
        return _suite(data)
    if isinstance(data, Prediction) and not isinstance(data, WordedPrediction):
        return _prediction(data)
    return data


def _prediction(p: Prediction) -> WordedPrediction:
    """``p`` with its notes, missing and cannot_predict in words (:mod:`tracekit.report.path_text`)
    and its integrity checks' ``detail``, its other fields the same objects."""
    return WordedPrediction(**{**{f.name: getattr(p, f.name) for f in fields(p)},
                               "notes": [path_note(n) for n in p.notes], "missing": [path_note(m) for m in p.missing],
                               "cannot_predict": path_note(p.cannot_predict) if p.cannot_predict else "",
                               "integrity": _checks(p.integrity)})


def _checks(checks: pd.DataFrame) -> pd.DataFrame:
    """Integrity checks (:func:`tracekit.analysis.metrics.integrity.checks`, of one trace or tagged with
    several) with their ``detail`` (:func:`tracekit.report.run_lines.integrity_text`) in place of
    ``total`` and ``what``; worded already, as they are."""
    if "what" not in checks:
        return checks
    return _in_place(checks, "total", "detail", [integrity_text(c) for c in checks.to_dict("records")],
                     drop=("total", "what"))


def _result(r: Result) -> WordedResult:
    """``r`` with the texts of its runs, comparison, tables and module diffs."""
    tables = dict(r.analysis.tables)
    checks = tables.get("integrity", pd.DataFrame(columns=["run", "trace", "check", "status", "count", "detail"]))
    if "what" in checks:
        checks = tables["integrity"] = _checks(checks)
    if "supports" in (evidence := tables.get("verdict_evidence", pd.DataFrame())):
        rules = [EVIDENCE_RULES[e] for e in evidence["evidence"]]
        tables["verdict_evidence"] = _in_place(evidence, "supports", "rule", rules, drop=())
    if len(control := tables.get("launch_vs_fusion", pd.DataFrame())):
        findings = [said.launch_removal(c) for c in control.to_dict("records")]
        tables["launch_vs_fusion"] = control.assign(finding=findings)
    if "ops" in (modules := tables.get("attribution_modules", pd.DataFrame())):
        tables["attribution_modules"] = modules.assign(ops=modules["ops"].map(module_ops_text))
    tables = worded_jobs(tables)
    runs = _runs(r.analysis.runs, checks)
    comparison = _comparison(r.comparison, runs, r.cpu_op_changes, r.modules)
    result = replace(r, analysis=replace(r.analysis, runs=runs, tables=tables), comparison=comparison,
                     modules=worded_diff(r.modules))
    return WordedResult(**{f.name: getattr(result, f.name) for f in fields(result)})


def _in_place(df: pd.DataFrame, at: str, name: str, values, drop: tuple[str, ...]) -> pd.DataFrame:
    """``df`` with column ``name`` (``values``: a list, or a Series of df's index and its dtype) where
    ``at`` is (``at`` moving right), less ``drop``."""
    out = df.copy()
    out.insert(out.columns.get_loc(at), name, values if isinstance(values, pd.Series) else list(values))
    return out.drop(columns=list(drop))


def _runs(runs: pd.DataFrame, checks: pd.DataFrame) -> pd.DataFrame:
    """The run rows with their texts (:mod:`tracekit.report.run_lines`); ``checks``: every trace's
    integrity checks, worded."""
    if runs.empty:
        return runs
    by_trace = {key: g for key, g in checks.groupby(["run", "trace"], sort=False)}
    none = checks.iloc[:0]
    rows = runs.to_dict("records")
    out = runs.copy()
    if "integrity" in out:
        detail = [integrity_detail(by_trace.get((r["run"], r["trace"]), none)) if isinstance(r["integrity"], str)
                  else math.nan for r in rows]
        out.insert(out.columns.get_loc("integrity") + 1, "integrity_detail", detail)
        rows = out.to_dict("records")
    if "verdict_reason" in out:
        out = _in_place(out, "verdict_reason", "evidence", [evidence_text(r) if isinstance(r["verdict_reason"], str)
                                                            else math.nan for r in rows], drop=("verdict_reason",))
    if "note" in out:
        out["note"] = [note(r, by_trace.get((r["run"], r["trace"]), none)) for r in rows]
    if "critical_path_note" in out:
        out["critical_path_note"] = out["critical_path_note"].map(path_notes)
    if "host_cpus_end" in out:   # processes: set in every row from a run.json (the host's readings are there)
        out = _in_place(out, "host_cpus_end", "timing_warning", [timing_warning(r) if pd.notna(r.get("processes"))
                                                                 else math.nan for r in rows], drop=("host_cpus_end",))
    return out


def _comparison(comp: pd.DataFrame, runs: pd.DataFrame, changes: pd.DataFrame,
                modules: pd.DataFrame) -> pd.DataFrame:
    """The comparison with its texts (:mod:`tracekit.report.comparison_text`), less the figures
    only they read."""
    if "timer_verdict" not in comp:
        return comp
    first = runs.drop_duplicates("run").set_index("run")
    warned = first["timing_warning"] if "timing_warning" in first else pd.Series(dtype=object)
    out = comp.copy()
    out.insert(out.columns.get_loc("timer_gap"), "timing_warning", out["run"].map(warned).fillna(""))
    out = _in_place(out, "timer_verdict", "timer_verdicts", pd.Series([
        said.timer_verdicts(r["latency_timer"], r["timer_verdict"], r["speedup"], r["speedup_low"], r["speedup_high"],
                            r["wall_verdict"], r["wall_speedup"], r["wall_speedup_low"], r["wall_speedup_high"])
        for r in out.to_dict("records")], index=out.index, dtype=object), drop=VERDICTS)
    rows = out.to_dict("records")
    ops = {run: g for run, g in changes.groupby("run")} if len(changes) else {}
    finding = [said.finding(r) or said.cpu_ops_finding(ops.get(r["run"], changes.iloc[:0])) for r in rows]
    top = [said.top_modules(g) for g in (modules[modules["run"] == r["run"]] for r in rows)] if len(modules) else []
    if top:
        finding = [f + (f"; by module: {t}" if f and t else "") for f, t in zip(finding, top)]
    at = out.columns.get_loc("dominant_profiled") + 1
    out.insert(at, "finding", finding)
    out.insert(at + 1, "warning", [said.warning(r) for r in rows])
    out = out.drop(columns=list(WARNING_FIGURES))
    return out.assign(top_modules=top) if top else out


def _suite(t: SuiteTables) -> SuiteTables:
    """A suite's results and ranking with the speedup as shown and the timing's doubts, its claims
    as report.md shows them."""
    results = suite_results(t.results)
    ranked = t.ranked.assign(speedup_text=results["speedup_text"].reindex(t.ranked.index),
                             regression=t.ranked["regression"].map({True: "slower than eager", False: ""}))
    return replace(t, results=results, ranked=ranked, claims=claims_view(t.claims))


def suite_results(results: pd.DataFrame) -> pd.DataFrame:
    """A suite's results (:func:`tracekit.analysis.comparison.suite_comparison.comparison`) with
    speedup_text (the speedup as shown: :func:`tracekit.report.comparison_text.speedup_text`) and
    timing_warning (its timers' different verdicts against eager, then its busy host)."""
    rows = results.to_dict("records")
    return results.assign(
        speedup_text=[said.speedup_text(r["speedup_vs_eager"], r["speedup_low_vs_eager"], r["speedup_high_vs_eager"],
                                        r["speedup_inconclusive"], r["wall_speedup_vs_eager"]) for r in rows],
        timing_warning=["; ".join(text for text in (said.timer_verdicts(
            r["latency_timer"], r["timer_verdict"], r["speedup_vs_eager"], r["speedup_low_vs_eager"],
            r["speedup_high_vs_eager"], r["wall_verdict"], r["wall_speedup_vs_eager"], r["wall_speedup_low"],
            r["wall_speedup_high"]), timing_warning(r) if pd.notna(r.get("processes")) else "") if text)
            for r in rows])


def claims_view(claims: pd.DataFrame) -> pd.DataFrame:
    """A suite's claims checked (:func:`tracekit.analysis.comparison.suite_comparison.check_claims`) as
    report.md shows them: claim, measure (what its metric measures), claimed range, measured (each
    matching run's value), verdict."""
    if "metric" not in claims:
        return claims
    return pd.DataFrame({
        "claim": claims["claim"],
        "measure": [CLAIM_MEASURES.get(m) or f"unknown metric {m!r}" for m in claims["metric"]],
        "claimed range": [f"{low:g}–{high:g}" for low, high in zip(claims["low"], claims["high"])],
        "measured": [", ".join(f"{w} {c}: {v:.3g}" for w, c, v in m) or "-" for m in claims["measured"]],
        "verdict": claims["verdict"]})

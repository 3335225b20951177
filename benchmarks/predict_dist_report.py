"""Issue 38's check: each what-if of a job predicted from one measured run and checked against another.

Usage: python benchmarks/predict_dist_report.py TRACES_DIR OUT_DIR [--title TEXT]

TRACES_DIR holds the run folders of ``workloads/predict-dist.toml`` (``<label>/<mode>/run.json`` and a
trace per rank, as ``tracekit bench`` writes them). The pairs are found from the runs' specs, as the
suite's comment names them:

* ``balance-ranks``: from a straggler (``workloads/predict_dist.py:*_straggler``, rank 1 late by
  2 ms at each forward) to its balanced twin (the model's own name, same batch, parallel and ranks);
* ``cuda-graphs``: from ``eager`` to ``cudagraphs`` of the same workload (DDP and FSDP2);
* ``overlap-comm``: from ``ddp-no-overlap`` (``fsdp-no-overlap``) to ``ddp`` (``fsdp``), eager.

The prediction is ``tracekit.whatif(SOURCE_FOLDER, <what-if>=True)`` (the library call behind
``tracekit whatif``); nothing of the checked run goes into it. It is checked against the source
run's **twin** where the source timed one (``twin`` in run.json, :mod:`tracekit.capture.twins`: the
balanced model of a straggler, the overlapped program of a no-overlap run, timed in the same
processes alternating with the source, so on the same host), else against the checked run (another
process): the error is predicted over the twin's (the checked run's) measured step (``latency_ms``
median: the slowest rank of each timed step) less 1; the error against the checked run is beside it
(``run_error``) where both exist. The sign of the gain is right where the predicted and the measured
change from the source run agree (the predicted change: the prediction less the source run's
calibrated model, so that a calibration's residual is no change; the measured change from the
source's own calls in the twin's rounds where checked on the twin), or where the measured change is
inside the measured step's p10-p90 (no sign to get right).
Beside each pair, the two runs' host speeds: the median time of a ``cudaLaunchKernel`` call in each
run's traces (all ranks, µs), the checked run's over the source's (``host_ratio``): the same calls, so
a ratio away from 1 is the machine's host running at another speed, which no prediction from the
source can know.
Writes OUT_DIR/predictions.csv and OUT_DIR/predictions.md.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

import tracekit
from tracekit.analysis.critical_path.edits import Edit
from tracekit.analysis.critical_path.predict import measured_twin
from tracekit.manifest import Manifest
from tracekit.trace.reader import load, trace_files

TARGET = 0.15   # the issue's: within 15% of the measured run
TWINS = {"vit": "vit16x6x384", "gpt2": "hf:gpt2?layers=4"}   # workloads/predict_dist.py's VIT and GPT2


def _runs(traces: Path) -> list[tuple[Path, Manifest]]:
    return [(p.parent, m) for p in sorted(traces.glob("*/*/run.json")) if (m := Manifest.read(p.parent))]


def _key(m: Manifest, **change) -> tuple:
    s = m.spec
    fields = {"model": s.model, "mode": s.mode, "batch": s.batch, "parallel": s.parallel, "nproc": s.nproc} | change
    return tuple(fields[k] for k in ("model", "mode", "batch", "parallel", "nproc"))


def pairs(traces: Path) -> list[dict]:
    """(what_if, source folder, checked folder or None, the source's manifest) for every pair whose
    checked run is in TRACES_DIR or whose source timed the twin that checks it."""
    runs = _runs(traces)
    by_key = {_key(m): (folder, m) for folder, m in runs}
    out = []
    for folder, m in runs:
        s = m.spec
        targets = []
        if s.model.endswith("_straggler") and s.mode == "eager":
            twin = TWINS[s.model.rsplit(":", 1)[-1].split("_")[0]]
            targets.append(("balance_ranks", _key(m, model=twin)))
        if s.mode == "eager" and s.parallel in ("ddp", "fsdp") and ":" not in s.model.replace("hf:", ""):
            targets.append(("cuda_graphs", _key(m, mode="cudagraphs")))
        if s.parallel.endswith("-no-overlap") and s.mode == "eager":
            targets.append(("overlap_comm", _key(m, parallel=s.parallel.removesuffix("-no-overlap"))))
        out += [{"what_if": w, "source": folder, "checked": by_key[k][0] if k in by_key else None, "manifest": m}
                for w, k in targets if k in by_key or _twin(m, w)]
    return out


def _measured(folder: Path | None) -> dict:
    m = Manifest.read(folder) if folder is not None else None
    if m is None or m.status != "ok":
        return {"status": "missing" if m is None else m.status}
    return {"status": "ok", "median": m.latency("median"), "p10": m.latency("p10"), "p90": m.latency("p90"),
            "device": m.ran_on_name}


def launch_call_us(folder: Path) -> float:
    """The median duration (µs) of the ``cudaLaunchKernel`` calls in the run's rank traces; NaN without any."""
    calls = [t.host_calls for t in map(load, trace_files(folder))]
    durations = pd.concat([c.loc[c["name"] == "cudaLaunchKernel", "dur"] for c in calls]) if calls else pd.Series()
    return float(durations.median()) if len(durations) else math.nan


def _twin(m: Manifest, what_if: str) -> dict:
    """The source run's twin timing that checks ``what_if`` (empty where it has none), matched as
    ``tracekit whatif`` matches it (:func:`~tracekit.analysis.critical_path.predict.measured_twin`)."""
    if m.status != "ok" or measured_twin(m, [Edit(what_if.replace("_", "-"))], None) is None:
        return {}
    t = m.twin
    return {"twin_ms": t.latency_ms.median, "twin_p10_ms": t.latency_ms.p10, "twin_p90_ms": t.latency_ms.p90,
            "twin_source_ms": t.source_latency_ms.median, "twin": "; ".join(t.names or [])}


def rows(traces: Path) -> pd.DataFrame:
    out = []
    for p in pairs(traces):
        src, chk = _measured(p["source"]), _measured(p["checked"])
        twin = _twin(p["manifest"], p["what_if"])
        row = {"what_if": p["what_if"].replace("_", "-"), "source": str(p["source"].relative_to(traces)),
               "checked": str(p["checked"].relative_to(traces)) if p["checked"] else "-",
               "source_status": src["status"], "checked_status": chk["status"], "device": src.get("device")}
        if src["status"] != "ok" or (chk["status"] != "ok" and not twin):
            out.append(row)
            continue
        prediction = tracekit.whatif(p["source"], **{p["what_if"]: True})
        row.update(source_ms=src["median"], checked_ms=chk.get("median", math.nan),
                   checked_p10_ms=chk.get("p10", math.nan), checked_p90_ms=chk.get("p90", math.nan),
                   predicted_ms=prediction.predicted_latency_ms, modelled_ms=prediction.modelled_latency_ms,
                   calibrated=prediction.calibrated, host_scale=prediction.host_scale,
                   gpu_scale=prediction.gpu_scale,
                   notes="; ".join([str(w) for w in (prediction.cannot_predict, prediction.failure) if w]
                                   + prediction.notes + prediction.missing),
                   source_launch_us=launch_call_us(p["source"]),
                   checked_launch_us=launch_call_us(p["checked"]) if p["checked"] else math.nan, **twin)
        out.append(row)
    df = pd.DataFrame(out)
    if df.empty or "predicted_ms" not in df:
        return df
    if "twin_ms" not in df:
        df["twin_ms"] = df["twin_p10_ms"] = df["twin_p90_ms"] = df["twin_source_ms"] = math.nan
        df["twin"] = ""
    on_twin = df["twin_ms"].notna()
    df["checked_on"] = on_twin.map({True: "twin", False: "run"})
    # the measured step the prediction is held to, and the source's step it changes from (the twin's
    # own source calls: the same host)
    df["measured_ms"] = df["twin_ms"].where(on_twin, df["checked_ms"])
    df["measured_p10_ms"] = df["twin_p10_ms"].where(on_twin, df["checked_p10_ms"])
    df["measured_p90_ms"] = df["twin_p90_ms"].where(on_twin, df["checked_p90_ms"])
    before = df["twin_source_ms"].where(on_twin, df["source_ms"])
    df["error"] = df["predicted_ms"] / df["measured_ms"] - 1
    df["run_error"] = df["predicted_ms"] / df["checked_ms"] - 1
    df["host_ratio"] = df["checked_launch_us"] / df["source_launch_us"]
    df["measured_change_ms"] = df["measured_ms"] - before
    df["predicted_change_ms"] = df["predicted_ms"] - df["modelled_ms"]   # the edit's own change, on the model
    noise = (df["measured_p10_ms"] <= before) & (before <= df["measured_p90_ms"])
    df["sign_right"] = (df["measured_change_ms"] * df["predicted_change_ms"] > 0) | noise
    df["within_target"] = df["error"].abs() <= TARGET
    df["predicts_slowdown"] = df["predicted_change_ms"] > 0   # every what-if here removes work or waiting
    return df


def _f(x: float, spec: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def markdown(df: pd.DataFrame, title: str) -> str:
    done = df.dropna(subset=["predicted_ms"]) if "predicted_ms" in df else df.iloc[:0]
    lines = [f"# {title}", "",
             "Each row: a what-if predicted from the *source* run alone (`tracekit whatif SOURCE --<what-if>`), "
             "checked against the source's *twin* timed in the same processes where it has one (on: twin), else "
             "against the measured *checked* run (on: run): unprofiled step time, ms (the slowest rank of each timed "
             "step, median; p10-p90 beside it). Made by `python benchmarks/predict_dist_report.py`.", ""]
    if len(done):
        within, sign = int(done["within_target"].sum()), int(done["sign_right"].sum())
        slow = int(done["predicts_slowdown"].sum())
        on_twin = done[done["checked_on"] == "twin"]
        lines += [f"**{within} of {len(done)} pairs within {TARGET:.0%}** (target: 90%), median |error| "
                  f"{done['error'].abs().median():.1%}; the sign of the change right on {sign} of {len(done)}; "
                  f"{slow} what-if(s) that remove work predicting a slowdown. {len(on_twin)} checked on the twin "
                  f"({int(on_twin['within_target'].sum())} within), {len(done) - len(on_twin)} on another run.", ""]
        both = done.dropna(subset=["run_error"])
        both = both[both["checked_on"] == "twin"]
        if len(both):
            lines += [f"The {len(both)} pairs checked on the twin, checked on the other process's run instead: "
                      f"{int((both['run_error'].abs() <= TARGET).sum())} within {TARGET:.0%} (median |error| "
                      f"{both['run_error'].abs().median():.1%}), the hosts' speeds differing between the processes "
                      "(host ratio: a launch call's median time, checked run over source).", ""]
    lines += ["| what-if | source run | source (ms) | on | measured (ms) | p10-p90 | predicted (ms) | error | sign | "
              "checked run | its step (ms) | error vs it | host ratio | calibrated | notes |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in df.to_dict("records"):
        if pd.isna(r.get("predicted_ms")):
            why = f"no prediction: {r['notes']}" if isinstance(r.get("notes"), str) else "not both measured"
            lines.append(f"| {r['what_if']} | {r['source']} | {r['source_status']} | | | | | | | {r['checked']} | "
                         f"{r['checked_status']} | | | | {why} |")
            continue
        lines.append(f"| {r['what_if']} | {r['source']} | {_f(r['source_ms'])} | {r['checked_on']} | "
                     f"{_f(r['measured_ms'])} | {_f(r['measured_p10_ms'])}-{_f(r['measured_p90_ms'])} | "
                     f"{_f(r['predicted_ms'])} | {r['error']:+.1%} | "
                     f"{'right' if r['sign_right'] else 'WRONG'} | {r['checked']} | {_f(r['checked_ms'])} | "
                     f"{_f(r['run_error'] * 100, '+.1f')}% | {_f(r['host_ratio'], '.2f')} | "
                     f"{'yes' if r['calibrated'] else 'no'} | {r['notes']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--title", default="Job what-ifs: predicted beside measured")
    a = ap.parse_args()
    df = rows(a.traces)
    a.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out / "predictions.csv", index=False)
    (a.out / "predictions.md").write_text(markdown(df, a.title))
    print((a.out / "predictions.md").read_text())


if __name__ == "__main__":
    main()

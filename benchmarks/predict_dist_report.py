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
``tracekit whatif``); nothing of the checked run goes into it. The error is predicted over the
checked run's measured step (run.json ``latency_ms`` median: the slowest rank of each timed step)
less 1; the sign of the gain is right where the predicted and the measured change from the source
run agree (the predicted change: the prediction less the source run's calibrated model, so that a
calibration's residual is no change), or where the measured change is inside the checked run's p10-p90
(no sign to get right).
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
    """(what_if, source folder, checked folder) for every pair both of whose runs are in TRACES_DIR."""
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
        out += [{"what_if": w, "source": folder, "checked": by_key[k][0]} for w, k in targets if k in by_key]
    return out


def _measured(folder: Path) -> dict:
    m = Manifest.read(folder)
    if m is None or m.status != "ok":
        return {"status": "missing" if m is None else m.status}
    return {"status": "ok", "median": m.latency("median"), "p10": m.latency("p10"), "p90": m.latency("p90"),
            "device": m.ran_on_name}


def launch_call_us(folder: Path) -> float:
    """The median duration (µs) of the ``cudaLaunchKernel`` calls in the run's rank traces; NaN without any."""
    calls = [t.host_calls for t in map(load, trace_files(folder))]
    durations = pd.concat([c.loc[c["name"] == "cudaLaunchKernel", "dur"] for c in calls]) if calls else pd.Series()
    return float(durations.median()) if len(durations) else math.nan


def rows(traces: Path) -> pd.DataFrame:
    out = []
    for p in pairs(traces):
        src, chk = _measured(p["source"]), _measured(p["checked"])
        row = {"what_if": p["what_if"].replace("_", "-"), "source": str(p["source"].relative_to(traces)),
               "checked": str(p["checked"].relative_to(traces)), "source_status": src["status"],
               "checked_status": chk["status"], "device": src.get("device")}
        if src["status"] != "ok" or chk["status"] != "ok":
            out.append(row)
            continue
        prediction = tracekit.whatif(p["source"], **{p["what_if"]: True})
        row.update(source_ms=src["median"], checked_ms=chk["median"], checked_p10_ms=chk["p10"],
                   checked_p90_ms=chk["p90"], predicted_ms=prediction.predicted_latency_ms,
                   modelled_ms=prediction.modelled_latency_ms,
                   calibrated=prediction.calibrated, host_scale=prediction.host_scale,
                   gpu_scale=prediction.gpu_scale, notes="; ".join(prediction.notes + prediction.missing),
                   source_launch_us=launch_call_us(p["source"]), checked_launch_us=launch_call_us(p["checked"]))
        out.append(row)
    df = pd.DataFrame(out)
    if df.empty or "predicted_ms" not in df:
        return df
    df["error"] = df["predicted_ms"] / df["checked_ms"] - 1
    df["host_ratio"] = df["checked_launch_us"] / df["source_launch_us"]
    df["measured_change_ms"] = df["checked_ms"] - df["source_ms"]
    df["predicted_change_ms"] = df["predicted_ms"] - df["modelled_ms"]   # the edit's own change, on the model
    noise = (df["checked_p10_ms"] <= df["source_ms"]) & (df["source_ms"] <= df["checked_p90_ms"])
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
             "checked against the measured *checked* run: unprofiled step time, ms (the slowest rank of each timed "
             "step, median; p10-p90 beside it). Made by `python benchmarks/predict_dist_report.py`.", ""]
    if len(done):
        within, sign = int(done["within_target"].sum()), int(done["sign_right"].sum())
        slow = int(done["predicts_slowdown"].sum())
        lines += [f"**{within} of {len(done)} pairs within {TARGET:.0%}** (target: 90%), median |error| "
                  f"{done['error'].abs().median():.1%}; the sign of the change right on {sign} of {len(done)}; "
                  f"{slow} what-if(s) that remove work predicting a slowdown.", ""]
        ratio = done["host_ratio"].sub(1).abs()
        apart, close = ratio > TARGET, ratio <= TARGET   # both False where a run has no launch call (NaN)
        lines += [f"Of the {int((apart | close).sum())} pairs with launch calls in both runs, the two hosts ran at "
                  f"speeds more than {TARGET:.0%} apart (a launch call's median time, checked over source: host "
                  f"ratio) in {int(apart.sum())}, {int((apart & done['within_target']).sum())} of them within "
                  f"{TARGET:.0%}; of the {int(close.sum())} others {int((close & done['within_target']).sum())}.",
                  ""]
    lines += ["| what-if | source run | source (ms) | checked run | measured (ms) | p10-p90 | predicted (ms) | error |"
              " sign | host ratio | calibrated | notes |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in df.to_dict("records"):
        if "predicted_ms" not in r or r["predicted_ms"] != r["predicted_ms"]:
            lines.append(f"| {r['what_if']} | {r['source']} | {r['source_status']} | {r['checked']} | "
                         f"{r['checked_status']} | | | | | | | not both measured |")
            continue
        lines.append(f"| {r['what_if']} | {r['source']} | {_f(r['source_ms'])} | {r['checked']} | "
                     f"{_f(r['checked_ms'])} | {_f(r['checked_p10_ms'])}-{_f(r['checked_p90_ms'])} | "
                     f"{_f(r['predicted_ms'])} | {r['error']:+.1%} | {'right' if r['sign_right'] else 'WRONG'} | "
                     f"{_f(r['host_ratio'], '.2f')} | {'yes' if r['calibrated'] else 'no'} | {r['notes']} |")
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

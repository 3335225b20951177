"""Cross-check against HolisticTraceAnalysis (HTA 0.5.0): its temporal breakdown,
idle-time breakdown and kernel breakdown, on every real fixture with GPU ops
(the CPU-only and the counters-only HTA fixtures have none: HTA has nothing to
break down there, and tracekit says "no GPU activity") and on one of our own
H100 traces (tests/data) with ProfilerStep markers.

Both tools read the same doubles from the JSON. So that float arithmetic
cannot differ, our analyses run here on the same times HTA uses: µs since its
``min_ts`` (the trace's first event). On the absolute times tracekit keeps, an
op's end ``ts + dur`` rounds to the spacing of doubles at ~1e12-1e15 µs
(0.001-0.25 µs); :func:`test_absolute_times_change_figures_by_rounding_only`
bounds that. With the same times, and HTA's rounding of timestamps to whole µs
off (``HTA_DISABLE_NS_ROUNDING=1``), what remains, and why:

* which ops: in a trace with ProfilerStep markers HTA keeps only the GPU ops
  whose launch call started before the last marker did (hta/common/trace.py,
  ``_filter_irrelevant_gpu_kernels``: it leaves out the last iteration, whose
  kernels may be cut off); we compare the GPU ops it kept.
* what is a GPU op: HTA takes every event with a ``stream`` arg. That is our
  kernels, memcpys and memsets, plus Kineto's ``cuda_sync`` events (the
  alexnet fixture) and Inductor's ``cpu_op`` records of Triton launches, which
  carry the stream they launch on (triton_example). HTA counts those as GPU
  busy time; we do not (a sync is a wait, a cpu_op is host time). Adding
  exactly those events to ours gives HTA's figures.
* temporal breakdown: idle time and span (``kernel_time``) equal; compute +
  non-compute time equals our GPU busy time.
* kernel breakdown: per name, total and mean time equal (HTA's table with
  nothing folded into "others"). The time per kernel type (COMPUTATION,
  COMMUNICATION, MEMORY and their overlaps) is our union of intervals, less
  what HTA's ``astype(int)`` drops: it truncates each segment between interval
  boundaries to whole µs (breakdown_analysis.py, ``_get_gpu_kernel_type_time``).
  :func:`_hta_type_times` redoes that truncation, and the result is exact.
* idle by cause per stream (30 µs ``consecutive_kernel_delay``): HTA's
  ``host_wait`` is our ``host_wait`` plus the ``sync`` gaps after a blocking
  host call (HTA has no sync cause); ``kernel_wait`` is our
  ``launch_latency``; ``other`` is our ``other`` plus GPU-side ``sync`` waits,
  except that a short gap before an op without a launch call is
  ``kernel_wait`` for HTA (it compares the missing launch time as false) and
  ``other`` for us (no launch, nothing to blame). Not compared where HTA takes
  extra events as GPU ops (they make gaps of their own).
* HTA's defaults (rounding on) round each op inward to whole µs (ts up, end
  down: ``round_down_time_stamps``), so each op loses up to 2 µs of busy time
  and idle time grows by as much: within 2 µs a GPU op of ours. An op shorter
  than 1 µs can then end before it starts, and the public temporal breakdown
  fails its own ``assert non_compute_time >= 0`` (the default-mode fixture's
  memsets): that test reads the idle time from the method the breakdown calls.

An annotated copy (``tracekit analyze --annotate``) gives HTA the same figures as its trace.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tracekit.analysis.annotation_tracks import annotate
from tracekit.analysis.metrics import idle, kernels
from tracekit.analysis.metrics.intervals import union
from tracekit.analysis.metrics.summary import summarize
from tracekit.trace import load

pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (make setup installs it)")

# Ours (own:, tests/data) and HTA's own test traces (shared fixtures).
FIXTURES = ["own:vit16x6x384/eager", "own:vit16x6x384/default", "own:vit16x6x384/reduce-overhead",
            "hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz",
            "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
            "hta/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
            "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
            "hta/triton_example/triton_example.json.gz", "own:vit16x6x384-b1/eager"]
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
# The events HTA takes as GPU ops beyond ours, by the trace that has them (see the docstring).
EXTRAS = {"hta/alexnet/benchmark_result_2869224_1695835535_trace.json.gz": {"cuda_sync"},
          "hta/triton_example/triton_example.json.gz": {"cpu_op"}, "own:vit16x6x384/default": {"cpu_op"}}


def _hta(path: Path, rounding: bool) -> dict:
    env = {**os.environ, "HTA_DISABLE_NS_ROUNDING": "0" if rounding else "1"}
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("hta_run.py")), str(path)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _shifted(tables, origin: float):
    """The tables with times counted from ``origin`` (µs), ends recomputed as HTA does: ts + dur."""
    for name in ("gpu_ops", "host_calls", "cpu_ops", "syncs", "markers"):
        df = getattr(tables, name).copy()
        df["ts"] = df["ts"] - origin
        df["end"] = df["ts"] + df["dur"]
        setattr(tables, name, df)
    return tables


def _hta_view(path: Path, hta: dict):
    """Our tables on HTA's times, restricted to the GPU ops HTA kept; and the events it
    takes as GPU ops that are not ours (ts, dur, end, stream, cat, name)."""
    tables = _shifted(load(path), hta["min_ts"])
    gpu = pd.DataFrame(hta["gpu"], columns=["ts", "dur", "stream", "cat", "name"]).assign(
        end=lambda d: d["ts"] + d["dur"])
    kept = {(round(ts, 3), stream) for ts, stream in gpu.loc[gpu["cat"].isin(GPU_CATS), ["ts", "stream"]].itertuples(
        index=False)}
    ops = tables.gpu_ops
    tables.gpu_ops = ops[[k in kept for k in zip(ops["ts"].round(3), ops["stream"])]].reset_index(drop=True)
    assert len(tables.gpu_ops) == len(kept)
    return tables, gpu[~gpu["cat"].isin(GPU_CATS)]


def _hta_type(name: str) -> str:
    """HTA's kernel type of a name (hta/utils/utils.py, ``get_kernel_type``)."""
    if re.match(r"^nccl.*Kernel", name):
        return "COMMUNICATION"
    if re.match(r"(^Memcpy)|(^Memset)|(^dma)", name):
        return "MEMORY"
    return "OTHER" if re.match(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)", name) else "COMPUTATION"


def _hta_type_times(ops: pd.DataFrame) -> dict:
    """Time per kernel type and overlap of types, as HTA's kernel breakdown computes it:
    the union of each type's intervals, split at every boundary, each piece truncated
    to whole µs. ``ops``: name, ts, end (µs)."""
    order = ["COMPUTATION", "COMMUNICATION", "MEMORY"]
    times, steps = [], []
    for bit, kind in enumerate(order):
        sel = ops[ops["name"].map(_hta_type) == kind]
        s, e = union(sel["ts"].to_numpy(), sel["end"].to_numpy())
        times += [*s, *e]
        steps += [1 << bit] * len(s) + [-(1 << bit)] * len(e)
    idx = np.argsort(times, kind="stable")
    t, running = np.asarray(times)[idx], np.cumsum(np.asarray(steps)[idx])
    out: dict[str, float] = {}
    for state, piece in zip(running[:-1], np.trunc(np.diff(t))):
        if state > 0 and piece > 0:
            label = " overlapping ".join(k for bit, k in enumerate(order) if state & (1 << bit))
            out[label] = out.get(label, 0.0) + piece
    return out


def _ours_by_stream(tables) -> dict:
    """Our per-stream causes mapped onto HTA's three categories (see the module docstring)."""
    g = idle.gaps(tables, per_stream=True)
    host_sync = g["cause"].eq("sync") & (g["launch_ts"] > g["start"])
    hta_cat = g["cause"].map({"host_wait": "host_wait", "launch_latency": "kernel_wait",
                              "sync": "other", "other": "other"}).mask(host_sync, "host_wait")
    no_launch_short = g["launch_ts"].isna() & (g["gap_us"] < idle.LAUNCH_LATENCY_MAX_US)
    hta_cat = hta_cat.mask(no_launch_short, "kernel_wait")
    return g.assign(category=hta_cat).groupby(["stream", "category"])["gap_us"].sum().to_dict()


def _close(a, b):
    return a == pytest.approx(b, rel=1e-9, abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES)
def test_same_figures_as_hta(real_trace, name):
    path = real_trace(name)
    hta = _hta(path, rounding=False)
    tables, extra = _hta_view(path, hta)
    assert set(extra["cat"]) == EXTRAS.get(name, set())
    ours = summarize(tables)
    assert hta["kernels"] == ours["kernels"]

    # Temporal breakdown: idle time and span; with HTA's extra events added, exactly HTA's.
    s, e = union(np.r_[tables.gpu_ops["ts"], extra["ts"]], np.r_[tables.gpu_ops["end"], extra["end"]])
    span, busy = e.max() - s.min(), float((e - s).sum())
    assert _close(hta["span_us"], span) and _close(hta["idle_us"], span - busy)
    if extra.empty:
        assert _close(hta["span_us"], ours["active_span_us"]) and _close(hta["idle_us"], ours["idle_us"])
    temporal = hta["temporal"]
    assert _close(temporal["idle_time(us)"], hta["idle_us"]) and _close(temporal["kernel_time(us)"], span)
    assert _close(temporal["compute_time(us)"] + temporal["non_compute_time(us)"], busy)

    # Kernel breakdown: per name, total and mean time; per type, the union HTA truncates.
    both = pd.concat([tables.gpu_ops[["name", "ts", "end", "dur"]], extra[["name", "ts", "end", "dur"]]])
    top = kernels.top_kernels(tables, n=len(tables.gpu_ops)).set_index("name")
    per_name = both.groupby("name")["dur"].agg(["sum", "size"])
    listed = {r["name"] for r in hta["kernel_names"]}
    assert listed == {n for n in per_name.index if _hta_type(n) != "OTHER"}
    for r in hta["kernel_names"]:
        mine = top.loc[r["name"], "total_us"] if r["name"] in top.index else 0.0
        extra_us = extra.loc[extra["name"] == r["name"], "dur"].sum()
        assert _close(r["sum_us"], mine + extra_us), r["name"]
        assert _close(r["mean_us"], per_name.loc[r["name"], "sum"] / per_name.loc[r["name"], "size"]), r["name"]
    types = {k: v for k, v in hta["kernel_types"].items() if v > 0}
    assert types == pytest.approx(_hta_type_times(both[both["name"].map(_hta_type) != "OTHER"]), abs=1e-6)
    if extra.empty:  # truncation only takes away, less than 1 µs a piece
        assert 0 <= ours["gpu_busy_us"] - sum(types.values()) < 2 * ours["gpu_ops"]

    # Idle-time breakdown per stream.
    if extra.empty:
        mine = _ours_by_stream(tables)
        for row in hta["idle_by_stream"]:
            # HTA rounds this table to 0.01 µs (``result_df.round(2)``)
            assert mine.get((row["stream"], row["category"]), 0.0) == pytest.approx(row["idle_us"], abs=0.005), row


@pytest.mark.parametrize("name", ["own:vit16x6x384/eager",
                                  "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"])
def test_absolute_times_change_figures_by_rounding_only(real_trace, name):
    """On absolute µs an op's end rounds to the spacing of doubles there: at most one
    spacing per op end, for busy and idle time alike."""
    tables = load(real_trace(name))
    ulp = float(np.spacing(tables.gpu_ops["end"].abs().max()))
    absolute = summarize(tables)
    relative = summarize(_shifted(load(real_trace(name)), tables.gpu_ops["ts"].min()))
    for key in ("gpu_busy_us", "idle_us", "active_span_us"):
        assert abs(absolute[key] - relative[key]) <= ulp * absolute["gpu_ops"], key


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in FIXTURES if n.startswith("own:") and n not in EXTRAS])
def test_hta_defaults_differ_only_by_its_rounding(real_trace, name):
    path = real_trace(name)
    ours = summarize(_hta_view(path, _hta(path, rounding=False))[0])  # the ops HTA keeps, on its times
    hta = _hta(path, rounding=True)
    assert hta["kernels"] == ours["kernels"]
    assert 0 <= hta["idle_us"] - ours["idle_us"] <= 2.0 * ours["gpu_ops"]


@pytest.mark.slow
def test_hta_opens_an_annotated_copy_with_the_original_figures(real_trace, tmp_path):
    """``tracekit analyze --annotate``'s copy of an H100 trace: HTA reads tracekit's events into its
    trace table (category "tracekit") and takes none of them as GPU work: its temporal, idle-time
    and kernel breakdowns are the original's."""
    trace = Path(shutil.copy(real_trace("own:vit16x6x384/eager"), tmp_path))
    copy = annotate(trace)["annotated"][0]
    original, annotated = _hta(trace, rounding=True), _hta(copy, rounding=True)
    ours = annotated["categories"].pop("tracekit")
    assert ours > 0 and "tracekit" not in original["categories"]
    assert annotated == original


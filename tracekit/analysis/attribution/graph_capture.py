"""The record of a CUDA-graph capture (rule 1 of :mod:`tracekit.analysis.attribution.gpu_ops`):
each captured graph's launches in order, with their module and op, read from a profile of the
calls that captured it (:func:`tracekit.capture.provenance.capture_recording` makes one while a
run captures and keeps what this returns in run.json's ``attribution.captures``)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracekit.analysis.attribution.gpu_ops import GRAPH_LAUNCHES, launch_rules
from tracekit.manifest import Attribution
from tracekit.trace.reader import EventTables

CAPTURE_BEGIN, CAPTURE_END = re.compile(r"^(cuda|hip)StreamBeginCapture"), re.compile(r"^(cuda|hip)StreamEndCapture")


def captured_launches(tables: EventTables, record: Attribution | None) -> list[dict]:
    """The launches of each CUDA graph captured in ``tables`` (a profile of the calls
    that captured them), in order, attributed by :func:`launch_rules`.

    A captured launch is a launch call that enqueued no GPU op (nothing runs while a
    stream captures) between a ``cudaStreamBeginCapture`` and ``cudaStreamEndCapture``
    on its thread, or on a thread that begins no capture itself: the backward of a captured
    training step is launched by the autograd engine's device thread, onto the captured stream
    (PyTorch's "whole-network capture", https://pytorch.org/docs/stable/notes/cuda.html#whole-network-capture);
    anywhere, where the trace has no such calls. Launches are taken in time order, across threads.

    Returns:
        [{"graph": the FX graph key of the launches' graph call ("" for a capture
        outside compiled code), "launches": [[module or None, op, rule], ...]}, ...]
    """
    calls = tables.host_calls
    executed = set(tables.gpu_ops["correlation"].to_numpy().tolist())
    windows = [(0.0, np.inf, None)]
    begins = calls[calls["name"].str.match(CAPTURE_BEGIN)]
    if len(begins):
        ends = calls[calls["name"].str.match(CAPTURE_END)]
        windows = [(b.ts, ends.loc[(ends["ts"] > b.ts) & (ends["tid"] == b.tid), "ts"].min(), b.tid)
                   for b in begins.itertuples()]
    launch_like = calls["name"].str.contains("Launch|Memset|Memcpy", regex=True) & ~calls["name"].isin(GRAPH_LAUNCHES)
    captured = calls[launch_like & ~calls["correlation"].isin(executed)].sort_values("ts", kind="stable")
    capturing = set(begins["tid"].tolist())
    rules = launch_rules(tables, captured, record)
    out = []
    for start, end, tid in windows:
        own = (captured["tid"] == tid) | ~captured["tid"].isin(capturing) if tid else True
        inside = (captured["ts"] > start) & (captured["ts"] < end) & own
        part = rules[inside.to_numpy()]
        if len(part):
            out.append({"graph": part["graph"].iloc[0],
                        "launches": [[None if pd.isna(m) else m, o, r]
                                     for m, o, r in part[["module", "op", "rule"]].astype(object).to_numpy()]})
    return out

"""A slow, plain reading of a Kineto trace: one Python dict per event, the reader's rules
written out event by event. Tests compare :func:`tracekit.trace.load`'s columnar tables with it."""

from __future__ import annotations

import bisect
import gzip
import json
import math
from collections import defaultdict

import pandas as pd

from tracekit.trace.event_columns import (COMM_EVENT, CPU_OP_CATS, GPU_OP_KINDS, HOST_CALL_KINDS, ITERATION_MARKER,
                                          SYNC_CAT)

# The comms table's metadata columns: Kineto's arg name, and whether the value is kept as text.
COMM_ARGS = {"collective": ("Collective name", True), "in_msg_nelems": ("In msg nelems", False),
             "out_msg_nelems": ("Out msg nelems", False), "group_size": ("Group size", False),
             "dtype": ("dtype", True), "pg_name": ("Process Group Name", True),
             "pg_desc": ("Process Group Description", True), "pg_ranks": ("Process Group Ranks", True),
             "seq": ("Seq", False)}


def _num(v) -> float:
    if isinstance(v, bool) or v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _int(v, default=-1) -> int:
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            pass
    f = _num(v)
    return int(f) if math.isfinite(f) else default


def _float(v) -> float:
    """A collective's numeric arg: numbers (bools too) and numeric strings, else NaN."""
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(v) if isinstance(v, str) else math.nan
    except ValueError:
        return math.nan


def _text(v) -> str | None:
    """A collective's text arg as Python writes it (a list of ranks as "[0, 1]")."""
    return None if v is None else str(v)


def _dims(v) -> list[float]:
    return [_num(x) for x in v[:3]] if isinstance(v, list) and len(v) >= 3 else [math.nan] * 3


def read(path) -> dict[str, pd.DataFrame]:
    """The tables of ``path`` (gpu, host, cpu, syncs, markers, comms), string columns as str."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    rows = defaultdict(list)
    for e in doc["traceEvents"]:
        cat, ph, args = e.get("cat", ""), e.get("ph", ""), e.get("args") or {}
        ts = _num(e.get("ts"))
        table = ("gpu" if cat in GPU_OP_KINDS else "host" if cat in HOST_CALL_KINDS else "cpu" if cat in CPU_OP_CATS
                 else "syncs" if cat == SYNC_CAT else None)
        if table is None or ph != "X":
            continue
        dur = _num(e.get("dur"))
        dur = 0.0 if not math.isfinite(dur) else dur
        if not math.isfinite(ts) or dur < 0:
            continue
        row = {"name": e.get("name", ""), "ts": ts, "dur": dur, "external_id": _int(args.get("External id"))}
        if table in ("gpu", "syncs"):
            row["kind"] = GPU_OP_KINDS.get(cat, "sync")
            device, stream = _int(args.get("device")), _int(args.get("stream"))
            row["device"] = device if device >= 0 else _int(e.get("pid", 0), default=0)
            row["stream"] = stream if stream >= 0 else _int(e.get("tid", 0))
            row["correlation"] = _int(args.get("correlation"))
            for dim in ("grid", "block"):
                row.update(zip((f"{dim}_x", f"{dim}_y", f"{dim}_z"), _dims(args.get(dim))))
            for col, key in (("registers", "registers per thread"), ("shared_memory", "shared memory"),
                             ("occupancy_pct", "est. achieved occupancy %"), ("bytes", "bytes")):
                row[col] = _num(args.get(key))
        else:
            row.update(pid=str(e.get("pid", 0)), tid=str(e.get("tid", 0)))
            if table == "host":
                row.update(api=HOST_CALL_KINDS[cat], correlation=_int(args.get("correlation")))
            else:
                row.update(cat=CPU_OP_CATS[cat], sequence=_int(args.get("Sequence number")))
        rows[table].append(row)
        if table in ("gpu", "cpu") and COMM_EVENT.search(row["name"]):
            rows["comms"].append({
                "table": f"{table}_ops", "name": row["name"], "pid": str(e.get("pid", 0)), "tid": str(e.get("tid", 0)),
                "ts": ts, "dur": dur, "correlation": _int(args.get("correlation")), "external_id": row["external_id"],
                **{col: (_text if text else _float)(args.get(key)) for col, (key, text) in COMM_ARGS.items()}})
    out = {}
    keys = {"gpu": ["ts", "dur", "device", "stream", "correlation"], "host": ["ts", "dur", "correlation", "external_id"],
            "cpu": ["ts", "dur", "external_id"], "comms": ["ts", "dur", "correlation", "external_id", "name"]}
    for table in ("gpu", "host", "cpu", "syncs", "comms"):
        df = pd.DataFrame(rows[table]).sort_values("ts", kind="stable").reset_index(drop=True) if rows[table] else None
        if df is not None and table in keys:
            df = df[~df.duplicated(keys[table])].reset_index(drop=True)
        if df is not None:
            df["end"] = df["ts"] + df["dur"]
        out[table] = df
    if out["cpu"] is not None:
        out["cpu"]["depth"] = _depth(out["cpu"])
        steps = [(int(m.group(1)), ts, dur, ts + dur) for name, ts, dur in out["cpu"][["name", "ts", "dur"]].itertuples(
            index=False) if (m := ITERATION_MARKER.match(name))]
        out["markers"] = pd.DataFrame(steps, columns=["step", "ts", "dur", "end"]).drop_duplicates("step")
    return out


def _depth(cpu: pd.DataFrame) -> list[int]:
    """Ops of the thread ordered before this one (start, longer first, row) minus those ended by its start."""
    t0 = cpu["ts"].min()
    ns = lambda us: round((us - t0) * 1e3)  # noqa: E731
    depth = [0] * len(cpu)
    for _, grp in cpu.groupby(["pid", "tid"]):
        order = sorted(grp.index, key=lambda i: (ns(cpu.at[i, "ts"]), -cpu.at[i, "dur"], i))
        ends = sorted(ns(cpu.at[i, "end"]) for i in grp.index)
        for rank, i in enumerate(order):
            depth[i] = max(rank - bisect.bisect_right(ends, ns(cpu.at[i, "ts"])), 0)
    return depth

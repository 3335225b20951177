"""Checks a trace against the rules of the Chrome Trace Event Format, the format that
ui.perfetto.dev, chrome://tracing and TensorBoard's trace viewer read.

Rules (Trace Event Format, https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU):

* JSON Object Format: an object whose ``traceEvents`` is an array of event objects;
  ``displayTimeUnit``, if present, is "ms" or "ns".
* every event has a phase ``ph`` from the spec, ``pid`` and ``tid`` (number or string),
  a numeric ``ts`` in µs (metadata events ``M`` may omit it), a string ``name``, and
  ``args``, if present, an object;
* complete events ``X`` have a numeric ``dur`` >= 0; ``B``/``E`` nest per thread;
* instant events ``i``/``I`` have scope ``s`` in g/p/t, if given;
* flow events ``s``/``t``/``f`` have an ``id`` and a ``cat`` (a flow is cat + id, one
  start each); each binds to the slice enclosing it on its thread (``bp: "e"`` for ``f``),
  so an ``X`` event on the same pid/tid must cover its ``ts``. (Flow ends without a start
  are allowed: Kineto writes them for GPU ops whose launch fell outside the window.)
* metadata events ``M`` name one of process_name, process_labels, process_sort_index,
  thread_name, thread_sort_index, with the matching key in ``args``.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

PHASES = set("BEXiICbnestfPONDMVvRc()")
METADATA = {"process_name": "name", "process_labels": "labels", "process_sort_index": "sort_index",
            "thread_name": "name", "thread_sort_index": "sort_index"}


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def problems(trace) -> list[str]:
    """Every rule the trace breaks, one line each (empty: a valid trace)."""
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not the JSON Object Format: no traceEvents array"]
    out = []
    if trace.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        out.append(f"displayTimeUnit {trace['displayTimeUnit']!r} is not 'ms' or 'ns'")
    slices = defaultdict(list)   # (pid, tid) -> [(start, end)] of X events
    flows, starts, stacks = [], defaultdict(int), defaultdict(list)
    for i, e in enumerate(trace["traceEvents"]):
        where = f"event {i} ({e.get('ph')!r} {e.get('name')!r})" if isinstance(e, dict) else f"event {i}"
        if not isinstance(e, dict):
            out.append(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if ph not in PHASES:
            out.append(f"{where}: unknown phase")
            continue
        if not all(isinstance(e.get(k), (int, str)) and not isinstance(e.get(k), bool) for k in ("pid", "tid")):
            out.append(f"{where}: pid/tid missing or not a number or string")
        if ph != "M" and not _num(e.get("ts")):
            out.append(f"{where}: ts missing or not a number")
        if not isinstance(e.get("name", ""), str):
            out.append(f"{where}: name is not a string")
        if "args" in e and not isinstance(e["args"], dict):
            out.append(f"{where}: args is not an object")
        key = (e.get("pid"), e.get("tid"))
        if ph == "X":
            if not _num(e.get("dur")) or e["dur"] < 0:
                out.append(f"{where}: complete event without a dur >= 0")
            else:
                slices[key].append((e["ts"], e["ts"] + e["dur"]))
        elif ph == "B":
            stacks[key].append(e.get("ts"))
        elif ph == "E" and not stacks[key]:
            out.append(f"{where}: end without a begin on its thread")
        elif ph == "E":
            stacks[key].pop()
        elif ph in "iI" and e.get("s", "t") not in ("g", "p", "t"):
            out.append(f"{where}: instant scope {e.get('s')!r} is not g/p/t")
        elif ph in "stf":
            if "id" not in e or "cat" not in e:
                out.append(f"{where}: flow event without id or cat")
            if ph == "f" and e.get("bp", "e") != "e":
                out.append(f"{where}: flow end binding point {e.get('bp')!r} is not 'e'")
            starts[(e.get("cat"), e.get("id"))] += ph == "s"
            flows.append((where, key, e.get("ts")))
        elif ph == "M" and not isinstance((e.get("args") or {}).get(METADATA.get(e.get("name"), "?")), (str, int, list)):
            out.append(f"{where}: metadata event of unknown name or without its args key")
    out += [f"{len(s)} begin event(s) without an end on thread {k}" for k, s in stacks.items() if s]
    out += [f"flow {k}: {n} start events" for k, n in starts.items() if n > 1]
    covered = {k: _cover(v) for k, v in slices.items()}
    for where, key, ts in flows:
        if _num(ts) and not _inside(covered.get(key), ts):
            out.append(f"{where}: flow event at ts {ts} is not inside a slice on its thread {key}")
    return out


def _cover(spans: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Sorted starts and the running maximum of ends."""
    spans.sort()
    ends, top = [], float("-inf")
    for _, end in spans:
        top = max(top, end)
        ends.append(top)
    return [s for s, _ in spans], ends


def _inside(cover, ts: float) -> bool:
    if cover is None:
        return False
    starts, ends = cover
    j = bisect.bisect_right(starts, ts) - 1
    return j >= 0 and ends[j] >= ts

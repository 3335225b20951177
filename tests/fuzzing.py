"""What the fuzz tests share (tests/test_fuzz.py, tests/test_fuzz_folders.py): the real traces
they damage and the damages (issues 31 and 40); tests/fuzz_verbs.py runs every verb on them and
checks the property each run must have.

The corpus: every Kineto trace of tests/data and, where present, of ../shared/fixtures, no larger
than ``TRACEKIT_FUZZ_MAX_KB`` of JSON; a case keeps one stretch of a trace's time (at most
``TRACEKIT_FUZZ_WINDOW_KB`` of its JSON). ``TRACEKIT_FUZZ_EXAMPLES`` scales every fuzz test's cases
(``make fuzz`` runs thousands).
"""

import gzip
import json
import os
from functools import lru_cache
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from owndata import DATA, FIXTURES

EXAMPLES = int(os.environ.get("TRACEKIT_FUZZ_EXAMPLES", 200))
MAX_KB = float(os.environ.get("TRACEKIT_FUZZ_MAX_KB", 4000))
WINDOW_KB = float(os.environ.get("TRACEKIT_FUZZ_WINDOW_KB", 400))


def fuzz_settings(share: float = 1.0) -> settings:
    """Hypothesis' settings for a fuzz test running ``share`` of ``EXAMPLES`` cases (derandomized
    for CI's counts, so a failure there is found again)."""
    n = max(1, int(EXAMPLES * share))
    return settings(max_examples=n, deadline=None, derandomize=n <= 300,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


UNTOUCHED = next((DATA / "ncu" / "mul1024").glob("*.pt.trace.json.gz"))   # ours (H100, 10 kernels): always there


@lru_cache(maxsize=1)
def corpus() -> list[Path]:
    """Every Kineto trace of tests/data and the shared fixtures no larger than MAX_KB of JSON."""
    found = sorted(DATA.rglob("*.pt.trace.json.gz")) + (sorted(FIXTURES.rglob("*.json.gz")) if FIXTURES.is_dir()
                                                        else [])
    return [p for p in found if "ort" not in p.name.split(".") and "ort" not in p.parent.name
            and _size_kb(p) <= MAX_KB]


@lru_cache(maxsize=None)
def _size_kb(path: Path) -> float:
    with gzip.open(path) as f:
        return f.seek(0, 2) / 1024


@lru_cache(maxsize=8)
def _parsed(path: Path) -> tuple[dict, float, float]:
    """A trace's JSON document, and the first and last ``ts`` of its events (µs)."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    ts = [e["ts"] for e in doc["traceEvents"] if isinstance(e.get("ts"), (int, float))]
    return doc, min(ts), max(ts)


def window(path: Path, start: float, length: float) -> dict:
    """A copy of the trace with the events of one stretch of its time: from ``start`` (0..1 of
    its span) for ``length`` of it, at most ``WINDOW_KB`` of JSON's worth (a shorter profile,
    and a cheap case however large the trace); events without a ``ts`` (metadata) all kept."""
    doc, lo, hi = _parsed(path)
    length = min(length, WINDOW_KB / _size_kb(path))
    t0 = lo + start * (1 - length) * (hi - lo)
    t1 = t0 + length * (hi - lo)
    events = [{**e, "args": dict(e["args"])} if isinstance(e.get("args"), dict) else dict(e)
              for e in doc["traceEvents"] if not isinstance(e.get("ts"), (int, float)) or t0 <= e["ts"] <= t1]
    return {**doc, "traceEvents": events}


GPU = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events"}
LAUNCH = {"cuda_runtime", "cuda_driver", "Runtime", "Driver", "mtia_runtime", "xpu_runtime"}
KINDS = {   # which events a damage hits (their fields may be damaged already: compared as text)
    "launch": lambda e: str(e.get("cat")) in LAUNCH,
    "flow": lambda e: str(e.get("ph")) in ("s", "f", "t") or e.get("cat") == "ac2g",
    "marker": lambda e: str(e.get("name", "")).startswith("ProfilerStep"),
    "gpu": lambda e: str(e.get("cat")) in GPU,
    "any": lambda e: True,
}
TOP_FIELDS = ["ts", "dur", "args", "pid", "tid", "cat", "name", "ph", "id"]
ARG_FIELDS = ["correlation", "External id", "stream", "device", "bytes", "Seq", "Collective name",
              "In msg nelems", "grid"]
ACTIONS = ["remove", "null", "number string", "text", "list", "object", "negative", "huge", "zero", "bool",
           "past int64", "past uint64", "hex past int64", "fraction"]
# Issue 40's names and numbers: a marker's number (past int64, negative, not a number), every ts
# shifted or scaled (near 1e19: float64 then holds them to 2048 µs; another unit), every dur 0,
# a category relabelled (kernels as "gpu_op": device work under a name Kineto does not write).
MARKER_NUMBERS = [2 ** 63, 2 ** 64, 10 ** 30, -1, "x", 0, "007"]
SHIFTS = [1e19, -1e19, 1e15, 1e300]
SCALES = [1e3, 1e-3, 1e6]
RELABELS = [("kernel", "gpu_op"), ("kernel", ""), ("kernel", "Kernel"), ("cuda_runtime", "gpu_op"),
            ("gpu_memcpy", "kernel"), ("cpu_op", "cuda_runtime")]

damage = st.one_of(
    st.tuples(st.just("drop"), st.sampled_from(list(KINDS)), st.floats(0.05, 1)),
    st.tuples(st.just("field"), st.sampled_from(TOP_FIELDS + ARG_FIELDS), st.sampled_from(ACTIONS),
              st.sampled_from(list(KINDS)), st.floats(0.01, 1)),
    st.tuples(st.just("duplicate"), st.sampled_from(list(KINDS)), st.floats(0.01, 1)),
    st.tuples(st.just("shuffle")),
    st.tuples(st.just("junk"), st.floats(0.001, 0.2)),
    st.tuples(st.just("unit"), st.sampled_from(["ns", "us", "ms", "s", "", 1000, None, ["ms"]])),
    st.tuples(st.just("marker number"), st.sampled_from(MARKER_NUMBERS), st.floats(0.01, 1)),
    st.tuples(st.just("shift"), st.sampled_from(["ts", "dur", "both"]), st.sampled_from(SHIFTS)),
    st.tuples(st.just("scale"), st.sampled_from(SCALES)),
    st.tuples(st.just("zero durations")),
    st.tuples(st.just("relabel"), st.sampled_from(RELABELS), st.floats(0.05, 1)),
)


def _value(old, action: str):
    number = old if isinstance(old, (int, float)) and not isinstance(old, bool) else 1.0
    return {"null": None, "number string": str(number), "text": "x", "list": [number], "object": {"a": number},
            "negative": -abs(number) - 1, "huge": 1e300, "zero": 0, "bool": True, "past int64": 2 ** 63,
            "past uint64": 2 ** 64 + 1, "hex past int64": "0x1" + "0" * 20, "fraction": 1.5}[action]


def _damage_times(events: list, d: tuple) -> None:
    """The damages of every event's times: shifted, scaled, or every dur 0."""
    kind, *a = d
    for e in events:
        if not isinstance(e, dict):
            continue
        for key in ("ts", "dur"):
            v = e.get(key)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            if kind == "zero durations" and key == "dur":
                e[key] = 0
            elif kind == "shift" and a[0] in (key, "both"):
                e[key] = v + a[1]
            elif kind == "scale":
                e[key] = v * a[0]


def apply_damage(doc: dict, d: tuple, rnd) -> None:
    """Damage ``doc`` (a trace's JSON document) in place as ``d`` (one draw of :data:`damage`) says."""
    events = doc.get("traceEvents")
    kind, *a = d
    if kind == "unit":
        doc["displayTimeUnit"] = a[0]
    elif kind == "shuffle":
        rnd.shuffle(events)
    elif kind == "junk":
        for _ in range(max(1, int(a[0] * len(events)))):
            events.insert(rnd.randrange(len(events) + 1), rnd.choice([None, 5, "x", [], {}, {"ph": "X"}]))
    elif kind in ("drop", "duplicate"):
        which, share = KINDS[a[0]], a[1]
        out = []
        for e in events:
            hit = isinstance(e, dict) and which(e) and rnd.random() < share
            out += [] if hit and kind == "drop" else [e, dict(e)] if hit else [e]
        doc["traceEvents"] = out
    elif kind in ("shift", "scale", "zero durations"):
        _damage_times(events, d)
    elif kind in ("marker number", "relabel"):
        for e in events:
            if not isinstance(e, dict) or rnd.random() >= a[1]:
                continue
            if kind == "marker number" and KINDS["marker"](e):
                e["name"] = f"ProfilerStep#{a[0]}"
            elif kind == "relabel" and e.get("cat") == a[0][0]:
                e["cat"] = a[0][1]
    else:
        _damage_field(events, *a, rnd)


def _damage_field(events: list, field: str, action: str, which: str, share: float, rnd) -> None:
    hits = KINDS[which]
    for e in events:
        if not (isinstance(e, dict) and hits(e) and rnd.random() < share):
            continue
        holder = e.get("args") if field in ARG_FIELDS else e
        if not isinstance(holder, dict):
            continue
        if action == "remove":
            holder.pop(field, None)
        elif field in holder or action != "negative":
            holder[field] = _value(holder.get(field), action)


def damaged_bytes(source: Path, span: tuple, damages: list, gz: bool, cut: float | None, rnd) -> bytes:
    """A damaged copy of a stretch of a real trace, as the bytes of a file (gzipped or not, maybe cut)."""
    doc = window(source, *span)
    for d in damages:
        if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
            apply_damage(doc, d, rnd)
    raw = json.dumps(doc).encode()
    raw = gzip.compress(raw, mtime=0) if gz else raw
    return raw if cut is None else raw[:int(cut * len(raw))]

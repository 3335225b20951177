"""Synthetic Kineto traces of a chosen size with known answers, for ``make bench-analyze``.

A real Kineto trace (the H100 ViT fixture by default) is replicated with
timestamps shifted past the previous copy and correlation / external / flow ids
offset, so every copy is a valid, distinct stretch of the same run and the
answers are known: kernels, launches and GPU busy time scale with the copies.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import msgspec

# The real fixtures beside the checkout (../shared/fixtures), or where TRACEKIT_FIXTURES says.
DEFAULT_FIXTURE = Path(os.environ.get("TRACEKIT_FIXTURES", Path(__file__).resolve().parents[2] / "shared" / "fixtures")) \
    / "h100" / "vit16x6x384_eager.pt.trace.json.gz"
ID_STRIDE = 10_000_000   # larger than any id in the fixture
GAP_US = 1000.0          # idle time between copies


def _enc(value) -> str:
    return msgspec.json.encode(value).decode().replace("%", "%%")


def _template(e: dict) -> tuple[str, dict]:
    """The event as Kineto lays it out (libkineto output_json.cpp: header keys on one
    line, ts/dur on the next, args one block), with %-placeholders for the values
    each copy shifts; and those values in this copy."""
    base = {}

    def val(key, value, slot):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            base[slot] = value
            return f"%({slot}).3f" if slot == "ts" else f"%({slot})d"
        return _enc(value)

    head = ", ".join(f'{_enc(k)}: ' + (val(k, v, "id") if k == "id" else _enc(v))
                     for k, v in e.items() if k not in ("ts", "dur", "args"))
    lines = ["  {", f"    {head},"]
    times = [f'"ts": {val("ts", e["ts"], "ts")}'] if "ts" in e else []
    times += [f'"dur": {_enc(e["dur"])}'] if "dur" in e else []
    args = e.get("args")
    if times:
        lines.append("    " + ", ".join(times) + ("," if args is not None else ""))
    else:
        lines[-1] = lines[-1].rstrip(",")
    if args is not None:
        slots = {"correlation": "corr", "External id": "ext"}
        body = ", ".join(f'{_enc(k)}: ' + (val(k, v, slots[k]) if k in slots else _enc(v)) for k, v in args.items())
        lines += ['    "args": {', f"      {body}", "    }"]
    lines.append("  }")
    return "\n".join(lines), base


def synthesize(fixture: Path, target_bytes: int, out: Path) -> dict:
    """Write ``out``: the fixture's events repeated until the file reaches ``target_bytes``.

    Events are written in Kineto's own layout (several lines an event), so the
    bytes per event match real traces.

    Returns:
        {"path", "bytes", "copies", "events", "kernels"}: what was written and
        the kernel count analysis must find.
    """
    doc = msgspec.json.decode(gzip.decompress(fixture.read_bytes()) if fixture.suffix == ".gz"
                              else fixture.read_bytes())
    events = doc.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    body = [_template(e) for e in events if e.get("ph") != "M"]
    ts = [b["ts"] for _, b in body if "ts" in b]
    shift = max(ts) - min(ts) + GAP_US
    kernels = sum(1 for e in events if e.get("cat") == "kernel")
    head = msgspec.json.encode(doc)[:-1].decode() + ', "traceEvents": [\n'
    copies = n_events = 0
    with open(out, "w") as f:
        f.write(head + ",\n".join(tpl % b for tpl, b in map(_template, meta)))
        written = f.tell()
        while written < target_bytes:
            offset = {"ts": copies * shift, "id": copies * ID_STRIDE, "corr": copies * ID_STRIDE,
                      "ext": copies * ID_STRIDE}
            text = ",\n" + ",\n".join(tpl % {k: v + offset[k] for k, v in b.items()} for tpl, b in body)
            f.write(text)
            written += len(text)
            copies += 1
            n_events += len(body)
        f.write("\n]}\n")
    return {"path": str(out), "bytes": out.stat().st_size, "copies": copies,
            "events": n_events + len(meta), "kernels": kernels * copies}

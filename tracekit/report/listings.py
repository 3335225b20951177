"""The lists ``tracekit models`` and ``tracekit backends`` print (``--json`` prints their rows
as they are): :func:`model_lines` of :func:`tracekit.models.catalog`'s rows, :func:`backend_lines`
of :func:`tracekit.backends.listing`'s."""

from __future__ import annotations

HEADINGS = {"built-in": "built-in models:", "library": "library models (random weights, nothing downloaded):",
            "workload file": "workload functions ({folder}/*.py):"}


def model_lines(rows: list[dict], workload_folder: str) -> list[str]:
    """Each kind of model under its heading (built-in, library, workload file: the functions of
    ``workload_folder``), one line a model: name, default batch (and sequence), description, and
    in brackets what is missing to use it or where it comes from (library and version, file); a
    model that cannot be used, its problem."""
    out = []
    for kind, heading in HEADINGS.items():
        out.append(heading.format(folder=workload_folder))
        for r in (r for r in rows if r["kind"] == kind):
            if "problem" in r:
                out.append(f"  {r['name']:<20} cannot be used: {r['problem']}")
                continue
            src = r["source"]
            where = {"library": f"{src.get('library')} {src.get('version', '')}".strip(),
                     "workload file": f"{src.get('file', '')}"}.get(kind, "")
            size = f"batch {r['batch']:<4}" + (f" seq {r['seq']:<4}" if r.get("seq") else "")
            out.append(f"  {r['name']:<20} {size} {r['description']}"
                       + (f"  [{r['missing']}]" if r.get("missing") else f"  [{where}]" if where else ""))
    return out


def backend_lines(rows: list[dict]) -> list[str]:
    """Per backend mode: its name, available or not and its description; its phases and why it is
    unavailable; what it does differently on this machine (``here:``)."""
    out = []
    for r in rows:
        out.append(f"{r['mode']:<27} {'available' if r['available'] else 'unavailable'}  {r['description']}")
        out.append(f"{'':<27} phases: {', '.join(r['phases'])}" + (f"; {r['reason']}" if r["reason"] else ""))
        if r["note"]:
            out.append(f"{'':<27} here: {r['note']}")
    return out

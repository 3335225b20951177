"""`tracekit models` and `tracekit backends`: what can run."""

from __future__ import annotations

import json

import click

from tracekit.cli.group import main


@main.command("models")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_models(as_json) -> None:
    """List the models: built-in families, library prefixes (hf:, timm:,
    torchvision:, with whether each is installed), and the workload functions
    of the files in workloads/ ($TRACEKIT_WORKLOADS), each with its source."""
    from tracekit import models

    rows = models.catalog()
    if as_json:
        click.echo(json.dumps(rows, default=str))
        return
    headings = {"built-in": "built-in models:", "library": "library models (random weights, nothing downloaded):",
                "workload file": f"workload functions ({models.workload_files.folder()}/*.py):"}
    for kind, heading in headings.items():
        click.echo(heading)
        for r in (r for r in rows if r["kind"] == kind):
            if "problem" in r:
                click.echo(f"  {r['name']:<20} cannot be used: {r['problem']}")
                continue
            src = r["source"]
            where = {"library": f"{src.get('library')} {src.get('version', '')}".strip(),
                     "workload file": f"{src.get('file', '')}"}.get(kind, "")
            size = f"batch {r['batch']:<4}" + (f" seq {r['seq']:<4}" if r.get("seq") else "")
            click.echo(f"  {r['name']:<20} {size} {r['description']}"
                       + (f"  [{r['missing']}]" if r.get("missing") else f"  [{where}]" if where else ""))


@main.command("backends")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_backends(as_json) -> None:
    """List the backend modes (--mode of trace and suites): what each runs, its phases,
    whether it can run on this machine (and why not, with how to install what is
    missing), and what it does differently here (no CUDA graphs on the CPU)."""
    from tracekit import backends
    from tracekit.capture.environment import default_device

    rows = backends.listing(default_device())
    if as_json:
        click.echo(json.dumps(rows))
        return
    for r in rows:
        click.echo(f"{r['mode']:<27} {'available' if r['available'] else 'unavailable'}  {r['description']}")
        click.echo(f"{'':<27} phases: {', '.join(r['phases'])}" + (f"; {r['reason']}" if r["reason"] else ""))
        if r["note"]:
            click.echo(f"{'':<27} here: {r['note']}")

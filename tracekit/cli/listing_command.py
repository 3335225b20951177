"""`tracekit models` and `tracekit backends`: what can run (the lines: :mod:`tracekit.report.listings`)."""

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
    from tracekit.report.listings import model_lines

    rows = models.catalog()
    if as_json:
        click.echo(json.dumps(rows, default=str))
        return
    for line in model_lines(rows, str(models.workload_files.folder())):
        click.echo(line)


@main.command("backends")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_backends(as_json) -> None:
    """List the backend modes (--mode of trace and suites): what each runs, its phases,
    whether it can run on this machine (and why not, with how to install what is
    missing), and what it does differently here (no CUDA graphs on the CPU)."""
    from tracekit import backends
    from tracekit.capture.environment import default_device
    from tracekit.report.listings import backend_lines

    rows = backends.listing(default_device())
    if as_json:
        click.echo(json.dumps(rows))
        return
    for line in backend_lines(rows):
        click.echo(line)

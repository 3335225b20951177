"""`tracekit models` and `tracekit backends` (alias `modes`): what can run."""

from __future__ import annotations

import click

from tracekit.cli import main
from tracekit.spec import PHASES


@main.command("models")
def list_models() -> None:
    """List the workload families and their name patterns."""
    from tracekit import models

    for key, fam in models.FAMILIES.items():
        click.echo(f"{fam.example:<14} batch {fam.default_batch:<3} {fam.description}")


@main.command("backends")
def list_backends() -> None:
    """List backend modes, whether each can run here (and why not), and their phases."""
    from tracekit import backends
    from tracekit.environment import default_device
    from tracekit.spec import RunSpec

    spec = RunSpec(model="mlp", device=default_device())
    for name, b in backends.BACKENDS.items():
        reason = backends.why_not(b, spec)
        click.echo(f"{name:<27} {'available' if not reason else 'unavailable'}  {b.description}")
        click.echo(f"{'':<27} phases: {', '.join(p for p in PHASES if p in b.phases)}"
                   + (f"; {reason}" if reason else ""))


main.add_command(list_backends, "modes")

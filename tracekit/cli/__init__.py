"""The ``tracekit`` command line (click). Each command parses options, calls one
library function and prints; everything here is callable from Python too.

One module per verb (as memray's ``commands/``): trace, analyze (and compare),
bench, counters, diff, whatif, listing (models, backends); each adds its command to
the group :func:`tracekit.cli.group.main` at import, and the imports below load them.
Adding a verb is writing its module and adding it to that import line.
"""

from __future__ import annotations

import os
import sys

from tracekit.cli import (  # noqa: F401 - each adds its verb
    analyze_command,
    bench_command,
    counters_command,
    diff_command,
    listing_command,
    trace_command,
    whatif_command,
)
from tracekit.cli.group import main

__all__ = ["main", "run"]

# Commands that only read files and write reports. Once one has returned (its files written and
# closed, its worker processes and any Dask cluster shut down), the console script ends the process
# at once instead of tearing the interpreter down, which frees every table, object and module one by
# one: 0.08 s of the 1.0 s `tracekit analyze` of a 100 MB trace. mypy does the same (its --fast-exit,
# on by default). Called in-process (click's CliRunner, the tests), main() ends as usual.
FAST_EXIT = frozenset({"analyze", "compare", "diff"})


def run() -> None:
    """The ``tracekit`` console script and ``python -m tracekit``: :func:`main`; after a
    ``FAST_EXIT`` command, stdout and stderr are flushed and the process exits with the
    command's exit code without the interpreter's clean-up (``os._exit``)."""
    state: dict = {}
    try:
        main(obj=state)
    except SystemExit as exc:
        if state.get("command") not in FAST_EXIT:
            raise
        code = exc.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:  # a closed pipe (| head): nothing more can be said
            pass
        os._exit(code or 0)

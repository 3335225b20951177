"""The ``tracekit`` command line (click). Each command parses options, calls one
library function and prints; everything here is callable from Python too.

One module per verb (as memray's ``commands/``): trace, analyze (and compare),
bench, counters, diff, listing (models, backends); each adds its command to
:func:`main` at import, and the imports at the end of this file load them.
"""

from __future__ import annotations

import os
import sys

import click

from tracekit import __version__
from tracekit.errors import ExitCode


class UserError(click.ClickException):
    """A problem with the user's input: one line on stderr, no traceback, and the
    exit code of its kind (:class:`tracekit.errors.ExitCode`)."""

    def __init__(self, message: str, code: int = ExitCode.USAGE):
        super().__init__(message)
        self.exit_code = int(code)


class _Main(click.Group):
    """The command group; an unexpected exception becomes one line and exit code
    INTERNAL (70), with the traceback only under ``--debug`` (the exit code stays 70)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if ctx.obj and ctx.obj.get("debug"):
                import traceback

                click.echo(traceback.format_exc(), err=True, nl=False)
            click.echo(f"tracekit: internal error: {type(exc).__name__}: {exc}"
                       + ("" if ctx.obj and ctx.obj.get("debug") else " (rerun with --debug for the traceback)"),
                       err=True)
            ctx.exit(ExitCode.INTERNAL)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracekit")
@click.option("--debug", is_flag=True, help="Show Python tracebacks of internal errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Profiler-driven analysis of PyTorch performance.

    \b
    Run a workload under torch.profiler and write its trace:
      tracekit trace --model vit16x6x384 --mode reduce-overhead
    Measure kernels, launches, GPU busy and idle time from the traces, compare
    the modes of each workload, write reports/ (summary.md, index.html, plots):
      tracekit analyze traces/
    Compare chosen runs:
      tracekit compare traces/vit16x6x384/eager traces/vit16x6x384/reduce-overhead
    Where the time went between two runs, module by module:
      tracekit diff traces/vit16x6x384/eager traces/vit16x6x384/default

    \b
    Exit codes: 0 ok; 1 a run failed (see its run.json); 2 usage; 3 path not
    found; 4 no traces; 5 corrupt gzip; 6 truncated JSON; 7 not JSON; 8 not a
    PyTorch profiler trace; 9 bad trace content; 10 analyzed, but some files or
    events were bad (listed); 11 ncu missing or unable to profile; 70 internal error;
    130 a bench interrupted (Ctrl-C, SIGTERM; run it again to go on).
    """
    ctx.ensure_object(dict).update(debug=debug, command=ctx.invoked_subcommand)


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


def report_options(command):
    """The options of a command that writes an analysis report: how its files refer to
    plots and traces (passed to :func:`tracekit.report.write_reports` as ``html_plots``
    and ``link_traces``)."""
    command = click.option("--link-traces/--no-link-traces", default=True, show_default=True,
                           help="Link each run of summary.md and index.html to its trace file; "
                                "--no-link-traces for a report kept or sent without its traces.")(command)
    return click.option("--html-plots", type=click.Choice(["inline", "link"]), default="inline", show_default=True,
                        help="index.html with its plots inline (one self-contained file) or linked to the "
                             "PNGs in plots/ (each plot stored once, as in a repository).")(command)


# The sequence length of a run's token inputs (RunSpec.seq), for the commands that run a workload.
seq_option = click.option("--seq", type=click.IntRange(min=1), default=None,
                          help="Sequence length of token inputs (hf: text models, workload functions with a seq "
                          "parameter) [default: the model's, 128 for hf:].")


# The verbs; each module adds its command(s) to main.
from tracekit.cli import analyze, bench, counters, diff, listing, trace  # noqa: E402,F401,I001

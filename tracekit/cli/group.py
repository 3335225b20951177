"""The ``tracekit`` command group (click) and what its verbs share: the group
:func:`main` (its error handling: one line and an exit code, never a traceback),
:class:`UserError`, :class:`OutFolder` and the options several verbs take.

The verb modules of :mod:`tracekit.cli` import it and add their commands to
:func:`main`; it imports none of them (so there is no import circle)."""

from __future__ import annotations

import signal
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import click

from tracekit import __version__
from tracekit.capture import quiet
from tracekit.errors import ExitCode


class UserError(click.ClickException):
    """A problem with the user's input: one line on stderr, no traceback, and the
    exit code of its kind (:class:`tracekit.errors.ExitCode`)."""

    def __init__(self, message: str, code: int = ExitCode.USAGE):
        super().__init__(message)
        self.exit_code = int(code)


class OutFolder(click.Path):
    """A folder a command writes into. It need not exist (it is made when written to), but it
    must be one that can be: not a file nor under one, not on a read-only file system, not
    where the user may not write. Checked when the options are read, before any work and
    without creating anything; a bad one is one line and a usage error (exit code 2)."""

    def __init__(self):
        super().__init__(file_okay=False, path_type=Path)

    def convert(self, value, param, ctx):
        path = Path(value)
        option = f"{param.opts[0]} {path}" if param is not None and param.opts else str(path)
        existing = path.absolute()
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise UserError(f"{option}: {existing} is a file, not a folder")
        try:
            tempfile.TemporaryFile(dir=existing).close()
        except OSError as exc:
            raise UserError(f"{option}: cannot write in {existing}: {exc.strerror or exc}") from None
        return path


@contextmanager
def _sigterm_as_ctrl_c():
    """SIGTERM (kill, a job scheduler, a time limit) takes the same path as Ctrl-C (KeyboardInterrupt),
    so a run records it and removes its temporary files, and a bench keeps its finished cells."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Main(click.Group):
    """The command group; an unexpected exception becomes one line and exit code
    INTERNAL (70), with the traceback only under ``--debug`` (the exit code stays 70); PyTorch
    missing (the commands that run workloads import it) is one line and exit code NO_TORCH (12);
    Ctrl-C or SIGTERM is one line (where it stopped) and exit code INTERRUPTED (130)."""

    def invoke(self, ctx: click.Context):
        try:
            with _sigterm_as_ctrl_c():
                return super().invoke(ctx)
        except KeyboardInterrupt as exc:  # a run or a bench says where it stopped and what it kept
            click.echo(f"tracekit {ctx.invoked_subcommand}: {exc or 'interrupted'}", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == "torch":
                raise UserError(f"tracekit {ctx.invoked_subcommand} needs PyTorch, which is not installed here: "
                                "`make setup`, or pip install torch (analyze, compare and diff work without it)",
                                ExitCode.NO_TORCH) from None
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
@click.option("-v", "--verbose", is_flag=True, help="Show other packages' warnings (torch's, torchao's, "
              "transformers'...), hidden by default; errors always show.")
@click.pass_context
def main(ctx: click.Context, debug: bool, verbose: bool) -> None:
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
    events were bad (listed); 11 ncu missing or unable to profile; 12 PyTorch not
    installed (trace, bench, counters, models, backends); 70 internal error; 130
    interrupted (Ctrl-C, SIGTERM; a run's run.json says so, a bench goes on when
    run again).
    """
    ctx.ensure_object(dict).update(debug=debug, command=ctx.invoked_subcommand)
    ctx.with_resource(quiet.third_party_warnings(show=verbose))


def show_tracebacks(failures: list[tuple[str, str, str, str]]) -> None:
    """Under ``--debug``, the traceback of each analysis that raised (``failures``: as
    :attr:`tracekit.analysis.runs.Analysis.failures`), on stderr."""
    if (click.get_current_context().obj or {}).get("debug"):
        for path, analysis, _, trace in failures:
            click.echo(f"--debug: {analysis} of {path or 'the runs'}:\n{trace}", err=True)


def exit_if_partial(results: list, failed_annotations: int = 0) -> None:
    """The end of a verb that analyzed and reported (``analyze``, ``compare``, ``bench``): exit PARTIAL
    (10) when an analysis raised (a bug in tracekit: its line on stderr, the report holding everything
    else; the tracebacks under ``--debug``), some files were unreadable or damaged, or
    ``failed_annotations`` traces got no annotated copy for an internal error; else return (exit 0).
    ``results``: the :class:`tracekit.analysis.result.Result` of each analysis reported."""
    failures = [f for r in results for f in r.failures]
    show_tracebacks(failures)
    for path, analysis, reason, _ in failures:
        click.echo(f"tracekit: internal error: {path or 'the runs'}: {analysis} failed: {reason}", err=True)
    if failures:
        click.echo(f"tracekit: {len(failures)} analysis failure(s), a bug in tracekit: the report holds everything "
                   "else (rerun with --debug for the tracebacks)", err=True)
    errors = sum(len(r.errors) for r in results)
    damaged = sum(int((r.runs["trace_problems"].fillna(0) > 0).sum()) for r in results if "trace_problems" in r.runs)
    if errors or damaged:
        click.echo(f"warning: {errors} unreadable file(s), {damaged} damaged trace(s) (listed above and in the report)",
                   err=True)
    if failures or errors or damaged or failed_annotations:
        sys.exit(ExitCode.PARTIAL)


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


# Every column of the terminal's tables, names in full, whatever the width (tracekit.report.fit).
wide_option = click.option("--wide", is_flag=True,
                           help="Print every column of the tables and every name in full, however wide (by default "
                                "tables fit COLUMNS, or the terminal, or 100 columns).")


# The sequence length of a run's token inputs (RunSpec.seq), for the commands that run a workload.
seq_option = click.option("--seq", type=click.IntRange(min=1), default=None,
                          help="Sequence length of token inputs (hf: text models, workload functions with a seq "
                          "parameter) [default: the model's, 128 for hf:].")

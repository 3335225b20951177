"""`tracekit whatif`: predict a run's iteration latency after an edit, from its trace alone
(:func:`tracekit.whatif`; printed by :mod:`tracekit.report.formats.whatif`)."""

from __future__ import annotations

import json
import sys

import click

from tracekit.cli.group import UserError, main, show_tracebacks
from tracekit.errors import ExitCode


@main.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--cuda-graphs", is_flag=True, help="Each iteration replayed as one CUDA graph: one launch, "
              "the host free, each kernel after the previous one with the replay's gap; where the run traced "
              "its step's capture path (an eager tracekit run whose step runs other ops when told it is "
              "captured), with that path's kernels.")
@click.option("--faster", "faster", multiple=True, metavar="PATTERN=FACTOR",
              help="GPU ops of a kernel class, kernel, op or module matching PATTERN take 1/FACTOR of their "
                   "time, e.g. 'blocks.*.mlp=2', 'gemm=1.5', 'aten::softmax=3' (repeatable).")
@click.option("--host-faster", type=click.FloatRange(min=0, min_open=True), default=None, metavar="FACTOR",
              help="Every host call and the CPU time between calls FACTOR times shorter.")
@click.option("--overlap-comm", is_flag=True, help="Compute no longer waits for gradient reductions but the "
              "optimizer step, which reads them (an iteration still ends after its collectives).")
@click.option("--balance-ranks", is_flag=True, help="Each rank's host and GPU work beyond the other ranks', per "
              "iteration, taken away.")
@click.option("--annotation", default=None, metavar="NAME",
              help="The CPU op or annotation that marks an iteration [default: ProfilerStep#N].")
@click.option("--json", "as_json", is_flag=True, help="Print the prediction as one JSON object.")
def whatif(path, cuda_graphs, faster, host_faster, overlap_comm, balance_ranks, annotation, as_json) -> None:
    """Predict the iteration latency of the run at PATH (a run folder or a trace file) after
    the edits, from its trace: the dependency graph of its host calls and GPU ops, calibrated
    to the run's unprofiled latency (run.json), re-timed with the edits.

    \b
    Examples:
      tracekit whatif traces/vit16x6x384/eager --cuda-graphs
      tracekit whatif traces/vit16x6x384/eager --faster 'blocks.*.mlp=2' --json

    Without run.json the trace is modelled as profiled (uncalibrated) and the output says
    so. Each trace's integrity is printed as tracekit analyze checks it. A trace with no GPU ops
    or launch calls, or a single launch, gets one line saying what cannot be predicted (exit 0);
    a --faster pattern that matches nothing, or an --annotation not in the trace, is a usage
    error (exit 2); a trace the model fails on says why (exit 13). A folder with a trace that
    cannot be read, a job lacking a rank's trace, or a trace whose events were damaged (mended or
    dropped), is predicted from what it has, names the rest, and exits 10.
    """
    from tracekit import api
    from tracekit.analysis.critical_path import AnnotationError
    from tracekit.analysis.critical_path.edits import EditError
    from tracekit.analysis.metrics.integrity import damaged
    from tracekit.io import jsonable
    from tracekit.report import print_reports
    from tracekit.report.worded import worded
    from tracekit.trace import TraceError

    if not (cuda_graphs or faster or host_faster or overlap_comm or balance_ranks):
        raise UserError("no edit: give --cuda-graphs, --faster PATTERN=FACTOR, --host-faster FACTOR, "
                        "--overlap-comm or --balance-ranks", ExitCode.USAGE)
    try:
        prediction = api.whatif(path, cuda_graphs=cuda_graphs, faster=list(faster), host_faster=host_faster,
                                overlap_comm=overlap_comm, balance_ranks=balance_ranks, annotation=annotation)
    except EditError as exc:
        raise UserError(str(exc), ExitCode.USAGE) from None
    except AnnotationError as exc:
        raise UserError(f"{path}: {exc}", ExitCode.USAGE) from None
    except TraceError as exc:
        raise UserError(str(exc), exc.code) from None
    if as_json:
        click.echo(json.dumps(jsonable(worded(prediction).to_dict())))
    else:
        print_reports(prediction)
    if prediction.failure:
        show_tracebacks([(path, "whatif", prediction.failure, prediction.failure_traceback)])
        sys.exit(ExitCode.CANNOT_MODEL)
    if prediction.ranks_missing or prediction.unreadable or damaged(prediction.integrity):
        sys.exit(ExitCode.PARTIAL)

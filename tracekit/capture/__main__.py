"""The entry point of every process tracekit starts: ``python -m tracekit.capture '<json>'``,
the JSON a :class:`tracekit.capture.child.ChildJob`. Exit status: 0 when the run (rank,
workload) ended ok, 1 when not (its run.json says why), 2 on a job or spec that is not valid."""

from __future__ import annotations

import sys

from tracekit import backends, models
from tracekit.capture import quiet
from tracekit.capture.child import ChildJob, die_with_parent


def main(argv: list[str] | None = None) -> int:
    """Run the job given as the one argument; return the exit status (see the module docstring)."""
    argv = sys.argv[1:] if argv is None else argv
    quiet.from_environment()
    try:
        if len(argv) != 1:
            raise ValueError("give one argument, the child job as JSON")
        job = ChildJob.from_json(argv[0])
    except ValueError as exc:
        print(f"error: python -m tracekit.capture: {exc}", file=sys.stderr)
        return 2
    if job.parent is not None:
        die_with_parent(job.parent)
    # each task imports what it runs, and only that (a rank needs no pandas)
    try:
        if job.task == "rank":
            from tracekit.capture import ranks
            ranks.rank(job)   # ends the process
        if job.task == "repeat":
            from tracekit.capture import repeats
            ok = repeats.process(job).status == "ok"
        elif job.task == "counters":
            from tracekit.counters import workload
            ok = workload.run(job).status == "ok"
        else:
            from tracekit.capture import runner
            ok = runner.run(job.spec, job.out).status == "ok"
    except (models.UnknownModel, backends.UnknownMode, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Exit codes of the ``tracekit`` command: one per kind of failure, documented in README; and
the interruption of a run or a bench, which ends the command with ``INTERRUPTED``."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    RUN_FAILED = 1      # `tracekit trace`: the run ended with status oom/failed/unavailable (see run.json)
    USAGE = 2           # bad options, unknown model / mode / suite keys
    NOT_FOUND = 3       # the path does not exist
    NO_TRACES = 4       # a folder with no trace files in it
    CORRUPT_GZIP = 5    # a .gz that is corrupt or cut short
    TRUNCATED = 6       # JSON cut off mid-write
    NOT_JSON = 7        # not JSON at all (or empty)
    NOT_A_TRACE = 8     # valid JSON but not a PyTorch profiler trace (another tool's, no traceEvents)
    BAD_CONTENT = 9     # a trace whose events have the wrong types throughout
    PARTIAL = 10        # analyzed, but some files were unreadable or some events were dropped (listed)
    PROFILER = 11       # `tracekit counters`: ncu (Nsight Compute) missing, or it could not profile
    NO_TORCH = 12       # a command that runs workloads (trace, bench, counters, models, backends) without PyTorch
    CANNOT_MODEL = 13   # `tracekit whatif`: the trace's dependency graph could not be modelled (the reason printed)
    INTERNAL = 70       # a bug in tracekit: rerun with --debug for the traceback
    INTERRUPTED = 130   # Ctrl-C or SIGTERM (128 + SIGINT, as shells report it): run.json says "interrupted"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, which the CLI takes as Ctrl-C) stopped a run or a bench; the message
    says where, and what was kept. A KeyboardInterrupt, so a script calling tracekit stops as
    on any Ctrl-C."""

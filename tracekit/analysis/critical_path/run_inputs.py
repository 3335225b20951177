"""What a prediction reads from a run folder or a trace file: the traces (one per rank of a job), the
run's manifest, the traces that could not be read and the ranks the job lacks."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracekit.manifest import Manifest
from tracekit.trace.reader import EventTables


@dataclass
class RunInputs:
    """ranks: (rank, tables) of each readable trace, by rank (a trace of no rank is numbered by its
    place among the files); manifest: the run's run.json (None without one); unreadable: (path,
    problem, exit code) of each trace that could not be read; world_size: the ranks the job should
    have (run.json ``distributed.world_size``, else the largest ``distributedInfo.world_size`` of
    its traces; None for neither); missing: the ranks below world_size with no readable trace, or
    without a world size the ranks of the unreadable traces' file names."""

    ranks: list[tuple[int, EventTables]]
    manifest: Manifest | None
    unreadable: list[tuple[str, str, int]] = field(default_factory=list)
    world_size: int | None = None
    missing: list[int] = field(default_factory=list)


def run_inputs(path) -> RunInputs:
    """The traces of a run folder (one per rank) or a trace file, and the run's manifest (the
    folder's or the file's folder's ``run.json``; None without one). A trace that cannot be read
    is listed in ``unreadable`` and its rank in ``missing`` (one tracekit fails on too: its problem
    "internal error: ...", code INTERNAL); the others are read all the same.

    Raises:
        tracekit.trace.TraceError: the path does not exist (``code`` 3), holds no trace (4), or
            no trace of it can be read (the first one's problem and code).
    """
    from tracekit.analysis.distributed import job
    from tracekit.errors import ExitCode
    from tracekit.trace import TraceError, load
    from tracekit.trace.discover import existing
    from tracekit.trace.reader import trace_files

    path = existing(path)
    folder = path.is_dir()
    files = trace_files(path) if folder else [path]
    if not files:
        raise TraceError(path, "no trace files (*.pt.trace.json[.gz]) in this folder", ExitCode.NO_TRACES)
    ranks, unreadable, failed, first = [], [], [], None
    for i, f in enumerate(files):
        try:
            tables = load(f)
        except Exception as exc:  # noqa: BLE001 - a file tracekit fails on is that file's problem only
            bad = exc if isinstance(exc, TraceError) else TraceError(
                f, f"internal error: {type(exc).__name__}: {exc}", ExitCode.INTERNAL)
            first = first or bad
            unreadable.append((str(f), bad.problem, int(bad.code)))
            failed.append(job.rank_of({}, f))
            continue
        rank = job.rank_of(tables.meta, f)
        ranks.append((i if rank is None else rank, tables))
    if not ranks:
        raise first
    manifest = Manifest.read(path if folder else path.parent)
    sizes = [(t.meta.get("distributed") or {}).get("world_size") for _, t in ranks]
    world = (manifest.distributed.world_size if manifest is not None and manifest.distributed else None) or \
        max((int(s) for s in sizes if isinstance(s, (int, float))), default=None)
    present = {r for r, _ in ranks}
    missing = sorted(set(range(world)) - present) if world and world > 1 else sorted(
        {r for r in failed if r is not None} - present)
    return RunInputs(sorted(ranks, key=lambda rt: rt[0]), manifest, unreadable, world, missing)

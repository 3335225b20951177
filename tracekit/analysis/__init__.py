"""Traces (and their run.json) in, metric tables out: pure functions, no torch.

Entry points:

* :mod:`.runs`: ``analyze(path, options) -> Analysis``, every run under a path: one row per trace
  file (or per run without one), the per-trace tables over all of them, the analyses across runs;
  each file analyzed on its own (:mod:`.trace_file`), here, in a worker process per core or
  on a Dask cluster (:mod:`.dask_cluster`); the options as one object (:mod:`.options`).
* :mod:`.trace_analysis`: ``analyze_trace(tables, options, run)``, every registered analysis of
  one trace (:mod:`.registry`: one per module of the sub-packages below), each isolated.
* :mod:`.result`: ``Result``, an analysis and its comparison with a baseline mode: what every
  report renders and :func:`tracekit.analyze` returns.
* :mod:`.annotation_tracks`: the tracks ``tracekit analyze --annotate`` adds to a trace.

The analyses, one sub-package per job: :mod:`.metrics` (per trace), :mod:`.attribution` (each GPU
op's module and op, diffs by module), :mod:`.distributed` (collectives, ranks, jobs),
:mod:`.critical_path` (the dependency graph of an iteration, what-ifs), :mod:`.comparison`
(across runs), :mod:`.counters` (Nsight Compute's hardware counters).
"""

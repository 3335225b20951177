"""tracekit: profiler-driven analysis of PyTorch performance (see README.md).

The Python API (imported on first use, so ``tracekit analyze`` and the trace layer never load torch):

* :func:`tracekit.profile` runs a module you built in each mode, as ``tracekit trace`` does
  (:mod:`tracekit.api`);
* :func:`tracekit.analyze` returns the tables of ``tracekit analyze`` as DataFrames (:mod:`tracekit.api`),
  its options as one :class:`tracekit.AnalysisOptions` (:mod:`tracekit.analysis.options`);
* :func:`tracekit.annotate` writes a copy of each trace with tracekit's tracks, as
  ``tracekit analyze --annotate`` does (:mod:`tracekit.api`);
* :func:`tracekit.diff` compares two runs module by module, as ``tracekit diff`` does (:mod:`tracekit.api`);
* :func:`tracekit.whatif` predicts a run's iteration after an edit (CUDA graphs, a faster module...), as
  ``tracekit whatif`` does (:mod:`tracekit.api`);
* :func:`tracekit.record` records your own training or serving loop (:mod:`tracekit.capture.loop`);
* :func:`tracekit.workload` marks a function of a workload file and gives it metadata
  (:mod:`tracekit.models.workload_files`).
"""

__version__ = "0.1.0"

_LAZY = {"profile": "tracekit.api", "analyze": "tracekit.api", "diff": "tracekit.api", "annotate": "tracekit.api",
         "whatif": "tracekit.api", "record": "tracekit.capture.loop", "workload": "tracekit.models.workload_files",
         "AnalysisOptions": "tracekit.analysis.options"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")

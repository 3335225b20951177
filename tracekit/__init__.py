"""tracekit: profiler-driven analysis of PyTorch performance (see README.md).

The Python API (imported on first use, so ``tracekit analyze`` and the trace layer never load torch):

* :func:`tracekit.workload` marks a function of a workload file and gives it metadata.
"""

__version__ = "0.1.0"

_LAZY = {"workload": "tracekit.models.workloads"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tracekit' has no attribute {name!r}")

"""tracekit: profiler-driven analysis of PyTorch performance (see README.md)."""

__version__ = "0.1.0"

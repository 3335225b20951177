"""The report formats, one module each (see tracekit.report.base); all imported by tracekit.report."""

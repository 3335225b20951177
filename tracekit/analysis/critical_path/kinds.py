"""The kinds of a dependency graph's nodes and edges (:mod:`tracekit.analysis.critical_path.graph`)."""

HOST, GPU = 0, 1
# Edge kinds: start edges (the source's end, or start, plus the lag bounds the node's start),
# then end edges (they bound the node's end).
CPU, HANDOFF, LAUNCH, STREAM, WAIT, SYNC, COLLECTIVE = range(7)
EDGE_KINDS = ("cpu", "handoff", "launch", "stream", "wait", "sync", "collective")
COMM = "communication"   # the kernel class of collectives (tracekit.analysis.metrics.kernels)

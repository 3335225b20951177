"""Across runs: each run against the baseline run of its workload, and how far that can be trusted.

* :mod:`.workloads`: which runs are comparable (a workload: runs of one model, or of one op
  for a study suite) and the baseline run of each.
* :mod:`.compare`: the comparison engine: speedup with its range, Δ GPU busy + Δ idle,
  which dominates, what the report's warnings rest on; profiler overhead.
* :mod:`.trust`: inconclusive speedups, timers apart, doubtful timing.
* :mod:`.suite_comparison`: a study suite's view of the engine's comparison, and its published
  claims checked.
* :mod:`.launch_removal`: how much of reduce-overhead's gain is launch removal alone.
"""

"""Distributed jobs: collectives on each rank, and the ranks of a job judged together.

* :mod:`.collectives`: which GPU ops are communication, one row per collective call on a rank.
* :mod:`.communication`: a rank's communication and computation time, their overlap,
  exposed communication (HolisticTraceAnalysis' definitions).
* :mod:`.stragglers`: collectives matched across ranks: arrival skew, the last rank, the wait.
* :mod:`.job`: the ranks of one run as a job: per-rank table, balance, verdict.
* :mod:`.step_noise`: whether a straggler changes the job's step beyond the run's noise.

A rank's tables are the same per-trace analyses as any trace's; the job analyses take them.
"""

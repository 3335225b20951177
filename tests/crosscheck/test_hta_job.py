"""Per-rank temporal breakdown and communication-computation overlap against HTA 0.5.0.

HolisticTraceAnalysis' ``get_temporal_breakdown`` and ``get_comm_comp_overlap`` run
(through hta_job_run.py) on the folder of the real 2-rank NCCL job in
``../shared/fixtures/dist/``; ours (:func:`tracekit.analysis.metrics.summary.summarize`,
:func:`tracekit.analysis.distributed.communication.breakdown`) on each rank's trace. The
differences, each accounted for here:

* HTA leaves out the last ProfilerStep iteration (hta/common/trace.py,
  ``_filter_irrelevant_gpu_kernels``): ours run on the GPU ops HTA kept, on HTA's
  times (µs since its ``min_ts``), as in test_hta.py.
* HTA takes every event with a ``stream`` arg as GPU work; on these traces that is
  exactly our kernels, memcpys and memsets (asserted).
* HTA types kernels by name (``^nccl.*Kernel`` communication, ``Memcpy``/``Memset``/
  ``Sync`` in the name neither); ours by class (:mod:`tracekit.analysis.metrics.kernels`):
  on these traces both put the same kernels in communication (asserted), and no
  kernel name has Memcpy, Memset or Sync in it (asserted).
* HTA rounds its overlap to 0.01 % (``round(100 * ratio, 2)``).

The timestamps of these traces are whole µs, so HTA's rounding of them changes nothing;
with the same times the figures then agree to the last µs.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tracekit.analysis.distributed import communication
from tracekit.analysis.metrics import kernels
from tracekit.analysis.metrics.summary import summarize
from tracekit.trace import load

pytest.importorskip("hta", reason="HolisticTraceAnalysis is not installed (make setup installs it)")

JOB = "dist/hta-trace-filter-sampled-2rank"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _hta(folder: Path) -> dict:
    env = {**os.environ, "HTA_DISABLE_NS_ROUNDING": "1"}
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("hta_job_run.py")), str(folder)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _on_hta_times(path: Path, origin: float, gpu: list):
    """Our tables on HTA's times, restricted to the GPU ops HTA kept."""
    tables = load(path)
    for name in ("gpu_ops", "host_calls", "cpu_ops", "markers", "comms"):
        df = getattr(tables, name).copy()
        df["ts"] = df["ts"] - origin
        df["end"] = df["ts"] + df["dur"]
        setattr(tables, name, df)
    kept = {(round(ts, 3), stream) for ts, _, stream, cat, _ in gpu if cat in GPU_CATS}
    ops = tables.gpu_ops
    tables.gpu_ops = ops[[k in kept for k in zip(ops["ts"].round(3), ops["stream"])]].reset_index(drop=True)
    assert len(tables.gpu_ops) == len(kept)
    return tables


@pytest.mark.slow
def test_temporal_breakdown_and_overlap_equal_hta_per_rank(fixtures):
    folder = fixtures / JOB
    hta = _hta(folder)
    assert set(hta["ranks"]) == {"0", "1"}
    for path in sorted(folder.glob("*.json.gz")):
        tables = load(path)
        rank = str(tables.meta["distributed"]["rank"])
        theirs = hta["ranks"][rank]
        assert {cat for *_, cat, _ in theirs["gpu"]} <= GPU_CATS          # no extra events taken as GPU ops
        tables = _on_hta_times(path, hta["min_ts"], theirs["gpu"])
        names = pd.Series(tables.gpu_ops.loc[tables.gpu_ops["kind"] == "kernel", "name"].unique())
        assert not names.str.contains("Memcpy|Memset|Sync").any()
        assert set(names[names.map(lambda n: kernels.kernel_class(n) == "communication")]) == \
            set(names[names.map(lambda n: bool(re.match(r"^nccl.*Kernel", n)))])
        ours, comm = summarize(tables), communication.breakdown(tables)
        t = theirs["temporal"]
        assert t["idle_time(us)"] == pytest.approx(ours["idle_us"], abs=1e-6)
        assert t["kernel_time(us)"] == pytest.approx(ours["active_span_us"], abs=1e-6)
        assert t["compute_time(us)"] == pytest.approx(comm["computation_us"], abs=1e-6)
        assert t["non_compute_time(us)"] == pytest.approx(comm["non_compute_us"], abs=1e-6)
        assert theirs["overlap_pctg"] == round(100 * comm["comm_comp_overlap"], 2)
        assert comm["communication_us"] > 0 and 0 < comm["comm_comp_overlap"] < 1


def test_overlap_over_the_whole_traces_counted_microsecond_by_microsecond(fixtures):
    """The whole traces (the figures tracekit reports for the job), against an independent
    count: these traces' times are whole µs, so marking each µs busy or not is exact."""
    import numpy as np

    from tracekit.analysis.runs import analyze

    ranks = analyze(fixtures / JOB).table("ranks").set_index("rank")
    for path in sorted((fixtures / JOB).glob("*.json.gz")):
        tables = load(path)
        k = tables.gpu_ops[tables.gpu_ops["kind"] == "kernel"]
        t0, t1 = int(k["ts"].min()), int(k["end"].max())
        comm, comp = np.zeros(t1 - t0, dtype=bool), np.zeros(t1 - t0, dtype=bool)
        for ts, end, name in zip(k["ts"].astype(int) - t0, k["end"].astype(int) - t0, k["name"]):
            (comm if name.startswith("nccl") else comp)[ts:end] = True
        mine = ranks.loc[tables.meta["distributed"]["rank"]]
        assert (mine["communication_us"], mine["computation_us"]) == (comm.sum(), comp.sum())
        assert mine["comm_comp_overlap"] == (comm & comp).sum() / comm.sum()
        assert mine["exposed_communication_us"] == (comm & ~comp).sum()

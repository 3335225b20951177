"""The costs of a CUDA graph replay on each GPU, for the ``cuda-graphs`` what-if (issue 39).

One JSON file per GPU in ``replay_gpus/`` (next to this module), written by
``benchmarks/replay_probe.py`` on that GPU (:func:`costs_of` derives the file from the probe's
result), keyed by the device name the CUDA runtime reports (``torch.cuda.get_device_name()``, the
name a Kineto trace's ``deviceProperties`` hold). Each holds:

* ``graph_launch_us``, ``per_kernel_us``: the host's time per call of tracekit's ``cudagraphs`` mode
  (the runner's step around the backend's replay: input copy and ``cudaGraphLaunch``), timed as the
  runner times ``host_ms``, for graphs of 1 to 1,024 tiny kernels: the least-squares line through it
  (µs per replay plus µs per kernel of the graph);
* ``replay_gap_us``: the GPU's gap between consecutive kernels of a traced replay (median);
* ``kernel_delta_us``: how much longer a kernel runs in a replay than eager, 0 in the model (the
  prediction was checked with eager's kernel times, issue 30) with the range [0, the probe's tiny
  kernel's replayed less eager median] (or [that, 0] where it is negative): the GPU time a replay
  may add to each of its kernels;
* ``<cost>_range``: [low, high] of each: ``graph_launch_us`` +- the largest residual of the fit (the
  line covers every measured graph size), ``per_kernel_us`` +- two standard errors of its slope,
  ``replay_gap_us`` the gaps' p10-p90 (where the probe recorded no p10, as on the first H200 probe,
  the median less its distance to p90).

A trace whose device has no file takes, for each cost, the largest known (and its range runs from
the least known low to the largest known high); the prediction says so
(:attr:`Replay.measured` False).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

FOLDER = Path(__file__).with_name("replay_gpus")
COSTS = ("graph_launch_us", "per_kernel_us", "replay_gap_us", "kernel_delta_us")


@dataclass(frozen=True)
class Replay:
    """The costs of a CUDA graph replay: graph_launch_us + per_kernel_us x kernels (the host's
    time per replay, µs), replay_gap_us (the GPU's gap between consecutive kernels of a replay),
    kernel_delta_us (added to each replayed GPU op's time), and where they came from: the device
    they are for (None: unknown), whether they were measured on it (False: the largest known),
    measured_on (the GPUs whose files gave them), and ranges (cost -> (low, high) µs; empty: the
    costs as they are)."""

    graph_launch_us: float
    replay_gap_us: float
    device: str | None = None
    per_kernel_us: float = 0.0
    measured: bool = False
    measured_on: tuple[str, ...] = ()
    ranges: dict = field(default_factory=dict)
    kernel_delta_us: float = 0.0

    def at(self, side: int) -> "Replay":
        """The costs at the low (``side`` 0) or high (1) end of their ranges."""
        return replace(self, **{k: self.ranges.get(k, (v, v))[side] for k, v in self.costs().items()})

    def costs(self) -> dict[str, float]:
        """graph_launch_us, per_kernel_us, replay_gap_us, kernel_delta_us."""
        return {k: getattr(self, k) for k in COSTS}

    def to_dict(self) -> dict:
        """device, measured, measured_on (a list), each cost (µs, 3 decimals) and its range."""
        return {"device": self.device, "measured": self.measured, "measured_on": list(self.measured_on),
                **{k: round(v, 3) for k, v in self.costs().items()},
                **{f"{k}_range": [round(x, 3) for x in r] for k, r in self.ranges.items()}}


def slug(device: str) -> str:
    """The file name of a device's costs: ``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3.json``."""
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-") + ".json"


@functools.cache
def table(folder: Path = FOLDER) -> dict[str, dict]:
    """Device name -> its costs record (the files of ``folder``)."""
    out = {}
    for f in sorted(Path(folder).glob("*.json")):
        record = json.loads(f.read_text())
        out[record["device"]] = record
    return out


def costs_of(probe: dict) -> dict:
    """The costs record of a GPU (the module docstring) from ``benchmarks/replay_probe.py``'s result
    (``device``, ``torch``, ``backend``: rows of kernels, input and host_us; ``replay_gap_us``:
    median, p90 and, from this issue on, p10).

    Raises:
        ValueError: the result lacks the cudagraphs mode's timings (``backend``: a probe from before
            they were taken).
    """
    small = [r for r in probe.get("backend") or [] if list(r["input"]) == [16]]
    if len(small) < 3:
        raise ValueError("the probe's result has no timings of the cudagraphs mode (backend): run "
                         "benchmarks/replay_probe.py again")
    x = np.array([r["kernels"] for r in small], float)
    y = np.array([r["host_us"] for r in small], float)
    (slope, intercept), cov = np.polyfit(x, y, 1, cov=True)
    residual = float(np.abs(y - np.polyval((slope, intercept), x)).max())
    slope_se = float(np.sqrt(cov[0, 0]))
    gap = probe["replay_gap_us"]
    gap_low = gap.get("p10", 2 * gap["median"] - gap["p90"])
    delta = float(probe["replay_kernel_us"] - probe["eager_kernel_us"])
    return {"device": probe["device"], "torch": probe.get("torch"), "probe": "benchmarks/replay_probe.py",
            "graph_launch_us": float(intercept), "per_kernel_us": float(slope), "replay_gap_us": float(gap["median"]),
            "graph_launch_us_range": [float(intercept) - residual, float(intercept) + residual],
            "per_kernel_us_range": [float(slope) - 2 * slope_se, float(slope) + 2 * slope_se],
            "replay_gap_us_range": [float(gap_low), float(gap["p90"])], "kernel_delta_us": 0.0,
            "kernel_delta_us_range": [min(delta, 0.0), max(delta, 0.0)]}


def write_costs(probe: dict, folder: Path = FOLDER, source: str | None = None) -> Path:
    """Write the costs record of a probe's result (:func:`costs_of`; ``source``: where the probe's
    whole result is kept) as ``folder/<slug of its device>.json``, the file :func:`table` reads;
    return its path. Raises ValueError as :func:`costs_of` does."""
    record = costs_of(probe)
    if source:
        record["source"] = source
    path = Path(folder) / slug(record["device"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    table.cache_clear()
    return path


def replay_for(device: str | None, known: dict[str, dict] | None = None) -> Replay:
    """The replay costs of ``device``: its own where measured, else the largest known (the module
    docstring). Raises ValueError where no GPU's costs are known."""
    known = table() if known is None else known
    if not known:
        raise ValueError(f"no replay costs in {FOLDER}: run benchmarks/replay_probe.py on a GPU")
    mine = {device: known[device]} if device in known else known
    values = {k: max(c.get(k, 0.0) for c in mine.values()) for k in COSTS}
    ranges = {k: (min(c.get(f"{k}_range", [c.get(k, 0.0)] * 2)[0] for c in mine.values()),
                  max(c.get(f"{k}_range", [c.get(k, 0.0)] * 2)[1] for c in mine.values())) for k in COSTS}
    return Replay(values["graph_launch_us"], values["replay_gap_us"], device, values["per_kernel_us"],
                  device in known, tuple(sorted(mine)), ranges, values["kernel_delta_us"])


def default_replay(ranks, manifest=None) -> Replay:
    """The replay costs of these traces' device (the first trace's ``deviceProperties`` name, else
    run.json's device): :func:`replay_for`."""
    names = [str(t.devices["name"].iloc[0]) for _, t in ranks if len(t.devices)]
    return replay_for(names[0] if names else (manifest.ran_on_name if manifest is not None else None))

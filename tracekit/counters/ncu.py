"""Run a workload under Nsight Compute (``ncu``) and collect tracekit's counters (no torch here).

The command (Nsight Compute CLI documentation, "Command Line Options")::

    ncu --csv --page raw --print-units base --print-kernel-base demangled
        --clock-control none --nvtx --nvtx-include tracekit/ --launch-count N
        --metrics <tracekit's metrics> --log-file <out>/ncu.csv
        python -m tracekit.capture '{"task": "counters", "spec": {...}, ...}'

* The workload (:mod:`tracekit.counters.workload`, started as every child process is,
  :class:`tracekit.capture.child.ChildJob`: the whole spec, as JSON) runs its first call
  and warm-up outside any NVTX range, then each measured iteration inside a push/pop
  range named ``tracekit``; ``--nvtx-include tracekit/`` profiles only kernels launched
  inside it, so compile and warm-up are skipped.
* ``--launch-count N`` stops after N kernels: ncu replays each profiled
  kernel several times (one pass per group of counters), so N bounds the cost.
* ``--clock-control none`` leaves the GPU's clocks as they are in real runs
  (ncu otherwise locks them to base clock).
* Cache control stays ncu's default (``all``: caches flushed before each
  replay pass), so DRAM bytes are those of a kernel that starts cold.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tracekit.analysis.counters import metrics as M
from tracekit.analysis.counters.parse import CountersError, parse

RANGE = "tracekit"
WORKLOAD_FILE = "workload.json"  # the workload's manifest, beside ncu.csv
NCU_ENV = "TRACEKIT_NCU"
DEFAULT_PATHS = ("/usr/local/cuda/bin/ncu",)


class ProfilerError(CountersError):
    """ncu is missing or could not profile; the message says why and what to do, in one line."""


def find() -> str | None:
    """The ncu executable: $TRACEKIT_NCU, else ``ncu`` on PATH, else /usr/local/cuda/bin/ncu; None if none exists."""
    if env := os.environ.get(NCU_ENV):
        return env if shutil.which(env) else None
    return shutil.which("ncu") or next((p for p in DEFAULT_PATHS if shutil.which(p)), None)


def available_metrics(ncu: str) -> set[str] | None:
    """Base names of the metrics the local GPU has (``ncu --query-metrics``), None if ncu cannot tell."""
    try:
        proc = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError):
        return None
    names = {line.split()[0] for line in proc.stdout.splitlines() if line.split() and "__" in line.split()[0]}
    return names or None


def choose_metrics(available: set[str] | None) -> list[str]:
    """The metrics to request: :func:`metrics.always`, plus each optional one whose base name
    the device has (none when ncu could not list them: ncu rejects a name a device lacks)."""
    return M.always() + [m for m in M.optional() if available and M.base_name(m) in available]


def command(ncu: str, metrics: list[str], csv: Path, kernels: int, workload: list[str]) -> list[str]:
    """The ncu command line that profiles up to ``kernels`` kernels of ``workload`` (see the module docstring)."""
    return [ncu, "--csv", "--page", "raw", "--print-units", "base", "--print-kernel-base", "demangled",
            "--clock-control", "none", "--nvtx", "--nvtx-include", f"{RANGE}/", "--launch-count", str(kernels),
            "--metrics", ",".join(metrics), "--log-file", str(csv), *workload]


def _failure(log: str) -> str:
    if "ERR_NVGPUCTRPERM" in log:
        return ("ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM): run as root, or load the "
                "driver with NVreg_RestrictProfilingToAdminUsers=0")
    errors = [line for line in log.splitlines() if "==ERROR==" in line or "Error:" in line]
    tail = errors[-1] if errors else (log.strip().splitlines() or ["no output"])[-1]
    return tail.strip()[:500]


def profile(workload: list[str], directory: Path, kernels: int, log=print) -> Path:
    """Run ``workload`` under ncu, writing ``directory``/ncu.csv (and ncu.out, the processes' output).

    Returns:
        The path of the CSV, checked to parse.

    Raises:
        ProfilerError: no ncu, or ncu/the workload failed or profiled no kernel.
    """
    ncu = find()
    if ncu is None:
        raise ProfilerError("ncu (Nsight Compute) not found: install it, put ncu on PATH or set TRACEKIT_NCU; "
                            "hardware counters need it (the rest of tracekit does not)")
    directory.mkdir(parents=True, exist_ok=True)
    csv = directory / "ncu.csv"
    csv.unlink(missing_ok=True)
    cmd = command(ncu, choose_metrics(available_metrics(ncu)), csv, kernels, workload)
    log(f"[counters] {' '.join(cmd)}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    output = proc.stdout + proc.stderr
    (directory / "ncu.out").write_text(output)
    text = csv.read_text(errors="replace") if csv.exists() else ""
    if proc.returncode != 0:
        raise ProfilerError(f"ncu exited {proc.returncode}: {_failure(text + output)} (see {directory}/ncu.out)")
    try:
        parse(csv)
    except CountersError as exc:
        raise ProfilerError(f"{exc}; {_failure(text + output)}") from None
    return csv

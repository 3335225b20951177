"""Run every cell of a suite, each in its own process, writing each result as it goes.

A cell in a fresh process gets a clean CUDA context and allocator, its own
compile (no in-memory cache from an earlier cell), and a crash of one cell
(a segfault in a backend) cannot take the others with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from tracekit import backends
from tracekit.environment import default_device
from tracekit.runner import run, run_dir
from tracekit.spec import RunSpec
from tracekit.suite import Suite


def trace_command(spec: RunSpec, traces: Path) -> list[str]:
    """The ``tracekit trace`` command line that runs ``spec``."""
    cmd = [sys.executable, "-m", "tracekit", "trace", "--model", spec.model, "--mode", spec.mode,
           "--dtype", spec.dtype, "--warmup", str(spec.warmup), "--iters", str(spec.iters),
           "--profile-iters", str(spec.profile_iters), "--out", str(traces)]
    if spec.batch is not None:
        cmd += ["--batch", str(spec.batch)]
    if spec.device is not None:
        cmd += ["--device", spec.device]
    if spec.phase != "inference":
        cmd += ["--phase", spec.phase]
    if spec.compile_only:
        cmd += ["--compile-only", spec.compile_only]
    return cmd


def _cannot_run(spec: RunSpec) -> bool:
    """True when the cell's mode cannot run here (not installed, needs CUDA, phase):
    its status row needs no process of its own."""
    if spec.mode not in backends.BACKENDS:
        return False  # its own process reports the unknown mode
    return backends.why_not(backends.get(spec.mode), replace(spec, device=spec.device or default_device())) is not None


def run_suite(suite: Suite, traces: Path | str, log: Callable[[str], None] = print) -> list[dict]:
    """Run each cell of ``suite`` in a subprocess; return the manifests in order.

    A cell whose process dies without writing a finished run.json is returned
    as a manifest with status "failed" and the process's exit code. A cell
    whose mode cannot run here gets its status row from this process.
    """
    traces = Path(traces)
    results = []
    for i, spec in enumerate(suite.cells, 1):
        folder = run_dir(spec, traces)
        log(f"[{i}/{len(suite.cells)}] {folder}")
        t0 = time.perf_counter()
        if _cannot_run(spec):
            manifest = run(spec, traces, log=lambda msg: None)
            log(f"    {manifest['status']}: {manifest['reason'][:300]}")
            results.append(manifest)
            continue
        proc = subprocess.run(trace_command(spec, traces), capture_output=True, text=True)
        manifest_path = folder / "run.json"
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError):
            manifest = {"status": "running"}
        if manifest.get("status") == "running":
            manifest = {**manifest, "spec": spec.to_dict(), "model": spec.model, "mode": spec.mode,
                        "status": "failed",
                        "reason": f"process exited {proc.returncode}: {proc.stderr.strip()[-1000:]}"}
        log(f"    {manifest['status']} in {time.perf_counter() - t0:.0f} s"
            + (f": {manifest.get('reason', '')[:300]}" if manifest["status"] != "ok" else ""))
        results.append(manifest)
    return results

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
from pathlib import Path
from typing import Callable

from tracekit.runner import run_dir
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
    return cmd


def run_suite(suite: Suite, traces: Path | str, log: Callable[[str], None] = print) -> list[dict]:
    """Run each cell of ``suite`` in a subprocess; return the manifests in order.

    A cell whose process dies without writing a finished run.json is returned
    as a manifest with status "failed" and the process's exit code.
    """
    traces = Path(traces)
    results = []
    for i, spec in enumerate(suite.cells, 1):
        folder = run_dir(spec, traces)
        log(f"[{i}/{len(suite.cells)}] {folder}")
        t0 = time.perf_counter()
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

"""What reaches stderr (tracekit.capture.quiet): other packages' warnings only with -v, never Kineto's USDT lines."""

import os
import subprocess
import sys
from pathlib import Path

from tracekit.capture import quiet

ROOT = Path(__file__).resolve().parents[1]

# A workload file that warns as torch, torchao and a library do when they are imported: a torch
# logger (torch's own handler: the _pytree deprecation), a logger without a handler (torchao's
# "Failed to load ..."), a Python warning.
NOISY = '''
import logging, warnings
import torch
logging.getLogger("torch.utils._pytree").warning("a torch deprecation warning")
logging.getLogger("torchao").warning("Failed to load a CUDA library")
warnings.warn("a library's UserWarning")
logging.getLogger("torchao").error("a library's error")


def noisy(batch, dtype, device):
    return torch.nn.Linear(2, 2), (torch.ones(batch, 2),)
'''
WARNINGS = ("a torch deprecation warning", "Failed to load a CUDA library", "a library's UserWarning")


def _models(tmp_path, *options):
    (tmp_path / "noisy.py").write_text(NOISY)
    env = {k: v for k, v in os.environ.items() if k not in (quiet.VERBOSE_ENV, *quiet.PACKAGE_SWITCHES)}
    return subprocess.run([sys.executable, "-m", "tracekit", *options, "models"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**env, "TRACEKIT_WORKLOADS": str(tmp_path)})


def test_other_packages_warnings_show_only_with_v_and_errors_always(tmp_path):
    """`tracekit models` imports the workload files (as `trace` imports torch, transformers, torchao)."""
    quiet_run, verbose_run = _models(tmp_path), _models(tmp_path, "-v")
    assert quiet_run.returncode == verbose_run.returncode == 0, quiet_run.stderr + verbose_run.stderr
    assert "noisy" in quiet_run.stdout
    assert not [w for w in WARNINGS if w in quiet_run.stderr], quiet_run.stderr
    assert all(w in verbose_run.stderr for w in WARNINGS), verbose_run.stderr
    assert "a library's error" in quiet_run.stderr and "a library's error" in verbose_run.stderr


def test_the_cli_called_in_process_leaves_warnings_and_the_environment_as_they_were():
    import logging
    import warnings
    before = (list(warnings.filters), logging.lastResort.level, dict(os.environ))
    with quiet.third_party_warnings(show=False):
        assert os.environ[quiet.VERBOSE_ENV] == "0" and logging.lastResort.level == logging.ERROR
    assert (list(warnings.filters), logging.lastResort.level, dict(os.environ)) == before


def test_kineto_usdt_lines_are_dropped_and_the_rest_of_stderr_kept(capfd):
    """Kineto writes "USDT:... profiler_start" to file descriptor 2 at each profiler start and stop."""
    print("before", file=sys.stderr)
    with quiet.kineto_lines_dropped():
        os.write(2, b"USDT:2026-11-24 19:01:30 9736:9736 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"a real warning\n")
        os.write(2, b"USDT:2026-11-24 19:01:31 9736:9736 SyncActivityProfilerHandler.cpp:59] profiler_stop\n")
    assert capfd.readouterr().err == "before\na real warning\n"

"""What reaches stderr: tracekit's own lines and every error; other packages' warnings only with ``-v``.

Two kinds of noise, handled here and nowhere else:

* **Other packages' warnings**: Python ``warnings`` and ``logging`` records below ERROR.
  On a CPU torch, importing torchao (transformers does, for every ``hf:`` model) logs
  "Failed to load .../torchao/_C_mxfp8...so" and "..._C_cutlass_90a.abi3.so": the
  PyPI wheel's compiled libraries are CUDA kernels that link ``libc10_cuda.so``
  (their ``cp310`` tag is the stable ABI of Python 3.10 and later, not a wrong
  Python), and torch 2.13 logs two ``_pytree`` deprecation warnings about torchao
  0.18's enums. :func:`third_party_warnings` hides such warnings for a command unless
  ``-v``; the processes it starts (bench cells, repeats, distributed ranks) follow it
  (:func:`from_environment`). Errors and exceptions always show.
* **Kineto's ``USDT:... profiler_start`` / ``profiler_stop`` lines**, written to file
  descriptor 2 at every profiler start and stop at Kineto's highest severity
  (``KINETO_LOG_LEVEL`` cannot hide them without hiding its errors):
  :func:`kineto_lines_dropped` around every profiler tracekit runs.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import warnings
from contextlib import contextmanager
from typing import Iterator

VERBOSE_ENV = "TRACEKIT_VERBOSE"   # "1": show other packages' warnings (set by -v, read by child processes)
# The switches packages offer for their own warnings, read when each is imported (so they reach the
# processes a command starts too); a user's own setting is kept.
PACKAGE_SWITCHES = {"TORCH_LOGS": "-all",                 # torch's loggers at ERROR (torch._logging)
                    "TRANSFORMERS_VERBOSITY": "error"}    # transformers' logger at ERROR


def _hide() -> None:
    """Ignore Python warnings; drop the WARNING records of loggers with no handler of their own
    (torchao's, ...), which Python's last-resort handler would print."""
    warnings.simplefilter("ignore")
    if logging.lastResort is not None:
        logging.lastResort.setLevel(logging.ERROR)


@contextmanager
def third_party_warnings(show: bool) -> Iterator[None]:
    """Inside the context other packages' warnings are hidden unless ``show`` (``-v``): Python
    warnings, torch's and transformers' log records below ERROR (``PACKAGE_SWITCHES``, for
    packages imported meanwhile), and those of loggers without a handler; ``TRACEKIT_VERBOSE``
    tells the processes started meanwhile the same (:func:`from_environment`). Everything is
    restored on exit (the CLI called in-process, as the tests do, leaves no trace)."""
    names = (VERBOSE_ENV, *PACKAGE_SWITCHES)
    saved_env = {name: os.environ.get(name) for name in names}
    last_resort = logging.lastResort.level if logging.lastResort is not None else None
    os.environ[VERBOSE_ENV] = "1" if show else "0"
    with warnings.catch_warnings():
        if not show:
            for name, value in PACKAGE_SWITCHES.items():
                os.environ.setdefault(name, value)
            _hide()
        try:
            yield
        finally:
            for name, value in saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            if last_resort is not None:
                logging.lastResort.setLevel(last_resort)


def from_environment() -> None:
    """In a process tracekit started (a bench cell, a repeat, a rank): hide other packages'
    warnings for the rest of the process unless its starter ran with ``-v``
    (``TRACEKIT_VERBOSE=1``; the package switches came with the environment)."""
    if os.environ.get(VERBOSE_ENV) != "1":
        _hide()


def is_kineto_line(line: str) -> bool:
    """Whether a line of stderr is one of Kineto's profiler start/stop tracepoint lines."""
    return line.startswith("USDT:")


@contextmanager
def kineto_lines_dropped() -> Iterator[None]:
    """Drop Kineto's ``USDT:`` lines written to stderr (file descriptor 2) inside the context;
    every other line written to it meanwhile is passed on when the context ends, in order.

    The context's stderr goes to a temporary file, filtered at the end (the lines come
    from C++, below Python's ``sys.stderr``)."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to filter
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().decode(errors="replace").splitlines(keepends=True)
                    if not is_kineto_line(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()

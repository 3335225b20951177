"""Analysis of many trace files on a Dask cluster: one task per file, results gathered in order.

:func:`tracekit.analysis.runs._analyze_files` decides where files are read; this is
the Dask side of that choice.
"""

from __future__ import annotations

import os
from typing import Callable


class ClusterError(Exception):
    """--dask cannot be used: dask is not installed, the address is not one, or its scheduler cannot be reached."""


def on_dask(address: str, fn: Callable, jobs: list) -> list:
    """``[fn(job) for job in jobs]``, each call one task on a Dask cluster.

    Args:
        address: a scheduler address (``tcp://host:8786``), or ``"local"`` for a
            LocalCluster of one single-threaded worker process per core here.
        fn: a picklable function (each task reads its file in its worker, so a worker
            holds one file's tables at a time; the files must be readable there at
            the same path).
        jobs: the argument of each call (picklable).

    Returns:
        The results, in the order of ``jobs``.

    Raises:
        ClusterError: dask.distributed is not installed, the address is not one (no port, an
            unknown scheme), or the scheduler cannot be used.
    """
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise ClusterError("--dask needs dask.distributed: pip install 'tracekit[dist]' "
                           "(or pip install 'dask[distributed]')") from None
    import logging  # here: the analysis of a single trace never needs it (start-up)

    cluster = None
    try:
        if address == "local":
            cluster = LocalCluster(n_workers=len(os.sched_getaffinity(0)), threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)
        try:
            client = Client(cluster or address, timeout=10)
        except ValueError as exc:  # an address Dask cannot read: no port, an unknown scheme
            raise ClusterError(f"--dask {address}: not a scheduler address ({exc}); give tcp://HOST:PORT "
                               "or 'local'") from None
        with client:
            return client.gather(client.map(fn, jobs, pure=False))
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"cannot use the Dask scheduler at {address}: {exc}") from None
    finally:
        if cluster is not None:
            cluster.close()

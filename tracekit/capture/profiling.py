"""The one place torch.profiler is set up for a capture: the profiled window of every run, a
recorded loop's too (:func:`tracekit.capture.stages.profiled_window`), and the short profile of a
CUDA-graph capture (:mod:`tracekit.capture.provenance`) take theirs from :func:`profiler`, and name
their trace files with :func:`worker_name`."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import torch


def sync_events_config():
    """The profiler's experimental config that records CUDA synchronization events (Kineto's
    ``cuda_sync``: stream, event and device syncs and stream waits, with the stream and the
    ``cudaEventRecord`` each waits on): the cross-stream and host-GPU edges of the critical path
    (:mod:`tracekit.analysis.critical_path`). None on a torch without the option."""
    try:
        return torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    except (AttributeError, TypeError):
        return None


def worker_name(suffix: str | None = None) -> str:
    """The trace files' worker name, ``<host>_<suffix>`` (``<host>_rank1``), the process id by
    default: tensorboard_trace_handler writes ``<worker>.<timestamp_ns>.pt.trace.json.gz``."""
    return f"{socket.gethostname()}_{suffix or os.getpid()}"


def profiler(device: str, trace_dir: Path | None = None, worker: str | None = None, schedule=None,
             *, detailed: bool = True) -> torch.profiler.profile:
    """A ``torch.profiler.profile`` of the host (CPU activity) and, on a ``cuda`` device, the GPU.

    Args:
        device: "cpu" or "cuda[:N]".
        trace_dir: where each finished window is written, gzipped, by
            ``tensorboard_trace_handler`` as ``worker`` (:func:`worker_name` when None);
            None: the caller exports the trace itself (``export_chrome_trace``).
        schedule: a ``torch.profiler.schedule`` (None: every step profiled).
        detailed: input shapes (``record_shapes``) and CUDA synchronization events
            (:func:`sync_events_config`), which the analyses and the critical path read;
            False for the short profile of a CUDA-graph capture, which needs only its launches.

    Wrap its start and stop in :func:`tracekit.capture.quiet.kineto_lines_dropped` (Kineto prints a
    line at each).
    """
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    handler = None
    if trace_dir is not None:
        handler = torch.profiler.tensorboard_trace_handler(str(trace_dir), worker_name=worker or worker_name(),
                                                           use_gzip=True)
    return torch.profiler.profile(activities=activities, record_shapes=detailed, schedule=schedule,
                                  experimental_config=sync_events_config() if detailed else None,
                                  on_trace_ready=handler)

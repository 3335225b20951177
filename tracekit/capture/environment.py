"""Facts about the machine a run happened on, recorded in run.json."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess

import torch

# NVLink multicast (NVLS) stays off in every process tracekit starts: NCCL's NVLS algorithms,
# torch's symmetric memory and NVSHMEM would use it, and the lent GPU machines' rule is that it
# stays off (their KINDS.md).
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def child_env(**more: str) -> dict:
    """The environment for a process tracekit starts: this one's, NVLink multicast off
    (``NO_MULTICAST``, overriding any setting), plus ``more``."""
    return {**os.environ, **NO_MULTICAST, **more}


def default_device() -> str:
    """"cuda" when torch sees a GPU, else "cpu"."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def _nvidia_driver() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe(device: str) -> dict:
    """Versions and device facts: torch, CUDA runtime, driver, device name, Python, host."""
    info = {
        "torch": str(torch.__version__),  # a TorchVersion: a str subclass JSON encoders may not take
        "cuda_runtime": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
        "cpu": _cpu_name(),
        "cpu_threads": torch.get_num_threads(),  # torch's intra-op threads (OMP_NUM_THREADS sets them)
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        dev = torch.device(device)
        props = torch.cuda.get_device_properties(dev)
        info.update(device_name=props.name, gpu_memory_GB=round(props.total_memory / 1e9, 1),
                    sm_count=props.multi_processor_count, capability=f"{props.major}.{props.minor}",
                    cuda_driver=_nvidia_driver())
    else:
        info.update(device_name=info["cpu"], cuda_driver=None)
    return info

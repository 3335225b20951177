"""Facts about the machine a run happened on, recorded in run.json, and the process settings a
run runs under: torch's threads (:func:`torch_threads`), its scratch folder (:func:`scratch`), the
environment of the processes it starts (:func:`child_env`), a job's process-group backend
(:func:`process_group_backend`) and its ranks' CPUs (:func:`bind_rank_cpus`)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager

import torch

# NVLink multicast (NVLS) stays off in every process tracekit starts: NCCL's NVLS algorithms,
# torch's symmetric memory and NVSHMEM would use it, and the lent GPU machines' rule is that it
# stays off (their KINDS.md).
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def child_env(**more: str) -> dict:
    """The environment for a process tracekit starts: this one's, NVLink multicast off
    (``NO_MULTICAST``, overriding any setting), plus ``more``."""
    return {**os.environ, **NO_MULTICAST, **more}


def process_group_backend(device_type: str, nproc: int) -> tuple[str, str]:
    """(process-group backend, note) of a job of ``nproc`` ranks on ``device_type`` ("cuda", "cpu")
    here: "nccl" when every rank has a GPU of its own, else "gloo" (on CPUs; and ranks sharing a GPU,
    which NCCL cannot do), with a note saying so."""
    if device_type != "cuda":
        return "gloo", ""
    gpus = torch.cuda.device_count()
    if gpus >= nproc:
        return "nccl", ""
    return "gloo", (f"{nproc} ranks share {gpus} GPU{'s' if gpus != 1 else ''}: gloo (NCCL cannot put two ranks "
                    "on one GPU); its collectives run on the host, with device copies")


CPU_BINDING_ENV = "TRACEKIT_CPU_BINDING"   # "exclusive": each rank of a job on CPUs of its own


def bind_rank_cpus(local_rank: int, local_world: int) -> list[int]:
    """Bind this process (every thread it has and will start) to its own share of the CPUs it
    may use, where ``$TRACEKIT_CPU_BINDING`` is "exclusive": the sorted CPUs split into
    ``local_world`` contiguous equal parts, part ``local_rank`` this rank's (torchrun's
    ``--numa-binding exclusive`` without its need of numactl and a NUMA map: each rank's host no
    longer shares CPUs with another's or migrates between them).

    Returns:
        The CPUs bound to (ids, sorted); [] where the variable is unset or empty, or there are
        fewer CPUs than ranks.

    Raises:
        ValueError: the variable holds another value.
    """
    mode = os.environ.get(CPU_BINDING_ENV, "")
    if not mode:
        return []
    if mode != "exclusive":
        raise ValueError(f"{CPU_BINDING_ENV} must be 'exclusive' or unset, got {mode!r}")
    cpus = sorted(os.sched_getaffinity(0))
    share = len(cpus) // local_world
    if share < 1:
        return []
    mine = cpus[local_rank * share:(local_rank + 1) * share]
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), mine)
        except OSError:
            pass   # a thread that ended meanwhile
    return mine


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


LIBRARIES = ("transformers", "timm", "torchvision", "onnxruntime", "torch_tensorrt")


def libraries() -> dict[str, str]:
    """The model and backend libraries this process has imported, name -> its ``__version__``
    (``LIBRARIES`` order; those not imported left out): what built and ran the model."""
    return {name: str(getattr(sys.modules[name], "__version__", "unknown")) for name in LIBRARIES
            if name in sys.modules}


@contextmanager
def torch_threads(threads: int | None):
    """torch's intra-op threads set to ``threads`` inside the context (unchanged for None),
    restored after it."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def scratch():
    """One temporary folder for the run, removed when the run ends however it ends (an error,
    Ctrl-C, SIGTERM taken as Ctrl-C by the CLI): whatever the run writes to temporary files goes
    there (``tempfile.tempdir``, and ``TMPDIR`` for the processes it starts: the ONNX export and
    ORT's profile, the ranks of a distributed run), and so does Inductor's cache
    (``TORCHINDUCTOR_CACHE_DIR``), so ``compile_s`` is a cold compile, unless the user set
    TORCHINDUCTOR_CACHE_DIR (then theirs is used).

    Yields "cold" or the user's cache folder, recorded in the manifest.
    Inductor reads TORCHINDUCTOR_CACHE_DIR at each use and keeps Triton's cache
    under it (torch/_inductor/runtime/cache_dir_utils.py). One folder it fixes once, when
    ``torch._inductor.codecache`` is imported: its precompiled C++ headers', under the temporary
    folder of that moment. It is imported here first, before the run's folder is the temporary
    one: imported inside, the folder would be gone after the run, and a later C++ compile in the
    process (the API's next run, the user's own) fails for a missing header (seen with torch 2.11).
    """
    import torch._inductor.codecache  # noqa: F401 - see above; a one-process run imports it anyway (provenance)
    saved = {name: os.environ.get(name) for name in ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR")}
    before = tempfile.tempdir
    with tempfile.TemporaryDirectory(prefix="tracekit-run-", ignore_cleanup_errors=True) as tmp:
        tempfile.tempdir = os.environ["TMPDIR"] = tmp
        cache = saved["TORCHINDUCTOR_CACHE_DIR"]
        if cache is None:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
        try:
            yield cache or "cold"
        finally:
            tempfile.tempdir = before
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

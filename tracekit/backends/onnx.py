"""ONNX Runtime: export with ``torch.onnx.export`` and run an ``InferenceSession``.

The exporter is the one current for the installed torch (``dynamo=True``, the
torch.export-based exporter, default since torch 2.9; the TorchScript exporter
if that fails, noted in run.json). The session uses the CUDA execution
provider when the run is on CUDA and ``onnxruntime-gpu`` provides it, else the
CPU provider -- and the run is then labelled ``cpu``, never presented as a GPU
result. Export and session creation count as compile time. ONNX Runtime's own
profiler records the profiled window; its JSON is saved beside the PyTorch
trace and read by ``tracekit analyze`` (tracekit/trace/ort.py).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch

from tracekit.backends.backend import Backend, Prepared, register
from tracekit.io import write_atomic
from tracekit.trace.ort import drop_first_runs

INSTALL = "pip install onnxruntime onnx onnxscript (onnxruntime-gpu for the CUDA execution provider)"


def _missing() -> list[str]:
    return [m for m in ("onnxruntime", "onnx", "onnxscript") if importlib.util.find_spec(m) is None]


def _cuda_provider() -> bool:
    import onnxruntime as ort
    return "CUDAExecutionProvider" in ort.get_available_providers()


def unavailable(spec) -> str | None:
    missing = _missing()
    return f"{', '.join(missing)} not installed: {INSTALL}" if missing else None


def device(spec) -> str:
    """Where the session really runs: CUDA only with the CUDA execution provider."""
    return spec.device if spec.device.startswith("cuda") and not _missing() and _cuda_provider() else "cpu"


def _export(module, inputs, path: Path) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(module, inputs, str(path), dynamo=True, verbose=False)  # no progress lines
            return "torch.onnx.export(dynamo=True)"
        except Exception as exc:  # noqa: BLE001 - fall back to the older exporter, say so
            first = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
            torch.onnx.export(module, inputs, str(path), dynamo=False)
            return f"torch.onnx.export(dynamo=False); the dynamo exporter failed: {first}"


def prepare(module, inputs, spec) -> Prepared:
    import onnxruntime as ort

    workdir = Path(tempfile.mkdtemp(prefix="tracekit-onnx-"))
    model_path = workdir / "model.onnx"
    exporter = _export(module, inputs, model_path)
    on_cuda = spec.device.startswith("cuda") and _cuda_provider()
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if on_cuda else ["CPUExecutionProvider"]

    def session(profile: bool = False):
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = torch.get_num_threads()  # as many CPU threads as torch: like for like
        if profile:
            opts.enable_profiling = True
            opts.profile_file_prefix = str(workdir / "ort_profile")
        return ort.InferenceSession(str(model_path), opts, providers=providers)

    state = {"session": session()}
    names = [i.name for i in state["session"].get_inputs()]
    out_device = inputs[0].device

    def run(*xs):
        feeds = {n: x.detach().cpu().numpy() for n, x in zip(names, xs)}
        outs = state["session"].run(None, feeds)
        return torch.from_numpy(outs[0]).to(out_device)

    @contextmanager
    def profile(run_dir: Path, worker: str):
        plain, state["session"] = state["session"], session(profile=True)
        try:
            yield
        finally:
            written = Path(state["session"].end_profiling())
            state["session"] = plain
            # The profiler schedule's warm-up step ran in this session too (its first run, with the
            # session's lazy set-up); drop it, as torch.profiler leaves it out of its trace.
            events = drop_first_runs(json.loads(written.read_text()), 1)
            target = run_dir / f"{worker}.{time.time_ns()}.ort.json.gz"
            write_atomic(target, gzip.compress(json.dumps(events).encode()))

    used = state["session"].get_providers()[0]
    info = {"exporter": exporter, "onnxruntime": ort.__version__, "execution_provider": used,
            "intra_op_threads": torch.get_num_threads()}
    return Prepared(run, "cuda" if used == "CUDAExecutionProvider" else "cpu", info, profile)


register(Backend("onnx", "ONNX Runtime (torch.onnx export; CUDA execution provider if present, else CPU)",
                 prepare, unavailable=unavailable, phases=frozenset({"inference"}), device=device))

"""The Python API: ``tracekit trace`` on a module you built, ``tracekit analyze`` as DataFrames,
``tracekit whatif``, ``diff`` and ``--annotate``.

A thin layer, like the CLI (whose verbs call these): :func:`profile` runs each mode through the
runner (:func:`tracekit.capture.runner.run`: the same warm-up, timing, profiled window, run
folder and ``run.json``), :func:`analyze` is the analysis behind ``tracekit analyze``, and
:func:`whatif` the prediction behind ``tracekit whatif``. What they return shows itself
(:mod:`tracekit.report.shown`). In a script or a notebook::

    import torch, tracekit

    model = MyNet().cuda()
    x = torch.randn(8, 3, 224, 224, device="cuda")
    result = tracekit.profile(model, (x,), modes=["eager", "default", "reduce-overhead"], name="mynet")
    result.comparison[["mode", "speedup", "d_busy_per_iter_ms", "d_idle_est_ms", "dominant"]]
    result                                # in a notebook: the speedup table
    tracekit.analyze("traces/").runs      # any runs, however they were made
    tracekit.whatif("traces/mynet/eager", cuda_graphs=True).predicted_latency_ms

This module imports no torch itself (``tracekit.analyze`` works without it);
:func:`profile` imports the runner when called. Nor pandas: ``tracekit analyze`` calls
:func:`analyze`, which starts reading the traces before pandas is imported; the records
(``Result``, ``Prediction``) are imported when first named.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from tracekit.manifest.spec import DEFAULT_ITERS, DEFAULT_PROFILE_ITERS, DEFAULT_WARMUP, RunSpec, folder_name

if TYPE_CHECKING:
    import pandas as pd

    from tracekit.analysis.critical_path.prediction import Prediction
    from tracekit.analysis.options import AnalysisOptions
    from tracekit.analysis.result import Result

__all__ = ["Prediction", "Result", "analyze", "annotate", "diff", "profile", "whatif"]
_RECORDS = {"Result": "tracekit.analysis.result", "Prediction": "tracekit.analysis.critical_path.prediction"}


def __getattr__(name: str):
    """``Result`` and ``Prediction``, the records the API returns, imported when first named."""
    if name in _RECORDS:
        import importlib

        return getattr(importlib.import_module(_RECORDS[name]), name)
    raise AttributeError(f"module 'tracekit.api' has no attribute {name!r}")


def analyze(path: Path | str | Sequence[Path | str], baseline: str = "eager", iterations: int | None = None,
            only: set[str] | None = None, dask: str | None = None, critical_path: bool = False,
            options: AnalysisOptions | None = None) -> Result:
    """The tables ``tracekit analyze PATH`` reports, as DataFrames (:class:`Result`, shown as its
    speedup table in a notebook and a short summary by ``print()``: :class:`tracekit.report.shown.ShownResult`).

    Args:
        path: a trace file, a folder (searched recursively: run folders of
            ``tracekit trace``, ``bench``, :func:`profile`, :func:`tracekit.record`, or
            bare traces), or a list of them.
        baseline: the mode each run is compared with.
        iterations: iterations each trace holds, for traces with neither
            ProfilerStep markers nor a run.json.
        only: analyze just the runs with these names (``"<label>/<mode>"``, relative to ``path``).
        critical_path: also each trace's critical path: ``result["critical_path"]`` (per
            iteration, its length and each part's µs: host CPU, launch calls, launch latency,
            GPU gaps, kernels, transfers, communication, syncs, waits) and
            ``result["critical_path_top"]`` (what is on it most), calibrated to run.json's
            unprofiled latency where there is one (:mod:`tracekit.analysis.critical_path`).
        dask: analyze the files on this Dask cluster (a scheduler address, or ``"local"``);
            the same tables as without it.
        options: the options as one object (:class:`tracekit.analysis.options.AnalysisOptions`:
            ``critical_path``, ``iterations``, and ``annotation``, what marks an iteration for the
            critical path), instead of ``iterations`` and ``critical_path``.

    Raises:
        ValueError: ``options`` given with ``iterations`` or ``critical_path``.
        tracekit.trace.TraceError: ``path`` does not exist (``code`` 3), holds no
            traces (4), or no file in it could be read (the first file's problem
            and code, 70 where tracekit failed on any; the others are in its message:
            :meth:`tracekit.analysis.runs.Analysis.nothing_to_report`). A folder where some
            files are unreadable is analyzed, and they are in ``errors``. Where nothing could
            be analyzed it is a :class:`tracekit.analysis.runs.NothingAnalyzed`, which holds
            every file's problem and the analyses that raised.
        tracekit.analysis.dask_cluster.ClusterError: ``dask`` given, and dask is missing or
            its scheduler unreachable.
    """
    from tracekit.analysis.options import AnalysisOptions
    from tracekit.analysis.runs import analyze as run_analysis

    if options is None:
        options = AnalysisOptions(critical_path=critical_path, iterations=iterations)
    elif iterations is not None or critical_path:
        raise ValueError("give iterations and critical_path in options, or without options; not both")
    analysis = run_analysis(list(path) if isinstance(path, (list, tuple)) else path, options, only=only, dask=dask)
    if (error := analysis.nothing_to_report(path)) is not None:
        raise error
    from tracekit.analysis.result import Result  # pandas: after the reader has started
    from tracekit.report.shown import shown

    return shown(Result.of(analysis, baseline))


def whatif(path: Path | str, *, cuda_graphs: bool = False,
           faster: Mapping[str, float] | Sequence[str] | str | None = None, host_faster: float | None = None,
           overlap_comm: bool = False, balance_ranks: bool = False, annotation: str | None = None) -> Prediction:
    """``tracekit whatif`` as Python: the iteration latency of the run at ``path`` after the edits,
    from its trace: the dependency graph of its host calls and GPU ops, calibrated to the run's
    unprofiled latency (run.json), re-timed with the edits (:mod:`tracekit.analysis.critical_path`).
    A job's is one graph of its ranks joined at their collectives, each rank calibrated with its own
    host time, and its figures are the job's step in unprofiled ms (its slowest rank's iteration).

    Args:
        path: a run folder (its trace, or one per rank of a job, beside run.json) or a trace file.
        cuda_graphs: each iteration replayed as one CUDA graph (one launch, the host free).
        faster: GPU ops of a kernel class, kernel, op or module matching a pattern take 1/FACTOR
            of their time: ``{pattern: factor}`` or ``"PATTERN=FACTOR"`` strings as ``--faster``
            takes them, e.g. ``{"blocks.*.mlp": 2}`` or ``["blocks.*.mlp=2", "gemm=1.5"]``.
        host_faster: every host call and the CPU time between calls this factor shorter.
        overlap_comm: compute no longer waits for gradient reductions but the optimizer step, which
            reads them (an iteration still ends after its collectives); never slower than before.
        balance_ranks: each rank's host and GPU work beyond the other ranks', per iteration, taken away.
        annotation: the CPU op or annotation that marks an iteration (default ``ProfilerStep#N``).

    Returns:
        A :class:`Prediction` (``print()`` gives what ``tracekit whatif`` prints,
        :class:`tracekit.report.shown.ShownPrediction`): predicted_latency_ms, its interval
        (predicted_low_ms, predicted_high_ms, and interval_sources: each source's ends),
        measured_latency_ms, modelled_latency_ms, calibrated, host_scale, gpu_scale, host_source (where
        the host's factor came from), replay_costs (``cuda_graphs``: the costs used, the GPU they were
        measured on), confidence (``low`` where the eager trace says a capture may run other kernels,
        the first note says why), edits, notes and
        missing (in words), critical_path_before/critical_path_after (DataFrames, one row per iteration
        and rank: latency_us and each part's µs), and ``to_dict()``, the object ``--json`` prints. A
        trace with no GPU op or no launch call, or with a single launch for ``cuda_graphs`` and
        ``host_faster``, gives one with ``cannot_predict`` saying so (and no figures). A job's also
        has ranks, world_size, host_scale_by_rank, rank_excess (``balance_ranks``: the work taken
        from each rank), and ranks_missing and unreadable where a rank's trace is missing or cannot
        be read: the prediction is then of the other ranks (``tracekit whatif`` exits 10).

    Raises:
        tracekit.analysis.critical_path.edits.EditError (a ValueError): no edit given, a faster
            spec that is not PATTERN=FACTOR or a factor that is no number above 0, or a pattern
            that matches no kernel class, kernel, op or module of the trace (the message names it).
        tracekit.analysis.critical_path.AnnotationError (a ValueError): ``annotation`` is not in the trace.
        tracekit.trace.TraceError: ``path`` does not exist (``code`` 3), holds no trace (4), or no
            trace of it can be read (the first one's code, as ``tracekit whatif`` exits).
    """
    from tracekit.analysis.critical_path.edits import edits_of
    from tracekit.analysis.critical_path.predict import predict_run
    from tracekit.report.shown import shown

    edits = edits_of(cuda_graphs, faster, host_faster, overlap_comm, balance_ranks)
    return shown(predict_run(path, edits, annotation))


def _describe(module, inputs: tuple, dtype: str | None, device: str | None) -> tuple[str, str]:
    """The dtype name and device string of a module and its inputs (its first floating
    parameter, else its first input)."""
    import torch

    from tracekit.models import DTYPES

    tensors = [*module.parameters(), *(x for x in inputs if isinstance(x, torch.Tensor))]
    floating = [t for t in tensors if t.is_floating_point()]
    if dtype is None:
        found = floating[0].dtype if floating else torch.float32
        names = {v: k for k, v in DTYPES.items()}
        if found not in names:
            raise ValueError(f"the module is in {found}; tracekit runs fp32, bf16 or fp16 (give dtype=)")
        dtype = names[found]
    if device is None:
        device = str(tensors[0].device) if tensors else "cpu"
    return dtype, device


def profile(module, inputs, modes: Sequence[str] = ("eager", "default"), phase: str = "inference",
            out: Path | str = "traces", name: str | None = None, *, baseline: str = "eager",
            batch: int | None = None, dtype: str | None = None, device: str | None = None,
            warmup: int = DEFAULT_WARMUP, iters: int = DEFAULT_ITERS, profile_iters: int = DEFAULT_PROFILE_ITERS,
            compile_only: str = "", copy_module: bool = True, log: Callable[[str], None] | None = None) -> Result:
    """Run ``module`` in each mode as ``tracekit trace`` does, then analyze and compare the runs.

    Each mode gets a run folder ``out/<name>/<mode>/`` (a non-inference phase adds
    ``-<phase>`` to ``<name>``) with its trace and ``run.json`` (``source``: the
    module's class), written as the runner writes them: the eager reference output,
    the backend's preparation and first call (``compile_s``), ``warmup`` calls,
    ``iters`` timed calls (``latency_ms``: CUDA events on a GPU, perf_counter on
    the CPU), the output's max-abs-diff against eager, and ``profile_iters``
    iterations under torch.profiler. A mode that fails or cannot run here is a
    row with its status and reason, as in ``tracekit trace``.

    Args:
        module: a ``torch.nn.Module``, already on its device and in its dtype
            (nothing is moved or cast; it is put in eval mode).
        inputs: its example inputs, a tuple of tensors (or one tensor); each
            iteration calls ``module(*inputs)``.
        modes: backend modes (``tracekit backends``), each its own run.
        phase: inference, forward, forward-backward or train-step
            (:mod:`tracekit.capture.phases`; the module's own loss where its output has a ``loss``).
        out: the traces root.
        name: the workload's name and folder (default: the module's class name).
        baseline: the mode the others are compared with.
        batch: recorded in the manifest (default: the first input's leading dimension).
        dtype, device: recorded (default: those of the module's first floating
            parameter, else of its first input).
        warmup, iters, profile_iters: as ``tracekit trace``.
        compile_only: ``surgical`` mode's patterns of submodule names.
        copy_module: run each mode on a deep copy of ``module`` (so a surgical
            compile or a training step of one mode never changes the next; it
            needs memory for a second copy). With False they share it.
        log: where progress lines go (default: stderr).

    Returns:
        :class:`Result` of these runs (``manifests`` in mode order).

    Raises:
        backends.UnknownMode: a mode that does not exist (before anything runs).
        ValueError: a name that is not a plain folder name, a module in another
            dtype than fp32/bf16/fp16, inputs that are not tensors, or a device
            torch cannot use.
        tracekit.trace.TraceError: no run wrote anything analyzable (every mode skipped here).
    """
    import torch

    from tracekit import backends, models
    from tracekit.capture import runner

    inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    if not isinstance(module, torch.nn.Module) or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise ValueError("profile() takes an nn.Module and a tuple of input tensors")
    name = name or type(module).__name__
    if folder_name(name) != name or any(f.pattern.fullmatch(name) for f in models.FAMILIES.values()):
        raise ValueError(f"name {name!r}: use a plain folder name that is not a built-in model "
                         f"(letters, digits, . _ -), e.g. {folder_name(name)!r}-mine")
    for mode in modes:
        backends.get(mode)
    dtype, device = _describe(module, inputs, dtype, device)
    batch = batch or (inputs[0].shape[0] if inputs and inputs[0].dim() else 1)

    def builder(match, batch, dtype, device):
        return (copy.deepcopy(module) if copy_module else module), inputs

    family = models.Family(None, name, batch, builder, f"{type(module).__name__} given to tracekit.profile",
                           options=("dtype", "device"),
                           source={"kind": "python", "class": f"{type(module).__module__}.{type(module).__qualname__}"})
    spec = RunSpec(model=name, batch=batch, dtype=dtype, device=device, phase=phase, compile_only=compile_only,
                   warmup=warmup, iters=iters, profile_iters=profile_iters)
    manifests, names = [], []
    models.PROVIDED[name] = family
    try:
        for mode in modes:
            run_spec = replace(spec, mode=mode)
            manifests.append(runner.run(run_spec, out, **({"log": log} if log else {})))
            names.append(f"{manifests[-1].label}/{mode}")
    finally:
        del models.PROVIDED[name]
    result = analyze(out, baseline=baseline, only=set(names))
    result.manifests = manifests
    return result


def annotate(path: Path | str, out: Path | str | None = None) -> pd.DataFrame:
    """``tracekit analyze --annotate`` as Python: write beside each trace under ``path`` (or
    under ``out``, in the same folders) ``<name>.annotated.pt.trace.json.gz``, a copy with
    tracks of the critical path, GPU idle by cause and the module of each GPU op
    (:mod:`tracekit.analysis.annotation_tracks`), which Perfetto, TensorBoard and HTA open.

    Returns:
        One row per trace: trace, annotated (the copy's path, None where none was written),
        tracks (names), notes (tracks left out and why, in words).

    Raises:
        tracekit.trace.TraceError: ``path`` does not exist.
    """
    from tracekit.analysis.annotation_tracks import annotate as annotate_path
    from tracekit.report.annotation_text import worded_annotations

    return worded_annotations(annotate_path(path, out))


def diff(a: Path | str, b: Path | str | None = None, depth: int = 3, iterations: int | None = None):
    """``tracekit diff`` as Python: where GPU time and launches went, module by module.

    Args:
        a, b: two run folders or trace files; or ``a`` alone, a folder of runs.
        depth: module paths are cut to this many parts.
        iterations: iterations of a trace with neither markers nor run.json.

    Returns:
        For two runs a :class:`tracekit.analysis.attribution.run_diff.RunDiff` (``modules`` and ``ops``
        DataFrames, with what changed in words as ``tracekit diff`` shows it:
        :func:`tracekit.report.worded.worded`; ``totals``, ``coverage_a``/``coverage_b``); for a
        folder, one per pair of modes of each workload (a list).

    Raises:
        tracekit.trace.TraceError: a path is missing or unreadable.
        ValueError: a run path holds no trace or several.
    """
    from tracekit.analysis.attribution.run_diff import diff_pairs, diff_runs
    from tracekit.report.worded import worded

    if b is None:
        return [worded(d) for d in diff_pairs(a, depth, iterations).diffs]
    return worded(diff_runs(a, b, depth, iterations))


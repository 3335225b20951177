"""A model's outputs: their tensors, whatever the structure, and how far a backend's are from eager's.

The runner keeps the eager output (:func:`clone`) and compares a mode's first
output with it: ``max_abs_diff``, allowed up to :func:`tolerance`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import torch

# Output difference allowed against eager, relative to the largest output value. Compiled
# kernels reorder reductions and may use TF32 or other fused math; these are about 10x the
# rtol torch.testing.assert_close uses for bit-near results (fp32 1.3e-6 is too strict for a
# whole network), in line with the accuracy of each format: fp32 with TF32 matmuls ~1e-3,
# fp16 (10-bit mantissa) ~1e-2, bf16 (7-bit mantissa) ~5e-2; FP8 backends get 0.25.
# Cross-checks: PyTorch's torch.compile accuracy harness allows 1e-3 for fp32 inference of timm
# and Hugging Face models (benchmarks/dynamo/timm_models.py, huggingface.py:
# get_tolerance_and_cosine_flag) and 1e-2 for fp16/bf16 models that need more (torchbench.py);
# TransformerEngine's FP8 tests allow rtol 0.125 (E4M3) and 0.25 (E5M2) for one GEMM
# (tests/pytorch/test_fusible_ops.py, dtype_tols).
DIFF_RTOL = {"fp32": 1e-3, "fp16": 1e-2, "bf16": 5e-2}
FP8_RTOL = 0.25


def tensors(out) -> list[torch.Tensor]:
    """The tensors of a model output, in order: a tensor, tuples and lists, dicts
    (transformers' ``ModelOutput``), dataclasses; anything else (None, a KV cache
    object) is left out."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in tensors(o)]
    if isinstance(out, Mapping):
        return [t for o in out.values() for t in tensors(o)]
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        return [t for f in dataclasses.fields(out) for t in tensors(getattr(out, f.name))]
    return []


def clone(out) -> list[torch.Tensor]:
    """Detached copies of an output's :func:`tensors`, kept for the comparison with eager."""
    return [t.detach().clone() for t in tensors(out)]


def max_abs_diff(out: list[torch.Tensor], ref: list[torch.Tensor]) -> float:
    """Largest absolute difference between two outputs' tensors (:func:`clone`); inf when
    their structure or shapes differ (the outputs are then not the same)."""
    if len(out) != len(ref) or any(o.shape != r.shape for o, r in zip(out, ref)):
        return math.inf
    return max((float((o.float().cpu() - r.float().cpu()).abs().max().item()) for o, r in zip(out, ref)
                if o.numel()), default=0.0)


def tolerance(ref: list[torch.Tensor], dtype: str, mode: str) -> float:
    """The largest ``max_abs_diff`` from ``ref`` that is ok: the dtype's (or an FP8 mode's)
    rtol (:data:`DIFF_RTOL`) x max(1, largest absolute value of ``ref``)."""
    largest = max((float(r.float().abs().max().item()) for r in ref if r.numel()), default=0.0)
    return (FP8_RTOL if "fp8" in mode else DIFF_RTOL[dtype]) * max(1.0, largest)

"""FP8 matmuls through PyTorch's own ``torch._scaled_mm`` (no TransformerEngine needed).

Every ``nn.Linear`` whose dimensions are multiples of 16 (cuBLASLt's FP8
requirement) becomes an FP8 linear: weights quantized once to float8_e4m3fn
with a per-tensor scale (amax / 448, e4m3's largest value), activations
quantized per call the same way, the product computed by ``torch._scaled_mm``
in bf16 and cast back. Linears used functionally by ``nn.MultiheadAttention``
and the ``nn.Transformer*Layer`` fast path are left alone. Needs a GPU of compute capability 8.9 or more (Ada, Hopper).
Numbers follow "FP8 Formats for Deep Learning" (Micikevicius et al., 2022,
arXiv:2209.05433): per-tensor scaling, e4m3 for forward tensors.
"""

from __future__ import annotations

import torch
from torch import nn

from tracekit.backends.backend import Backend, Prepared, needs_cuda, register
from tracekit.models.family import Unavailable

FP8_MIN_CAPABILITY = (8, 9)


class FP8Linear(nn.Module):
    """A frozen ``nn.Linear`` computed with FP8 operands (per-tensor scales)."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        fp8 = torch.float8_e4m3fn
        w = linear.weight.detach().float()
        self.register_buffer("w_scale", (w.abs().max() / torch.finfo(fp8).max).clamp(min=1e-12))
        self.register_buffer("w_fp8", (w / self.w_scale).to(fp8))          # (out, in), row-major
        self.bias = None if linear.bias is None else linear.bias.detach().to(torch.bfloat16)
        self.out_dtype = linear.weight.dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fp8 = torch.float8_e4m3fn
        rows = x.reshape(-1, x.shape[-1]).float()
        x_scale = (rows.abs().max() / torch.finfo(fp8).max).clamp(min=1e-12)
        y = torch._scaled_mm((rows / x_scale).to(fp8), self.w_fp8.t(), scale_a=x_scale, scale_b=self.w_scale,
                             bias=self.bias, out_dtype=torch.bfloat16)
        return y.to(self.out_dtype).reshape(*x.shape[:-1], -1)


def eligible(module: nn.Module) -> list[str]:
    """Names of the ``nn.Linear`` layers of ``module`` that FP8 modes convert: both dimensions
    a multiple of 16 (cuBLASLt's FP8 GEMM requirement), not inside ``nn.MultiheadAttention``
    or an ``nn.Transformer*Layer`` (these read their linears' weights directly instead of
    calling them: MultiheadAttention always, the layers in their fused inference fast path).

    Raises:
        tracekit.models.Unavailable: no linear is eligible (the run is recorded as skipped).
    """
    readers = (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)
    skip = {f"{n}." for n, m in module.named_modules() if isinstance(m, readers)}
    names = [name for name, sub in module.named_modules()
             if type(sub) is nn.Linear and not any(name.startswith(s) for s in skip)
             and sub.in_features % 16 == 0 and sub.out_features % 16 == 0]
    if not names:  # FP8 does not apply to this model: a skipped run, not a failed one
        raise Unavailable("no nn.Linear with both dimensions a multiple of 16 (outside torch.nn's attention "
                          "and transformer layers) to run in FP8")
    return names


def convert(module: nn.Module, make) -> list[str]:
    """Replace each :func:`eligible` ``nn.Linear`` of ``module`` by ``make(linear)``; return their names.

    Raises:
        tracekit.models.Unavailable: no linear is eligible.
    """
    done = eligible(module)
    for name in done:
        parent, _, attr = name.rpartition(".")
        holder = module.get_submodule(parent) if parent else module
        setattr(holder, attr, make(getattr(holder, attr)))
    return done


def fp8_unavailable(spec) -> str | None:
    """None where FP8 matmuls can run: CUDA, compute capability >= 8.9."""
    if reason := needs_cuda(spec):
        return reason
    if torch.cuda.get_device_capability(torch.device(spec.device)) < FP8_MIN_CAPABILITY:
        return "FP8 needs compute capability 8.9 or more (Ada, Hopper)"
    return None


def prepare(module, inputs, spec) -> Prepared:
    converted = convert(module, FP8Linear)
    return Prepared(module, "cuda", {"fp8_linears": len(converted), "fp8_recipe": "per-tensor e4m3, _scaled_mm"})


register(Backend("fp8-scaled-mm", "FP8 linears via torch._scaled_mm (per-tensor scales; Ada/Hopper)", prepare,
                 unavailable=fp8_unavailable, phases=frozenset({"inference"}), module_scopes=True))

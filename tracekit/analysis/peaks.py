"""Peak DRAM bandwidth and arithmetic throughput of GPUs, from their datasheets.

Keyed by a substring of the device name that torch / Kineto report. Dense
(no sparsity) tensor-core figures. Sources:

* H100 SXM5 80GB ("H100 80GB HBM3"): NVIDIA H100 Tensor Core GPU datasheet
  (https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet):
  3.35 TB/s; FP64 34, FP64 tensor 67, FP32 67, TF32 tensor 494.5,
  BF16/FP16 tensor 989.5, FP8 tensor 1979 TFLOP/s.
* H100 PCIe: same datasheet: 2.0 TB/s; FP32 51, TF32 378, BF16/FP16 756, FP8 1513.
* H200 (SXM): NVIDIA H200 datasheet: 4.8 TB/s; compute as H100 SXM.
* A100 SXM4 80GB: NVIDIA A100 datasheet: 2.039 TB/s; FP32 19.5, TF32 156,
  BF16/FP16 312 TFLOP/s (no FP8).
* FP64 on tensor cores (``fp64_tensor``): H100 SXM 67, H100 PCIe 51, H200 67, A100 19.5
  TFLOP/s, from the same datasheets.
Measured ceilings sit below these: on the lent H100 a 1 GiB multiply moved
3,010 GB/s (90% of 3,350) and an 8192^3 bf16 matmul ran at 793 TFLOP/s (80%).
"""

from __future__ import annotations

# name substring -> (DRAM GB/s, {precision: TFLOP/s}); fp64_tensor: FP64 on tensor cores
PEAKS: dict[str, tuple[float, dict[str, float]]] = {
    "H100 PCIe": (2000.0, {"fp64": 26.0, "fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0,
                           "fp8": 1513.0, "fp64_tensor": 51.0}),
    "H100": (3350.0, {"fp64": 34.0, "fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0,
                      "fp64_tensor": 67.0}),
    "H200": (4800.0, {"fp64": 34.0, "fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0,
                      "fp64_tensor": 67.0}),
    "A100": (2039.0, {"fp64": 9.7, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "fp64_tensor": 19.5}),
}

_H100 = "NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)"
# The document each row of PEAKS comes from (reports cite it beside the figures).
SOURCES = {
    "H100 PCIe": _H100,
    "H100": _H100,
    "H200": "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200)",
    "A100": "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100)",
}


def key(device_name: str | None) -> str | None:
    """The key of PEAKS that ``device_name`` contains (the first, in the order of ``PEAKS``), or None."""
    return next((k for k in PEAKS if device_name and k in device_name), None)


def peaks(device_name: str | None) -> tuple[float, dict[str, float]] | None:
    """(DRAM GB/s, TFLOP/s by precision) for a device name, or None if unknown.

    The first key contained in the name wins (order of ``PEAKS``: specific first).
    """
    k = key(device_name)
    return PEAKS[k] if k else None

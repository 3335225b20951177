"""Peak DRAM bandwidth and math throughput of GPUs, keyed by the device name torch and Kineto report.

Figures are NVIDIA's published dense peaks (datasheets list tensor-core
figures "with sparsity", twice the dense rate; halved here), at boost clock:

* H100 SXM5 (``NVIDIA H100 80GB HBM3``) and H100 PCIe: NVIDIA H100 Tensor Core
  GPU datasheet, https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet
  (FP16 without tensor cores: the NVIDIA H100 Tensor Core GPU Architecture
  whitepaper, table 3, https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper).
* H200 SXM (``NVIDIA H200``): NVIDIA H200 product page specifications,
  https://www.nvidia.com/en-us/data-center/h200/.
* A100 SXM4 80GB: NVIDIA A100 datasheet,
  https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf.

Units: ``dram_GBps`` in GB/s (1e9 bytes/s); math in TFLOP/s (1e12 FLOP/s), by
the kinds of :data:`tracekit.counters.metrics.FLOP_KINDS`. A kind a datasheet
does not give is left out (its share of a kernel's compute is then not counted).
Add a device by adding its published figures here, with their source.
"""

from __future__ import annotations

from dataclasses import dataclass

H100_DATASHEET = "NVIDIA H100 datasheet (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)"
HOPPER_WHITEPAPER = "NVIDIA H100 architecture whitepaper, table 3 (resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper)"
H200_PAGE = "NVIDIA H200 specifications (nvidia.com/en-us/data-center/h200)"
A100_DATASHEET = "NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"


@dataclass(frozen=True)
class Peaks:
    """One device's peaks: ``figures`` maps ``dram_GBps`` and each FLOP kind to (value, source)."""

    device: str
    figures: dict[str, tuple[float, str]]

    @property
    def dram_GBps(self) -> float:
        return self.figures["dram_GBps"][0]

    def TFLOPs(self, kind: str) -> float | None:
        """Peak TFLOP/s of one FLOP kind, or None when the sources give none."""
        fig = self.figures.get(kind)
        return fig[0] if fig else None

    def table(self) -> list[dict]:
        """Rows of figure, value, unit, source (for reports)."""
        return [{"figure": k, "value": v, "unit": "GB/s" if k == "dram_GBps" else "TFLOP/s", "source": s}
                for k, (v, s) in self.figures.items()]


def _sxm_hopper(dram_GBps: float, source: str) -> dict[str, tuple[float, str]]:
    # H100 SXM5 and H200 SXM share the GH100 compute figures (both datasheets).
    return {"dram_GBps": (dram_GBps, source), "fp64": (34.0, source), "fp32": (67.0, source),
            "tensor_fp64": (67.0, source), "tensor_tf32": (989 / 2, source), "tensor_bf16": (1979 / 2, source),
            "tensor_fp16": (1979 / 2, source), "tensor_fp8": (3958 / 2, source)}


PEAKS: dict[str, Peaks] = {p.device: p for p in [
    Peaks("NVIDIA H100 80GB HBM3", {**_sxm_hopper(3350.0, H100_DATASHEET), "fp16": (133.8, HOPPER_WHITEPAPER)}),
    Peaks("NVIDIA H200", _sxm_hopper(4800.0, H200_PAGE)),
    Peaks("NVIDIA H100 PCIe", {
        "dram_GBps": (2000.0, H100_DATASHEET), "fp64": (26.0, H100_DATASHEET), "fp32": (51.0, H100_DATASHEET),
        "tensor_fp64": (51.0, H100_DATASHEET), "tensor_tf32": (756 / 2, H100_DATASHEET),
        "tensor_bf16": (1513 / 2, H100_DATASHEET), "tensor_fp16": (1513 / 2, H100_DATASHEET),
        "tensor_fp8": (3026 / 2, H100_DATASHEET)}),
    Peaks("NVIDIA A100-SXM4-80GB", {
        "dram_GBps": (2039.0, A100_DATASHEET), "fp64": (9.7, A100_DATASHEET), "fp32": (19.5, A100_DATASHEET),
        "tensor_fp64": (19.5, A100_DATASHEET), "tensor_tf32": (156.0, A100_DATASHEET),
        "tensor_bf16": (312.0, A100_DATASHEET), "tensor_fp16": (312.0, A100_DATASHEET)}),
]}


def lookup(device: str | None) -> Peaks | None:
    """The peaks of ``device`` (its exact name, as torch and Kineto report it), None when unknown.

    No fuzzy matching: ``NVIDIA H200 NVL`` is not an H200 SXM (lower power, lower clocks).
    """
    return PEAKS.get(device or "")

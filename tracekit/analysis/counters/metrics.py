"""The Nsight Compute metrics tracekit collects, and how FLOPs follow from them.

Names are ncu's (``ncu --query-metrics`` lists those of a device). Units, as
``--print-units base`` writes them: ``gpu__time_duration.sum`` in ns,
``dram__bytes_*.sum`` in bytes, the instruction and op counters plain counts.

FLOPs of CUDA-core math come from the predicated-on SASS thread-instruction
counters, as Nsight Compute's own roofline sections count them
(``SpeedOfLight_RooflineChart`` / ``SpeedOfLight_Hierarchical*RooflineChart``:
add + mul + 2 x fma per executed thread instruction).

FLOPs of tensor-core math come from the ``sm__ops_path_tensor_*`` counters
("# of math ops executed in Tensor path", one per floating-point operation).
Their names differ between architectures and ncu versions (Hopper's warpgroup
``wgmma`` work is counted under ``op_hgmma``), so each tensor kind lists
alternative sets of counters for the same work; ncu.py requests those the
device has, and the FLOPs of a kind are the largest sum over one set (sets are
alternatives, never added together).
"""

from __future__ import annotations

TIME = "gpu__time_duration.sum"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
REQUIRED = [TIME, DRAM_READ, DRAM_WRITE]

_SASS = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"
# metric -> (kind, FLOPs per thread instruction)
SASS_FLOPS = {
    _SASS.format(op): (kind, 2 if op.endswith("fma") else 1)
    for kind, ops in (("fp32", ("fadd", "fmul", "ffma")), ("fp64", ("dadd", "dmul", "dfma")),
                      ("fp16", ("hadd", "hmul", "hfma")))
    for op in ops
}

_T = "sm__ops_path_tensor_{}.sum"
# kind -> alternative sets of counters of the same work
TENSOR_FLOPS = {
    "tensor_bf16": [[_T.format("src_bf16_dst_fp32")],
                    [_T.format("op_hmma_src_bf16_dst_fp32_sparsity_off"),
                     _T.format("op_hgmma_src_bf16_dst_fp32_sparsity_off")]],
    "tensor_fp16": [[_T.format("src_fp16_dst_fp16"), _T.format("src_fp16_dst_fp32")],
                    [_T.format("src_fp16")],
                    [_T.format("op_hmma_src_fp16_dst_fp16_sparsity_off"),
                     _T.format("op_hmma_src_fp16_dst_fp32_sparsity_off"),
                     _T.format("op_hgmma_src_fp16_sparsity_off")]],
    "tensor_tf32": [[_T.format("src_tf32_dst_fp32")],
                    [_T.format("op_hmma_src_tf32_dst_fp32_sparsity_off"),
                     _T.format("op_hgmma_src_tf32_dst_fp32_sparsity_off")]],
    "tensor_fp8": [[_T.format("src_fp8")], [_T.format("src_fp8_dst_fp16"), _T.format("src_fp8_dst_fp32")]],
    "tensor_fp64": [[_T.format("src_fp64")]],
}

# Further evidence, renamed in the kernel table: ncu's own DRAM throughput as a
# percent of its peak, and how busy the tensor pipe was (the largest of the
# names a device has for it; Hopper counts wgmma on the hmma pipe).
EXTRA = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "ncu_dram_pct",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": "tensor_pipe_pct",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed": "tensor_pipe_pct",
}

FLOP_KINDS = ["fp32", "fp64", "fp16", *TENSOR_FLOPS]


def always() -> list[str]:
    """The metrics always requested: REQUIRED and the SASS instruction counters (every GPU
    ncu supports has them; the project's H100 fixture shows these names on ncu 2025.3)."""
    return [*REQUIRED, *SASS_FLOPS]


def optional() -> list[str]:
    """The metrics requested when the device has them: tensor-core op counters and EXTRA."""
    return [*(m for sets in TENSOR_FLOPS.values() for s in sets for m in s), *EXTRA]


def base_name(metric: str) -> str:
    """The metric without its rollup/suffix: ``dram__bytes_read.sum`` -> ``dram__bytes_read``."""
    return metric.split(".", 1)[0]

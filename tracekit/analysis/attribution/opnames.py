"""Names of ops as attribution shows them, with no pandas: the module-scope prefix the
runner records, aten op names normalized across backends (:func:`normalize_op`), the aten
ops an Inductor kernel's name lists (:func:`kernel_ops`). Used while a run records
(:mod:`tracekit.capture.provenance`) and by :mod:`tracekit.analysis.attribution.gpu_ops`."""

from __future__ import annotations

import re

SCOPE_PREFIX = "module::"  # the record_function range around a module call: module::<path>
# FX ops that move no data (views) are left out of a call site's ops unless it has nothing else.
VIEW_OPS = frozenset({"view", "reshape", "_unsafe_view", "t", "transpose", "permute", "expand", "select",
                      "slice", "squeeze", "unsqueeze", "as_strided", "alias", "detach", "unbind", "split",
                      "split_with_sizes", "chunk", "flatten", "unflatten", "view_as", "expand_as", "narrow",
                      "movedim", "lift_fresh", "getitem"})
# Backend-specific aten ops -> the op they implement (eager dispatches conv2d to
# cudnn_convolution, Inductor's graphs call convolution).
OP_ALIASES = {
    **dict.fromkeys(["conv1d", "conv2d", "conv3d", "_convolution", "cudnn_convolution", "mkldnn_convolution",
                     "miopen_convolution", "_nnpack_spatial_convolution"], "convolution"),
    **dict.fromkeys(["_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
                     "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
                     "_efficient_attention_forward", "_flash_attention_forward", "_cudnn_attention_forward"],
                    "scaled_dot_product_attention"),
    "native_layer_norm": "layer_norm", "native_group_norm": "group_norm",
    "_native_batch_norm_legit_no_training": "batch_norm", "cudnn_batch_norm": "batch_norm",
    "native_batch_norm": "batch_norm",
}
_TRITON = re.compile(r"^triton_(?:poi|red|per|tem|for)_(?:fused_)?(.*?)(?:_\d+)?$")
# Multi-word aten ops as they appear in Inductor kernel names (which join op names with "_").
_MULTIWORD = sorted({"native_layer_norm", "layer_norm", "native_batch_norm", "batch_norm", "group_norm",
                     "native_group_norm", "scaled_dot_product_attention", "log_softmax", "_log_softmax",
                     "_softmax", "max_pool2d_with_indices", "avg_pool2d", "adaptive_avg_pool2d", "constant_pad_nd",
                     "index_select", "masked_fill", "scatter_add", "index_put", "_to_copy", "clamp_min",
                     "clamp_max", "full_like", "zeros_like", "ones_like", "new_zeros", "gelu_backward",
                     "native_dropout", "rand_like", "_unsafe_view", "select_scatter", "slice_scatter",
                     "logical_not", "bitwise_and", "embedding_dense_backward", "threshold_backward", "where_self",
                     "_foreach_copy", "squeeze_copy", "permute_copy"}, key=len, reverse=True)


def normalize_op(name: str) -> str:
    """An op name as attribution tables show it: ``aten::cudnn_convolution`` ->
    ``convolution``, ``extern_kernels.mm`` and ``torch.ops.aten.mm.default`` -> ``mm``."""
    if name.startswith("aten::"):
        name = name[6:]
    elif name.startswith("graph_"):  # Inductor's C++ kernels as profiled (cpp.enable_kernel_profile)
        name = re.sub(r"^graph_\d+_", "", name)
    elif m := re.match(r"^(?:extern_kernels|torch\.ops\.aten|aten)\.(\w+?)(?:\.(?:default|out|Tensor|Scalar|int))?$",
                       name):
        name = m.group(1)
    return OP_ALIASES.get(name, name)


def kernel_ops(kernel: str) -> list[str]:
    """The aten ops an Inductor kernel's name lists (``triton_poi_fused_addmm_gelu_view_4``
    -> ``[addmm, gelu]``), views left out; [] for other kernels."""
    m = _TRITON.match(kernel)
    if not m:
        return []
    rest, ops = m.group(1), []
    while rest:
        word = next((w for w in _MULTIWORD if rest == w or rest.startswith(w + "_")), rest.split("_", 1)[0])
        ops.append(normalize_op(word))
        rest = rest[len(word):].lstrip("_")
    return sorted({o for o in ops if o and o not in VIEW_OPS}) or sorted(set(ops))

"""What in an eager trace says its CUDA graph capture may run other kernels (issue 39).

A ``cuda-graphs`` prediction keeps the eager trace's kernels. That is wrong where capturing changes
the program, and one thing in the eager trace says it can: the iteration reads GPU values on the
host (``aten::_local_scalar_dense``: ``.item()``, ``bool(tensor)``; ops whose output size depends on
the data: ``nonzero``, ``masked_select``, ``unique``). A capture cannot read the device, so code
that checks whether it is being captured takes another path there, and other code fails to capture
or bakes in one value:

* Hugging Face transformers (``masking_utils``: ``is_tracing`` includes
  ``torch.cuda.is_current_stream_capturing()``) skips an all-ones attention mask in eager after
  reading it, and under capture builds the mask instead: SDPA then gets an explicit ``attn_mask``
  and leaves the flash kernel (which takes no arbitrary mask) for the memory-efficient or the
  unfused math one. Checked with transformers 5.24 and an all-ones ``attention_mask``: eager calls
  SDPA with no mask for bert, roberta, distilbert, gpt2, llama, mistral and qwen2, a capturing
  stream with a (batch, 1, seq, seq) boolean mask. The RoBERTa of reports/h200/predict ran 363 GPU
  ops an iteration replayed against 164 eager, unfused attention, +10% GPU busy, slower than eager;
* ``torch.optim`` reads each parameter's step count on the host (``Optimizer.step``'s
  ``.item()``) unless ``capturable=True``, which a captured step needs and which computes on the
  device with other kernels.

So a prediction whose eager iteration reads the device is of low confidence; where its attention
also runs SDPA's fused kernels (``_scaled_dot_product_flash_attention``, ``_efficient_attention``,
``_cudnn_attention``), the reason names them as what the capture may replace. SDPA's fused kernels
alone capture as they run (no data-dependent choice), and are no reason, but in a model that Hugging
Face transformers builds (a run of an ``hf:`` model) they are, reads or none: transformers 5.17 (the
GPU machines') builds the mask under capture even where eager neither passes nor reads one. On an
H200 (reports/h200/predict-more) every hf model's replay ran other kernels than its eager run:
bert and electra, whose eager iterations read nothing, the unfused math attention with a built mask
(GPU busy +74% and +19% replayed, the prediction -43% and -19%), the decoders the mask's kernels
(+14-17%).

Better than these signs is the program's own answer, where the run has it: an eager run checks
whether its step takes another path while told a CUDA graph captures it
(:mod:`tracekit.capture.capture_path`, run.json ``capture_path``). Where it checked, that answer
replaces the transformers rule: with transformers 5.24 an encoder given no mask keeps eager's ops
(bert, electra, roberta, distilbert: the same), while a decoder builds its causal mask with arange,
index and bitwise_and ops instead of reading the mask it was given (Mistral, Qwen2, Llama, GPT-2).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from tracekit.analysis.critical_path import reasons as why
from tracekit.analysis.critical_path.host_estimate import steady_windows
from tracekit.trace.reader import EventTables

HOST_READS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::_unique2",
              "aten::unique_consecutive", "aten::unique_dim")
FUSED_ATTENTION = ("aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
                   "aten::_scaled_dot_product_cudnn_attention",
                   "aten::_scaled_dot_product_fused_attention_overrideable")
WHERE_SHOWN = 3   # the ops the reads happen in, most frequent first
WHERE_READ = 50   # the reads of a trace whose enclosing op is looked up (each a pass over its CPU ops)


def capture_risks(ranks: list[tuple[int, EventTables]], markers: dict[int, pd.DataFrame],
                  transformers: bool = False, path: dict | None = None) -> list[dict]:
    """The reasons (:mod:`~tracekit.analysis.critical_path.reasons`) a CUDA graph of these traces'
    iterations may run other kernels than the eager trace (the module docstring): ``CAPTURE_READS``
    with ``reads`` (host reads per iteration), ``ops`` (op -> reads per iteration), ``where`` (the
    ops they happen in: the innermost enclosing module range, optimizer step or annotation, else the
    op around them; the most frequent of the first ``WHERE_READ`` reads of each trace first) and
    ``attention`` (SDPA fused-kernel calls per iteration, 0 for none), from the steady iterations of
    ``markers`` (rank -> step, ts, end); where they read nothing, ``CAPTURE_MASK`` with ``attention``
    if ``transformers`` (the model is a Hugging Face transformers one) and it runs SDPA's fused
    kernels; else []. Where the run checked its step's capture path (``path``: run.json
    ``capture_path``, :mod:`tracekit.capture.capture_path`), that check replaces the transformers
    rule: ``CAPTURE_PATH`` (with its ``added``, ``removed``, ``calls_added``, ``calls_removed`` and
    ``error``) where the path differs, after ``CAPTURE_READS`` where the iteration also reads."""
    reads, attention, where, iterations = Counter(), 0, Counter(), 0
    for rank, tables in ranks:
        m = steady_windows(markers.get(rank, pd.DataFrame(columns=["ts", "end"])))
        if not len(m):
            continue
        iterations += len(m)
        ops = tables.cpu_ops
        ts, names = ops["ts"].to_numpy(float), ops["name"].astype(str).to_numpy()
        inside = np.zeros(len(ops), dtype=bool)
        for a, b in zip(m["ts"].to_numpy(float), m["end"].to_numpy(float)):
            inside |= (ts >= a) & (ts < b)
        hit = inside & np.isin(names, HOST_READS)
        reads.update(names[hit].tolist())
        attention += int((inside & np.isin(names, FUSED_ATTENTION)).sum())
        where.update(_enclosing(ops, np.flatnonzero(hit)[:WHERE_READ]))
    if not iterations:
        return []
    checked = []
    if path is not None and path.get("differs"):
        checked = [{"code": why.CAPTURE_PATH, "error": path.get("error"),
                    **{k: path.get(k) or {} for k in ("added", "removed")},
                    **{k: path.get(k) or 0 for k in ("calls_added", "calls_removed")}}]
    if not reads:
        if path is not None:
            return checked
        return [{"code": why.CAPTURE_MASK, "attention": attention / iterations}] if transformers and attention else []
    return [{"code": why.CAPTURE_READS, "reads": sum(reads.values()) / iterations,
             "ops": {k: v / iterations for k, v in reads.most_common()},
             "where": [k for k, _ in where.most_common(WHERE_SHOWN)], "attention": attention / iterations}] + checked


def _enclosing(ops: pd.DataFrame, rows: np.ndarray) -> list[str]:
    """For each row of ``ops`` (CPU ops: name, tid, ts, end), the name of the innermost op of its
    thread around it that is no aten op (a ``module::`` range, ``Optimizer.step#...``, a user
    annotation) and no iteration marker, else of the op right around it; "" for none."""
    out = []
    names = ops["name"].astype(str).to_numpy()
    ts, end, tid = ops["ts"].to_numpy(float), ops["end"].to_numpy(float), ops["tid"].astype(str).to_numpy()
    for r in rows.tolist():
        around = np.flatnonzero((tid == tid[r]) & (ts <= ts[r]) & (end >= end[r]))
        around = around[around != r][np.argsort(-ts[around[around != r]], kind="stable")]   # innermost first
        named = [names[i] for i in around if not names[i].startswith(("aten::", "ProfilerStep#"))]
        out.append(named[0] if named else (names[around[0]] if len(around) else ""))
    return out

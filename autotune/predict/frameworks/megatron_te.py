"""Transformer Engine's FP8 tensors as the Megatron-LM profile (megatron.py) counts them: the quantized input an FP8
linear saves for backward, the quantized weight training keeps (row- and column-wise usage), and whether the GPU
needs a transposed copy.

Sources:
  [TE-LIN] NVIDIA/TransformerEngine transformer_engine/pytorch/module/linear.py @ d0067d0d `_Linear` forward: under
        fp8 the input is quantized (`inputmat = input_quantizer(inputmat)`) and that quantized tensor is what is
        saved (`saved_inputmat = inputmat`, row-wise data discarded when only the column-wise copy is needed; with
        SP the local, not the gathered, input); module/layernorm_linear.py (same commit): the norm writes the FP8
        `ln_out` directly (`with_quantized_norm`) and saves it with the bf16 norm input, mu and rsigma.
  [FP8P] --fp8-param-gather (train.fp8_param_gather; Megatron-Bridge src/megatron/bridge/training/mixed_precision.py
        @ 067f987d sets it in bf16_with_fp8_delayed_scaling_mixed, bf16_with_fp8_current_scaling_mixed and
        bf16_with_mxfp8_mixed (with reuse_grad_buf_for_mxfp8_param_ag), not in bf16_with_nvfp4_mixed; the perf
        recipes take these configs, scripts/performance/utils/precision.py). Megatron-LM megatron/core/distributed/
        param_and_grad_buffer.py @ d98e8a64: a quantized param's buffer dtype is torch.uint8 (`_param_uses_quantized_
        storage` -> param_dtype = torch.uint8), the all-gather runs on it; with MXFP8 params the param all-gather
        instead reuses the (bf16) grad buffer (`shared_buffer`, "For MXFP8 param: Create a shared buffer for param
        AG and grad RS") and `_post_param_sync` re-quantizes into the params' own storage. TransformerEngine
        module/base.py @ d0067d0d: the weight quantizer of FP8-initialised params is `set_usage(rowwise=True,
        columnwise=torch.is_grad_enabled())`, so training keeps both usages: tensor/storage/float8_tensor_storage.py
        `update_usage` keeps one `_data` where `is_non_tn_fp8_gemm_supported()` (compute capability 10.x-11.x or
        >= 13: Blackwell) and a `_transpose` copy besides it elsewhere (Hopper); an MXFP8 tensor's row-wise and
        column-wise data are two quantizations (1 + 1/32 bytes each with their E8M0 scales).
  [TE-WS] Without FP8 params, Transformer Engine's Linear quantizes its bf16 weight on the first micro-batch and
        keeps the result for the rest (module/linear.py @ d0067d0d: `quantize_weight(..., update_workspace=
        is_first_microbatch is None or is_first_microbatch, cache=...)`; module/base.py: the workspace is kept in
        `self._fp8_workspaces["weight"]` when `is_first_microbatch` is not None), row-wise and column-wise in
        training (`set_usage(rowwise=True, columnwise=is_grad_enabled ...)`). Megatron-Core's TE wrappers pass
        is_first_microbatch unless config.disable_parameter_transpose_cache (default False; megatron/core/
        extensions/transformer_engine.py @ d98e8a64 `_is_first_microbatch`). The cache lives across steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.plan_arrays import FP8_CODE
from autotune.predict.te_fp8 import lowp_bytes


def te_fp8_input_bytes(fp8: Any) -> np.ndarray:
    """Bytes per element of a linear input Transformer Engine saves for backward under an FP8 recipe ([TE-LIN]): the
    quantized copy, 1 byte (tensorwise / delayed / current scaling; one fp32 scale per tensor), MXFP8 1 + 1/32 (an
    E8M0 scale per 32 elements, MXFP8_BLOCK_SCALING_SIZE), NVFP4 1/2 + 1/16 (an E4M3 scale per 16 elements,
    NVFP4_BLOCK_SCALING_SIZE; transformer_engine/pytorch/constants.py); 0 where fp8 is off."""
    return lowp_bytes(fp8)  # the same bytes per element as one low-precision copy (autotune/predict/te_fp8.py)


def te_delayed(fp8: Any, delayed: bool) -> np.ndarray:
    """Where a layout runs Transformer Engine's delayed-scaling recipe: plan.fp8=tensorwise with
    train.fp8_delayed_scaling (the other recipes have no delayed variant)."""
    return np.asarray(delayed, dtype=bool) & (np.asarray(fp8) == FP8_CODE["tensorwise"])


def te_weight_bytes(fp8: Any, non_tn: bool) -> np.ndarray:
    """Bytes per element of a Transformer Engine quantized weight in training (row-wise and column-wise usage, [FP8P]):
    per-tensor FP8 1 where the GPU runs non-TN FP8 GEMMs (`non_tn`), 2 (data + transpose) elsewhere; MXFP8 2(1 +
    1/32) and NVFP4 2(1/2 + 1/16), the row- and column-wise quantizations with their block scales
    (`te_fp8_input_bytes`); 0 without FP8."""
    code = np.asarray(fp8)
    out = np.where(code == FP8_CODE["tensorwise"], 1.0 if non_tn else 2.0, 0.0)
    return np.where((code == FP8_CODE["mxfp8"]) | (code == FP8_CODE["nvfp4"]), 2.0 * te_fp8_input_bytes(code), out)


def non_tn_fp8_gemm(cluster: Any) -> bool:
    """Whether Transformer Engine runs FP8 GEMMs in non-TN layouts on this GPU ([FP8P] `is_non_tn_fp8_gemm_supported`:
    Blackwell, compute capability 10.x-11.x), so a per-tensor FP8 weight needs no transposed copy: the preset's
    `fp8_non_tn_gemm` (true in the b200, b300, gb200 and gb300 presets; autotune/predict/te_fp8.py)."""
    return bool(getattr(cluster, "fp8_non_tn_gemm", False))

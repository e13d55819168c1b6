"""Transformer Engine's FP8 tensors as the Megatron-LM profile (megatron.py) counts them: the quantized input an FP8
linear saves for backward (`fp8_layer_saving`), the quantized weight training keeps (row- and column-wise usage:
`stored_weight_bytes`, `gather_weight_bytes`, `fsdp_gather_delta`), and whether the GPU needs a transposed copy.

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
  [TE-SOI] Megatron-Core's `set_save_original_input` (megatron/core/extensions/transformer_engine.py @ core_v0.16.1):
        a TE linear so marked saves its high-precision input instead of a quantized copy. transformer/attention.py
        marks linear_proj (its input, the attention output, is saved by the fused attention anyway) and
        moe/shared_experts.py the shared expert's fc1 (its input is the router's) for FP8 recipes other than delayed
        scaling on Transformer Engine >= 2.6 (NVFP4 on >= 2.7); both since core_v0.14.0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import FP8_CODE, RECOMPUTE_CODE
from autotune.core.types import DTYPE_BYTES, TrainSpec
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


def attention_input_copies(model: ModelSpec) -> float:
    """How many FP8 linears quantize and save their own copy of the attention input: 1 (the fused QKV
    LayerNormLinear), 2 under MLA (linear_q_down_proj / linear_q_proj and linear_kv_down_proj,
    transformer/multi_latent_attention.py @ core_v0.16.1)."""
    return 2.0 if model.attention == "mla" else 1.0


def shared_fc1_copy(model: ModelSpec, fp8: Any, delayed: bool) -> np.ndarray:
    """Where the shared expert's fc1 keeps its own quantized copy of the pre-MLP norm output ([TE-SOI]: only under
    delayed scaling; other recipes save the router's bf16 tensor): a model with a shared expert under
    te_delayed."""
    return te_delayed(fp8, delayed) & (model.moe_shared_expert_ffn_hidden_size > 0)


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


def stored_weight_bytes(fp8: Any, train: TrainSpec, cluster: Any) -> np.ndarray:
    """Bytes per element the block linears' weights keep on the device under plan.fp8 `fp8`. [FP8P] with
    train.fp8_param_gather under an FP8 recipe the weights are Transformer Engine tensors, nothing else:
    `te_weight_bytes`. Otherwise bf16 (c) weights and, under any low-precision recipe, [TE-WS] the quantized
    copy Transformer Engine caches across micro-batches (`te_weight_bytes` more); c alone without FP8."""
    c = float(DTYPE_BYTES[train.compute_dtype])
    code = np.asarray(fp8)
    q = te_weight_bytes(code, non_tn_fp8_gemm(cluster))
    fp8_params = train.fp8_param_gather & ((code == FP8_CODE["tensorwise"]) | (code == FP8_CODE["mxfp8"]))
    return np.where(fp8_params, q, c + q)


def gather_weight_bytes(fp8: Any, train: TrainSpec) -> np.ndarray:
    """[FP8P] The distributed optimizer's param all-gather: 1 byte per weight on the uint8 buffer under
    train.fp8_param_gather with a tensorwise recipe (the transpose, where kept, is rebuilt locally); MXFP8 params
    gather bf16 values into the grad buffer (re-quantized after): the param dtype's bytes, as without."""
    p = float(DTYPE_BYTES[train.param_dtype])
    code = np.asarray(fp8)
    if not train.fp8_param_gather:
        return np.full(code.shape, p)
    return np.where(code == FP8_CODE["tensorwise"], 1.0, p)


def fp8_layer_saving(
    model: ModelSpec, tokens: Any, tp: Any, sp: Any, recompute: Any, fp8: Any, act_bytes: int, delayed: bool = False
) -> Any:
    """[TE-LIN] Transformer Engine's FP8 linears save their quantized input (`te_fp8_input_bytes` b per element)
    instead of the activation-dtype one (c): the QKV and fc1 inputs (LayerNormLinear's normalised output, h each,
    sequence-sharded with SP, the norm writing FP8 directly) and the dense fc2's input (f, /t) save c - b each, on
    every layer; an MoE layer gives the fc1 and fc2 parts back (megatron_moe.layer_activations [FP8-MOE]: its
    router keeps the norm output as it is). The projection's input is the attention output, which TE's fused
    attention keeps in bf16 for its own backward ([TE-ATTN]); [TE-SOI] Megatron-Core sets the projection to save
    that original input (transformer/attention.py @ core_v0.16.1, since core_v0.14.0: `set_save_original_input(
    self.linear_proj)` for FP8 recipes other than delayed scaling, Transformer Engine >= 2.6, "linear_proj also
    saves the quantized tensor of this output"), so only delayed scaling (train.fp8_delayed_scaling) adds its
    quantized copy (b per attention-output element / t) (`delayed`). Full recompute keeps the layer input only (no
    saving).

    [MLA] multi-latent attention has no LayerNormLinear: its input norm is a module of its own and two FP8 linears
    read its output, linear_q_down_proj (linear_q_proj without a q LoRA) and linear_kv_down_proj
    (transformer/multi_latent_attention.py @ core_v0.16.1), each quantizing and saving its own copy, so that input
    keeps 2b where bf16 kept c: c - 2b (0 for per-tensor FP8) instead of c - b. The attention output the projection
    reads is num_heads x v_head_dim wide there."""
    b = te_fp8_input_bytes(fp8)
    c, h = float(act_bytes), model.hidden_size
    t = np.asarray(tp, dtype=np.float64)
    repl = np.where(np.asarray(sp, dtype=bool), t, 1.0)
    attn_out = model.num_heads * model.v_head_dim if model.attention == "mla" else model.q_dim
    proj_copy = np.where(te_delayed(fp8, delayed), b * attn_out / t, 0.0)
    qkv_in = (c - attention_input_copies(model) * b) * h / repl
    per_token = qkv_in + (c - b) * (h / repl + model.ffn_hidden_size / t) - proj_copy
    r = np.asarray(recompute)
    is_full = (r != RECOMPUTE_CODE["none"]) & (r != RECOMPUTE_CODE["selective"])
    return np.where(is_full | (b == 0), 0.0, np.asarray(tokens, dtype=np.float64) * per_token)


def fsdp_gather_delta(layer_matmul: Any, zero_stage: Any, fp8: Any, train: TrainSpec) -> np.ndarray:
    """[MFSDP] with train.fp8_param_gather the model-weight buffer of FP8 params is uint8, so the two gathered
    units (`buffers`) hold the block linears at 1 B per element under tensorwise, and MXFP8 adds the column-wise
    copy's buffer, 2(1 + 1/32) (megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py
    @ d98e8a64: `param_dtype = torch.uint8 if is_dtype_float8`; "Currently, only mxfp8 needs" the transpose
    buffer); c - those bytes less than `buffers` counts. None without FP8 params or below stage 3."""
    c = float(DTYPE_BYTES[train.compute_dtype])
    code = np.asarray(fp8)
    gathered = np.where(code == FP8_CODE["tensorwise"], 1.0, 2.0 * te_fp8_input_bytes(code))
    quantized = train.fp8_param_gather & ((code == FP8_CODE["tensorwise"]) | (code == FP8_CODE["mxfp8"]))
    lm = np.asarray(layer_matmul, dtype=np.float64)
    return np.where((np.asarray(zero_stage) >= 3) & quantized, 2.0 * lm * (gathered - c), 0.0)

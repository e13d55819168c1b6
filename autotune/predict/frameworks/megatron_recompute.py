"""The megatron profile's selective-recompute modules (autotune/predict/frameworks/megatron.py delegates its hooks
`mla_recompute_saving`, `norm_recompute_saving` and `mlp_recompute_saving` here): what Megatron-Core's
`--recompute-modules mla_up_proj`, `layernorm` and `mlp` leave unsaved per micro-batch. Sources: [RCM]
megatron/core/transformer/transformer_config.py `recompute_modules`, transformer_layer.py (`recompute_input_layernorm`,
`recompute_pre_mlp_layernorm`, `recompute_mlp`), multi_latent_attention.py (`recompute_up_proj`) and
models/gpt/gpt_layer_specs.py (which norms are modules of their own) @ core_v0.16.1; [MLA], [TMU] as in megatron.py."""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.predict.frameworks.megatron_te import attention_input_copies, shared_fc1_copy, te_fp8_input_bytes


def mla_saving(model: ModelSpec, tokens: Any, tp: Any, act_bytes: int) -> Any:
    """[MLA] `--recompute-modules mla_up_proj`: the up projections and RoPE run inside a CheckpointWithoutOutput
    whose q, k, v (n/t heads of dqk, dqk, dv) are released once the core attention has run and made again before
    its backward; the checkpoint keeps its inputs, the compressed q and kv and the rope key (qr + kr + dr), where
    the up projections kept the compressed q and kv before and after their norms (2(qr + kr))."""
    if model.attention != "mla":
        return 0.0
    n, dqk = model.num_heads / np.asarray(tp, dtype=np.float64), model.qk_nope_head_dim + model.qk_rope_head_dim
    latent = model.q_lora_rank + model.kv_lora_rank - model.qk_rope_head_dim
    return np.asarray(tokens, dtype=np.float64) * act_bytes * (n * (2 * dqk + model.v_head_dim) + latent)


def norm_saving(
    model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any, delayed: bool = False
) -> tuple[Any, Any]:
    """[RCM] `--recompute-modules layernorm`: a norm that is a module of its own runs in a CheckpointWithoutOutput
    whose output storage is released once the next module has read it (every tensor viewing it: the router's and
    the dispatcher's input, the down projections') and rebuilt before its backward; the checkpoint keeps the norm's
    input, which the residual path keeps anyway. Under Transformer Engine's layer spec (gpt_layer_specs.py
    @ core_v0.16.1) those norms are MLA's input norm (every layer) and an MoE layer's pre-MLP norm; the norm output
    is the QKV / MLP input of [TMU]'s account, h per token (sequence-sharded with SP). MLA's input norm: under an FP8
    recipe `fp8_layer_saving` counts it as the two down projections' quantized copies, 2b (they save the original
    input instead under the module, `set_for_recompute_input_layernorm`), so 2b is released, else the activation
    dtype's c. The MoE pre-MLP norm: the router keeps its output in the activation dtype under every recipe
    (megatron_moe.layer_activations [FP8-MOE]), so c is released, and under delayed scaling (`delayed`) the shared
    expert's quantized copy too (`set_for_recompute_pre_mlp_layernorm` makes its fc1 save the original input)."""
    b = te_fp8_input_bytes(fp8)
    c = float(act_bytes)
    tok = np.asarray(tokens, dtype=np.float64) * model.hidden_size / np.where(np.asarray(sp), tp, 1)
    mla = tok * np.where(b == 0, c, attention_input_copies(model) * b)
    moe = tok * (c + np.where(shared_fc1_copy(model, fp8, delayed), b, 0.0))
    return (mla if model.attention == "mla" else 0.0 * mla), (moe if model.is_moe else 0.0 * moe)


def mlp_saving(model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any) -> Any:
    """[RCM] `--recompute-modules mlp`: a dense layer's MLP (with its fused pre-MLP norm, TE's LayerNormLinear fc1)
    runs under tensor_parallel.checkpoint, which keeps its input, the residual stream the norm kept anyway; gone
    per token: the norm output fc1 saves (h, sequence-sharded with SP) and SwiGLU's fc1 output and fc2 input
    (3f/t) in the activation dtype ([TMU]'s MLP units), less what `fp8_layer_saving` already took off them under
    an FP8 recipe (c - b of the fc1 and fc2 inputs). The same bytes come back for one layer in its backward (the
    transient)."""
    c, h, f = float(act_bytes), model.hidden_size, model.ffn_hidden_size
    b = te_fp8_input_bytes(fp8)
    kept = np.where(b == 0, c, b)  # bytes per element a linear's saved input takes
    t = np.asarray(tp, dtype=np.float64)
    repl = np.where(np.asarray(sp, dtype=bool), t, 1.0)
    per_token = kept * h / repl + 3.0 * c * f / t - (c - kept) * f / t
    return np.asarray(tokens, dtype=np.float64) * per_token

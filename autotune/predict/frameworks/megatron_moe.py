"""The megatron profile's MoE-layer terms (autotune/predict/frameworks/megatron.py delegates its hooks
`moe_layer_activations`, `moe_recompute_saving` and `moe_offload_bytes` here): what Megatron-Core's MoE layer saves
per micro-batch, what its recompute modules drop and what its fine-grained activation offloading moves to the host.

Sources (NVIDIA/Megatron-LM, read from the public repository):
  [RCM] megatron/core/transformer/transformer_config.py @ 0044db1f `recompute_modules` ("moe_act", "moe", ...) with
        recompute_granularity="selective"; moe/experts.py checkpoints the activation function
        (CheckpointWithoutOutput), moe/moe_layer.py the whole layer for "moe".
  [FGO] Fine-grained activation offloading: megatron/core/transformer/transformer_config.py @ d98e8a64
        (fine_grained_activation_offloading, offload_modules "expert_fc1": "offload the input of the expert fc1
        part", "moe_act": "offload the input of the moe act part"; min_offloaded_tensor_size 1024 * 1024;
        activation_offload_fraction 1.0) and docs/user-guide/features/fine_grained_activation_offloading.md (same
        commit: "Each module offloads its input activation to CPU during forward and reloads it before backward").
        Not modelled: the manager's last-group margin (the last offload groups of a micro-batch stay on the device
        to avoid a reload stall) and the copies in flight: the device keeps somewhat more than counted.
Notation: T tokens of the micro-batch on the rank, n = the tokens its expert tp x ep group gathers per rank
(`moe.moe_tokens`: T/tp with SP), k = router top-k, F = moe_ffn_hidden_size, c = activation bytes, g = bytes of a
linear input the experts save (1 under FP8: the quantized copy; c otherwise).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import CODES, FP8_CODE, RECOMPUTE_CODE
from autotune.predict import moe
from autotune.predict.frameworks.megatron_te import shared_fc1_copy, te_fp8_input_bytes

# [FGO] TransformerConfig.min_offloaded_tensor_size (default 1024 * 1024 elements): smaller saved tensors stay
MIN_OFFLOADED_TENSOR_ELEMENTS = 1024 * 1024


def _terms(model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any, etp: Any) -> dict[str, Any]:
    """The quantities every term below starts from: g, c, h, k, F, t, etp, the rank's tokens T, n and the copies
    R = n * etp * k its local experts process."""
    g = np.where(np.asarray(fp8) != FP8_CODE["none"], 1.0, float(act_bytes))
    t, e = np.asarray(tp, dtype=np.float64), np.asarray(etp, dtype=np.float64)
    tok = np.asarray(tokens, dtype=np.float64)
    n = moe.moe_tokens(tok, t, sp)
    return {
        "g": g, "c": float(act_bytes), "h": model.hidden_size, "k": model.moe_router_topk,
        "f": model.moe_ffn_hidden_size, "t": t, "etp": e, "tok": tok, "n": n, "copies": n * e * model.moe_router_topk,
    }  # fmt: skip


def _routed_and_shared(model: ModelSpec, v: dict[str, Any]) -> Any:
    """Per micro-batch: the routed copies' saved tensors (index 8, permuted token g h, fc1's output 2c F/etp, the
    probability c, fc2's input g F/etp), the router's fp32 probabilities (4E per gathered token) and the shared
    expert's SwiGLU ((2c + g) F_s / t per token)."""
    g, c, f, etp = v["g"], v["c"], v["f"], v["etp"]
    routed = v["copies"] * (8.0 + g * v["h"] + (2 * c + g) * f / etp + c) + v["n"] * 4.0 * model.num_experts
    return routed + v["tok"] * (2 * c + g) * model.moe_shared_expert_ffn_hidden_size / v["t"]


def layer_activations(
    model: ModelSpec,
    tokens: Any,
    tp: Any,
    sp: Any,
    recompute: Any,
    act_bytes: int,
    fp8: Any,
    etp: Any = 1,
    delayed: bool = False,
) -> np.ndarray:
    """Megatron-Core's MoE layer (local spec: all-gather dispatcher, SequentialMLP experts with the weighted SwiGLU;
    measured with tests/unit/test_frameworks_megatron_probe.py) beyond the dense layer it replaces. The dispatcher
    gathers its expert tp x ep group's tokens (n each) and keeps the R copies for its local experts (balanced
    routing): per copy the permutation index (int64, 8), the permuted token (g h; the first expert's fc1 keeps the
    whole permuted buffer), fc1's output (2c F/etp, gate and up), the routing probability the weighted SwiGLU applies
    (c) and fc2's input (g F/etp); g = 1 with FP8 on (Transformer Engine's grouped linears keep the FP8-cast inputs,
    transformer_engine/pytorch/module/grouped_linear.py). Learned routing also keeps the router's fp32 probabilities
    (4E per token; force-balanced routing, what the probe and NVIDIA's benchmarks run, replaces the logits by
    constants and keeps none). The shared expert is a TP-split SwiGLU MLP ((2c + g) F_s / t per token). The dense
    SwiGLU's fc1 output and fc2 input (3cf/t per token, the MLP units of megatron.py's [TMU]) are not there. Full recompute keeps the
    layer input only (the dense term).

    Under an FP8 recipe, [FP8-MOE] what `MegatronProfile.fp8_layer_saving` takes off every layer for the dense MLP
    comes back: the pre-MLP norm output stays in the activation dtype ((c - b) h per token, sequence-sharded with SP),
    because the router's gating linear saves it as it is (moe/moe_utils.py `RouterGatingLinearFunction.forward`:
    `ctx.save_for_backward(inp, weight, bias)` before the cast to router_dtype) and an MoE layer has no LayerNormLinear
    to write it in FP8; and the dense fc2 input the layer does not have ((c - b) f/t). The shared expert's fc1 saves
    the original input too (moe/shared_experts.py: `set_save_original_input(self.linear_fc1)` for FP8 recipes other
    than delayed scaling, Transformer Engine >= 2.6: "the output of pre_mlp_layernorm is saved by router"); under
    delayed scaling (`delayed`, train.fp8_delayed_scaling) it keeps its own quantized copy, b h per token (/t with SP:
    TE's column-parallel linear saves the local shard and gathers it again in backward). All @ core_v0.16.1."""
    v = _terms(model, tokens, tp, sp, act_bytes, fp8, etp)
    dense = v["tok"] * 3 * v["c"] * model.ffn_hidden_size / v["t"]
    b = te_fp8_input_bytes(fp8)
    repl = np.where(np.asarray(sp, dtype=bool), v["t"], 1.0)
    back = (v["c"] - b) * (v["h"] / repl + model.ffn_hidden_size / v["t"])
    shared = np.where(shared_fc1_copy(model, fp8, delayed), b * v["h"] / repl, 0.0)
    fp8_moe = v["tok"] * np.where(b > 0, back + shared, 0.0)
    r = np.asarray(recompute)
    is_full = (r != RECOMPUTE_CODE["none"]) & (r != RECOMPUTE_CODE["selective"])
    return np.where(is_full, 0.0, _routed_and_shared(model, v) - dense + fp8_moe)


def recompute_saving(
    model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any, etp: Any, mode: Any
) -> np.ndarray:
    """[RCM] recompute_modules "moe_act": the routed experts' weighted SwiGLU output, fc2's input (g F/etp per token
    copy, `layer_activations`), is dropped after fc2's forward and recomputed from fc1's output in backward. "moe":
    the whole MoE layer is checkpointed from its input (kept as the layer's MLP input), so neither the routed copies
    nor the shared expert keep anything: the full routed + shared term. Full recompute already keeps the layer input
    only (`layer_activations` returns 0 there)."""
    v = _terms(model, tokens, tp, sp, act_bytes, fp8, etp)
    act = v["copies"] * v["g"] * v["f"] / v["etp"]
    m, codes = np.asarray(mode), CODES["moe_recompute"]
    return np.where(m == codes["moe_act"], act, np.where(m == codes["moe"], _routed_and_shared(model, v), 0.0))


def offload_bytes(
    model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any, etp: Any, mode: Any
) -> np.ndarray:
    """[FGO] Fine-grained activation offloading moves each listed module's saved input to the host after its forward
    and back before its backward: "expert_fc1" the permuted tokens the experts' fc1 saves (g h per token copy: the
    FP8 copy under FP8), "moe_act" fc1's output the activation function saves (2c F/etp, gate and up; with
    moe_recompute=moe_act the checkpoint's input, the same tensor). Only tensors of at least
    MIN_OFFLOADED_TENSOR_ELEMENTS go (`min_offloaded_tensor_size`). Full recompute keeps neither (`layer_activations`
    is 0 there; autotune/predict/memory.py moves nothing then)."""
    v = _terms(model, tokens, tp, sp, act_bytes, fp8, etp)
    copies, f, etp_ = v["copies"], v["f"], v["etp"]
    fc1_in = np.where(copies * v["h"] >= MIN_OFFLOADED_TENSOR_ELEMENTS, copies * v["g"] * v["h"], 0.0)
    act_in = np.where(copies * 2 * f / etp_ >= MIN_OFFLOADED_TENSOR_ELEMENTS, copies * 2 * v["c"] * f / etp_, 0.0)
    m, codes = np.asarray(mode), CODES["moe_offload"]
    fc1 = (m == codes["expert_fc1"]) | (m == codes["expert_fc1+moe_act"])
    act = (m == codes["moe_act"]) | (m == codes["expert_fc1+moe_act"])
    return np.where(fc1, fc1_in, 0.0) + np.where(act, act_in, 0.0)

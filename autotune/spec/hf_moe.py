"""The mixture-of-experts and multi-head-latent-attention keys of a Hugging Face config.json, as ModelSpec fields.

Keys per model_type (transformers' config classes):
  mixtral      MixtralConfig: num_local_experts, num_experts_per_tok, intermediate_size (one expert's width; every
               layer is MoE), router_aux_loss_coef. Softmax top-k, re-normalised over the k chosen.
  qwen2_moe    Qwen2MoeConfig: num_experts, num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size,
               decoder_sparse_step, mlp_only_layers, norm_topk_prob, router_aux_loss_coef, intermediate_size (the
               dense layers' MLP).
  qwen3_moe    Qwen3MoeConfig: as qwen2_moe without a shared expert; head_dim decoupled from hidden/heads.
  deepseek_v3  DeepseekV3Config: n_routed_experts, num_experts_per_tok, moe_intermediate_size, n_shared_experts
               (shared width = n_shared_experts * moe_intermediate_size), first_k_dense_replace, moe_layer_freq,
               scoring_func sigmoid, norm_topk_prob, aux_loss_alpha, group-limited routing n_group / topk_group
               (moe_router_num_groups / moe_router_group_topk when n_group > 1), and MLA: q_lora_rank, kv_lora_rank,
               qk_nope_head_dim, qk_rope_head_dim, v_head_dim.
What ModelSpec does not hold (named in `HFModelConfig.notes`): DeepSeek-V3's multi-token-prediction
module (num_nextn_predict_layers: one extra block at training time, not counted); Qwen2-MoE's shared-expert gate
(h parameters per layer); a `mlp_only_layers` list that is not a prefix of the layers is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.core.errors import InputFileError

MOE_MODEL_TYPES: dict[str, str] = {
    "mixtral": "MixtralForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
}


def _nonneg(raw: dict[str, Any], key: str, p: Path, default: int | None = None) -> int:
    v = raw.get(key, default)
    if v is None:
        raise InputFileError(f"{p}: missing key {key}")
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InputFileError(f"{p}: {key}={v!r} must be an integer >= 0")
    return v


def _coef(raw: dict[str, Any], key: str, default: float, p: Path) -> float:
    v = raw.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise InputFileError(f"{p}: {key}={v!r} must be a number >= 0")
    return float(v)


def _first_k_dense(raw: dict[str, Any], p: Path) -> int:
    """Qwen's mlp_only_layers as a count of leading dense layers (the only form ModelSpec holds)."""
    layers = raw.get("mlp_only_layers") or []
    if not isinstance(layers, list) or sorted(layers) != list(range(len(layers))):
        raise InputFileError(
            f"{p}: mlp_only_layers={layers!r} is not supported (only the first k layers dense: [0, 1, ..., k-1])"
        )
    return len(layers)


def moe_fields(raw: dict[str, Any], model_type: str, p: Path) -> tuple[dict[str, Any], list[str]]:
    """ModelSpec keyword arguments for the MoE/MLA part of a config.json, and notes on what is not modelled."""
    notes: list[str] = []
    if model_type == "mixtral":
        return {
            "num_experts": _nonneg(raw, "num_local_experts", p),
            "moe_router_topk": _nonneg(raw, "num_experts_per_tok", p),
            "moe_ffn_hidden_size": _nonneg(raw, "intermediate_size", p),
            "moe_aux_loss_coeff": _coef(raw, "router_aux_loss_coef", 0.02, p),
        }, notes
    if model_type in ("qwen2_moe", "qwen3_moe"):
        fields = {
            "num_experts": _nonneg(raw, "num_experts", p),
            "moe_router_topk": _nonneg(raw, "num_experts_per_tok", p),
            "moe_ffn_hidden_size": _nonneg(raw, "moe_intermediate_size", p),
            "moe_layer_freq": max(1, _nonneg(raw, "decoder_sparse_step", p, 1)),
            "moe_first_k_dense": _first_k_dense(raw, p),
            "moe_norm_topk": bool(raw.get("norm_topk_prob", model_type == "qwen3_moe")),
            "moe_aux_loss_coeff": _coef(raw, "router_aux_loss_coef", 0.001, p),
        }
        if model_type == "qwen2_moe":
            fields["moe_shared_expert_ffn_hidden_size"] = _nonneg(raw, "shared_expert_intermediate_size", p, 0)
            notes.append("the shared expert's sigmoid gate (hidden_size parameters per layer) is not counted")
        return fields, notes
    if model_type == "deepseek_v3":
        width = _nonneg(raw, "moe_intermediate_size", p)
        if raw.get("scoring_func", "sigmoid") not in ("sigmoid", "softmax"):
            raise InputFileError(f"{p}: scoring_func={raw.get('scoring_func')!r} must be sigmoid or softmax")
        groups = _nonneg(raw, "n_group", p, 1) or 1  # 1 group = no limit (Kimi-K2: n_group 1, topk_group 1)
        if raw.get("num_nextn_predict_layers"):
            notes.append(
                f"the multi-token-prediction module (num_nextn_predict_layers={raw['num_nextn_predict_layers']}) "
                "is not counted"
            )
        return {
            "num_experts": _nonneg(raw, "n_routed_experts", p),
            "moe_router_topk": _nonneg(raw, "num_experts_per_tok", p),
            "moe_ffn_hidden_size": width,
            "moe_shared_expert_ffn_hidden_size": _nonneg(raw, "n_shared_experts", p, 0) * width,
            "moe_first_k_dense": _nonneg(raw, "first_k_dense_replace", p, 0),
            "moe_layer_freq": max(1, _nonneg(raw, "moe_layer_freq", p, 1)),
            "moe_router": raw.get("scoring_func", "sigmoid"),
            "moe_norm_topk": bool(raw.get("norm_topk_prob", True)),
            "moe_aux_loss_coeff": _coef(raw, "aux_loss_alpha", 0.0, p),
            "moe_router_num_groups": groups if groups > 1 else 0,
            "moe_router_group_topk": _nonneg(raw, "topk_group", p, groups) if groups > 1 else 0,
            "attention": "mla",
            "q_lora_rank": _nonneg(raw, "q_lora_rank", p, 0),
            "kv_lora_rank": _nonneg(raw, "kv_lora_rank", p),
            "qk_nope_head_dim": _nonneg(raw, "qk_nope_head_dim", p),
            "qk_rope_head_dim": _nonneg(raw, "qk_rope_head_dim", p),
            "v_head_dim": _nonneg(raw, "v_head_dim", p),
        }, notes
    return {}, notes

"""Transformer Engine's fused grouped MLP in the NeMo / Megatron-Bridge performance rows (train.fused_grouped_mlp,
priced in autotune/predict/perf_moe.py), read off the performance configs of the Megatron-Bridge release each container
ships (the container -> release pairing of autotune/fitting/nemo_cuda_graphs.py, an assumption stated there):

  NeMo 26.06, 26.06.01  v0.5.1  scripts/performance/configs/{gpt_oss,qwen,deepseek}/*_workload_base_configs.py:
                                `cutedsl_fused_grouped_mlp=True` in GPT_OSS_120B_PRETRAIN_CONFIG_{GB200,GB300}_FP8_MX_V2,
                                QWEN3_235B_A22B_PRETRAIN_CONFIG_{B200,B300,GB200,GB300}_FP8_MX_V2, QWEN3_30B_A3B_
                                PRETRAIN_CONFIG_{B200,B300,GB200,GB300}_FP8_MX_V1 and DEEPSEEK_V3_PRETRAIN_CONFIG_{B300,
                                GB200,GB300}_FP8_MX_V1 (the V2 / large-scale configs inherit it); not in GPT-OSS B300
                                (FP8_MX_V2 = BF16_V2) nor DeepSeek-V3 B200 (the DeepEP config). The launcher then sets
                                NVTE_CUTEDSL_FUSED_GROUPED_MLP=1 (scripts/performance/perf_plugins.py) and
                                use_transformer_engine_op_fuser (utils/overrides.py).
  NeMo 26.08            v0.6.0  src/megatron/bridge/perf_recipes/<model>/<gpu>/*.py: "NVTE_CUTEDSL_FUSED_GROUPED_MLP": 1
                                in every Blackwell fp8mx config of GPT-OSS-120B (B300 too), Qwen3-235B-A22B,
                                Qwen3-30B-A3B and DeepSeek-V3 (B300, GB200, GB300).
FP8 attention (train.fp8_attention: `fp8_dot_product_attention=True`, mixed_precision.fp8_dot_product_attention) comes
with the same configs but DeepSeek-V3 on GB200 (DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_FP8_MX_V1 @ v0.5.1 does not set it;
v0.6.0 deepseek/gb200/deepseek_v3.py calls `_enable_deepseek_full_iteration_mxfp8` without it, gb300 and b300 with
fp8_dot_product_attention=True; gpt_oss/common.py `_apply_gpt_oss_120b_full_iter_fp8mx_configs` and qwen/common.py
`_enable_hybridep_full_iteration_mxfp8` set it). No release before v0.5.1 names either (its TE kernel arrives in TransformerEngine #2769, 2026-04-03). Only MXFP8 rows are
keyed (TE fuses the MLP under MXFP8 / NVFP4 only, and no NVFP4 config of these models sets it). NOT MAPPED (False): the dense
models, Kimi-K2 and the Nemotron models (their configs were not read).
"""

from __future__ import annotations

_V051 = {
    "GPT OSS 120B": ("GB200", "GB300"),
    "Qwen3_235B_a22B": ("B200", "B300", "GB200", "GB300"),
    "Qwen3_30B_a3B": ("B200", "B300", "GB200", "GB300"),
    "DeepSeekV3": ("B300", "GB200", "GB300"),
}
_V060 = {**_V051, "GPT OSS 120B": ("B300", "GB200", "GB300")}
FUSED_GROUPED_MLP: dict[str, dict[str, tuple[str, ...]]] = {
    "NeMo 26.06": _V051,
    "NeMo 26.06.01": _V051,
    "NeMo 26.08": _V060,
}


def recipe_fused_grouped_mlp(model: str, gpu: str, container: str, fp8: str) -> bool:
    """train.fused_grouped_mlp of a summary row (table above): True for the mapped MXFP8 configs, else False."""
    return fp8 == "mxfp8" and gpu in FUSED_GROUPED_MLP.get(container, {}).get(model, ())


NO_FP8_ATTENTION = {("DeepSeekV3", "GB200")}  # the fused-MLP configs without FP8 attention (module doc)


def recipe_fp8_attention(model: str, gpu: str, container: str, fp8: str) -> bool:
    """train.fp8_attention of a summary row (module doc): the fused-MLP configs but NO_FP8_ATTENTION."""
    return recipe_fused_grouped_mlp(model, gpu, container, fp8) and (model, gpu) not in NO_FP8_ATTENTION

"""CUDA graphs of the NeMo / Megatron-Bridge performance rows (train.cuda_graphs, autotune/predict/host.py), read off the
performance configs of the Megatron-Bridge release each container ships (NVIDIA-NeMo/Megatron-Bridge):

  container            release   configs
  NeMo 25.09           cac49dcd7 scripts/performance/configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml ("Malay/qwen3 2509",
                                 2025-09-27): `cuda_graphs: true` on GB200 and B200 (helpers.set_cuda_graph_overrides:
                                 model.enable_cuda_graph, Megatron's per-layer "local" graphs, which the token-drop
                                 recipe's static shapes allow), false on H100
  NeMo 25.11           v0.2.0    scripts/performance/configs/{qwen3,gpt_oss}/workload_base_configs.py
  NeMo 26.02           v0.3.0    scripts/performance/configs/{qwen,gpt_oss}/*_workload_base_configs.py
  NeMo 26.02.01        v0.3.1    (the same files)
  NeMo 26.04, 26.04.01 v0.4.2
  NeMo 26.06, 26.06.01 v0.5.1
  NeMo 26.08           v0.6.0    src/megatron/bridge/perf_recipes/<model>/<gpu>/*.py
The container -> release pairing is by release order and date (v0.3.0 2026-02-26 ... v0.6.0 2026-08-19; each tag's
docs/performance-summary.md lists its containers) and is an assumption: the table does not name the release. Per
config: cuda_graph_impl "transformer_engine" with scope [moe_router, moe_preprocess] -> "moe", with attn as well ->
"attn_moe"; "full_iteration" -> "full"; none set -> "none". Where a release has a V2 config it is the one taken (the
perf scripts' --config_variant defaults to v2, scripts/performance/argument_parser.py @ v0.5.1). The table was
generated from those files (every Qwen3-30B-A3B, Qwen3-235B-A22B and GPT-OSS-120B config per GPU and precision) and
is kept here so the package reads nothing outside the repository.

NOT MAPPED (train.cuda_graphs stays "none", which may be wrong): the dense models (Llama 3 / 3.1, Nemotron, GPT-3),
DeepSeek-V3, Kimi-K2 (their configs were not read), every container before 25.11 but the 25.09 token-drop rows, and
any (model, GPU, container, recipe) the table below lacks.
"""

from __future__ import annotations

# (summary model, GPU, container, plan.fp8) -> train.cuda_graphs, with the release and config it was read from
RECIPE_CUDA_GRAPHS: dict[tuple[str, str, str, str], str] = {
    ("GPT OSS 120B", "B200", "NeMo 25.11", "none"): "none",  # v0.2.0 GPT_OSS_120B_B200_BF16_BASE_CONFIG
    ("GPT OSS 120B", "B200", "NeMo 26.02", "none"): "none",  # v0.3.0 GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2
    ("GPT OSS 120B", "B200", "NeMo 26.02.01", "none"): "none",  # v0.3.1 GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2
    ("GPT OSS 120B", "B200", "NeMo 26.04", "mxfp8"): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_B200_FP8_MX_V2
    ("GPT OSS 120B", "B200", "NeMo 26.04", "none"): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2
    ("GPT OSS 120B", "B200", "NeMo 26.04.01", "mxfp8"): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_B200_FP8_MX_V2
    ("GPT OSS 120B", "B200", "NeMo 26.04.01", "none"): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2
    ("GPT OSS 120B", "B200", "NeMo 26.06", "mxfp8"): "none",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_B200_FP8_MX_V2
    ("GPT OSS 120B", "B200", "NeMo 26.06", "none"): "none",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2
    ("GPT OSS 120B", "B200", "NeMo 26.06.01", "mxfp8"): "none",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_B200_FP8_MX_V2
    ("GPT OSS 120B", "B200", "NeMo 26.06.01", "none"): "none",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2
    ("GPT OSS 120B", "B300", "NeMo 26.02", "none"): "attn_moe",  # v0.3.0 GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2
    ("GPT OSS 120B", "B300", "NeMo 26.02.01", "none"): "attn_moe",  # v0.3.1 GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2
    ("GPT OSS 120B", "B300", "NeMo 26.04", "mxfp8"): "attn_moe",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_B300_FP8_MX_V2
    ("GPT OSS 120B", "B300", "NeMo 26.04", "none"): "attn_moe",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2
    (
        "GPT OSS 120B",
        "B300",
        "NeMo 26.04.01",
        "mxfp8",
    ): "attn_moe",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_B300_FP8_MX_V2
    ("GPT OSS 120B", "B300", "NeMo 26.04.01", "none"): "attn_moe",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2
    ("GPT OSS 120B", "B300", "NeMo 26.06", "mxfp8"): "attn_moe",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_B300_FP8_MX_V2
    ("GPT OSS 120B", "B300", "NeMo 26.06", "none"): "attn_moe",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2
    (
        "GPT OSS 120B",
        "B300",
        "NeMo 26.06.01",
        "mxfp8",
    ): "attn_moe",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_B300_FP8_MX_V2
    ("GPT OSS 120B", "B300", "NeMo 26.06.01", "none"): "attn_moe",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_B300_BF16_V2
    ("GPT OSS 120B", "GB200", "NeMo 25.11", "none"): "none",  # v0.2.0 GPT_OSS_120B_GB200_BF16_BASE_CONFIG
    ("GPT OSS 120B", "GB200", "NeMo 26.02", "none"): "none",  # v0.3.0 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2
    ("GPT OSS 120B", "GB200", "NeMo 26.02.01", "none"): "none",  # v0.3.1 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2
    ("GPT OSS 120B", "GB200", "NeMo 26.04", "mxfp8"): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_FP8_MX_V2
    ("GPT OSS 120B", "GB200", "NeMo 26.04", "none"): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2
    ("GPT OSS 120B", "GB200", "NeMo 26.04.01", "mxfp8"): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_FP8_MX_V2
    ("GPT OSS 120B", "GB200", "NeMo 26.04.01", "none"): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2
    ("GPT OSS 120B", "GB200", "NeMo 26.06", "mxfp8"): "full",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_FP8_MX_V2
    ("GPT OSS 120B", "GB200", "NeMo 26.06", "none"): "none",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2
    ("GPT OSS 120B", "GB200", "NeMo 26.06.01", "mxfp8"): "full",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_FP8_MX_V2
    ("GPT OSS 120B", "GB200", "NeMo 26.06.01", "none"): "none",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2
    (
        "GPT OSS 120B",
        "GB200",
        "NeMo 26.08",
        "mxfp8",
    ): "full",  # v0.6.0 perf_recipes/gpt_oss/gb200/gpt_oss.py gpt_oss_120b_pretrain_64gpu_gb200_fp8mx_config
    ("GPT OSS 120B", "GB300", "NeMo 25.11", "none"): "attn_moe",  # v0.2.0 GPT_OSS_120B_GB300_BF16_BASE_CONFIG
    ("GPT OSS 120B", "GB300", "NeMo 26.02", "none"): "attn_moe",  # v0.3.0 GPT_OSS_120B_PRETRAIN_CONFIG_GB300_BF16_V2
    ("GPT OSS 120B", "GB300", "NeMo 26.02.01", "none"): "attn_moe",  # v0.3.1 GPT_OSS_120B_PRETRAIN_CONFIG_GB300_BF16_V2
    ("GPT OSS 120B", "GB300", "NeMo 26.04", "mxfp8"): "attn_moe",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_GB300_FP8_MX_V2
    ("GPT OSS 120B", "GB300", "NeMo 26.04", "none"): "attn_moe",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_GB300_BF16_V2
    (
        "GPT OSS 120B",
        "GB300",
        "NeMo 26.04.01",
        "mxfp8",
    ): "attn_moe",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_GB300_FP8_MX_V2
    ("GPT OSS 120B", "GB300", "NeMo 26.04.01", "none"): "attn_moe",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_GB300_BF16_V2
    ("GPT OSS 120B", "GB300", "NeMo 26.06", "mxfp8"): "full",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_GB300_FP8_MX_V2
    ("GPT OSS 120B", "GB300", "NeMo 26.06", "none"): "attn_moe",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_GB300_BF16_V2
    ("GPT OSS 120B", "GB300", "NeMo 26.06.01", "mxfp8"): "full",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_GB300_FP8_MX_V2
    ("GPT OSS 120B", "GB300", "NeMo 26.06.01", "none"): "attn_moe",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_GB300_BF16_V2
    (
        "GPT OSS 120B",
        "GB300",
        "NeMo 26.08",
        "mxfp8",
    ): "full",  # v0.6.0 perf_recipes/gpt_oss/gb300/gpt_oss.py gpt_oss_120b_pretrain_64gpu_gb300_fp8mx_config
    ("GPT OSS 120B", "H100", "NeMo 25.11", "none"): "none",  # v0.2.0 GPT_OSS_120B_H100_BF16_BASE_CONFIG
    ("GPT OSS 120B", "H100", "NeMo 26.02", "none"): "none",  # v0.3.0 GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V2
    ("GPT OSS 120B", "H100", "NeMo 26.02.01", "none"): "none",  # v0.3.1 GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V2
    ("GPT OSS 120B", "H100", "NeMo 26.04", "none"): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V2
    ("GPT OSS 120B", "H100", "NeMo 26.04", "tensorwise"): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_H100_FP8_CS_V2
    ("GPT OSS 120B", "H100", "NeMo 26.04.01", "none"): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V2
    (
        "GPT OSS 120B",
        "H100",
        "NeMo 26.04.01",
        "tensorwise",
    ): "none",  # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_H100_FP8_CS_V2
    ("GPT OSS 120B", "H100", "NeMo 26.06", "none"): "none",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V2
    ("GPT OSS 120B", "H100", "NeMo 26.06", "tensorwise"): "none",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_H100_FP8_CS_V2
    ("GPT OSS 120B", "H100", "NeMo 26.06.01", "none"): "none",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V2
    (
        "GPT OSS 120B",
        "H100",
        "NeMo 26.06.01",
        "tensorwise",
    ): "none",  # v0.5.1 GPT_OSS_120B_PRETRAIN_CONFIG_H100_FP8_CS_V2
    ("Qwen3_235B_a22B", "B200", "NeMo 25.11", "mxfp8"): "none",  # v0.2.0 QWEN3_235B_A22B_B200_FP8_MX_BASE_CONFIG
    ("Qwen3_235B_a22B", "B200", "NeMo 25.11", "none"): "none",  # v0.2.0 QWEN3_235B_A22B_B200_BF16_BASE_CONFIG
    ("Qwen3_235B_a22B", "B200", "NeMo 25.11", "tensorwise"): "none",  # v0.2.0 QWEN3_235B_A22B_B200_FP8_CS_BASE_CONFIG
    ("Qwen3_235B_a22B", "B200", "NeMo 26.02", "mxfp8"): "none",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_MX_V2
    ("Qwen3_235B_a22B", "B200", "NeMo 26.02", "none"): "none",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B200",
        "NeMo 26.02",
        "tensorwise",
    ): "none",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "B200",
        "NeMo 26.02.01",
        "mxfp8",
    ): "none",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_MX_V2
    ("Qwen3_235B_a22B", "B200", "NeMo 26.02.01", "none"): "none",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B200",
        "NeMo 26.02.01",
        "tensorwise",
    ): "none",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_CS_V2
    ("Qwen3_235B_a22B", "B200", "NeMo 26.04", "mxfp8"): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_MX_V2
    ("Qwen3_235B_a22B", "B200", "NeMo 26.04", "none"): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B200",
        "NeMo 26.04",
        "tensorwise",
    ): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "B200",
        "NeMo 26.04.01",
        "mxfp8",
    ): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_MX_V2
    ("Qwen3_235B_a22B", "B200", "NeMo 26.04.01", "none"): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B200",
        "NeMo 26.04.01",
        "tensorwise",
    ): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_CS_V2
    ("Qwen3_235B_a22B", "B200", "NeMo 26.06", "mxfp8"): "full",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_MX_V2
    ("Qwen3_235B_a22B", "B200", "NeMo 26.06", "none"): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B200",
        "NeMo 26.06",
        "tensorwise",
    ): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "B200",
        "NeMo 26.06.01",
        "mxfp8",
    ): "full",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_MX_V2
    ("Qwen3_235B_a22B", "B200", "NeMo 26.06.01", "none"): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B200",
        "NeMo 26.06.01",
        "tensorwise",
    ): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_CS_V2
    ("Qwen3_235B_a22B", "B300", "NeMo 26.02", "mxfp8"): "none",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2
    ("Qwen3_235B_a22B", "B300", "NeMo 26.02", "none"): "none",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B300",
        "NeMo 26.02",
        "tensorwise",
    ): "none",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "B300",
        "NeMo 26.02.01",
        "mxfp8",
    ): "none",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2
    ("Qwen3_235B_a22B", "B300", "NeMo 26.02.01", "none"): "none",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B300",
        "NeMo 26.02.01",
        "tensorwise",
    ): "none",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_CS_V2
    ("Qwen3_235B_a22B", "B300", "NeMo 26.04", "mxfp8"): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2
    ("Qwen3_235B_a22B", "B300", "NeMo 26.04", "none"): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B300",
        "NeMo 26.04",
        "tensorwise",
    ): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "B300",
        "NeMo 26.04.01",
        "mxfp8",
    ): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2
    ("Qwen3_235B_a22B", "B300", "NeMo 26.04.01", "none"): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B300",
        "NeMo 26.04.01",
        "tensorwise",
    ): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_CS_V2
    ("Qwen3_235B_a22B", "B300", "NeMo 26.06", "mxfp8"): "full",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2
    ("Qwen3_235B_a22B", "B300", "NeMo 26.06", "none"): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B300",
        "NeMo 26.06",
        "tensorwise",
    ): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "B300",
        "NeMo 26.06.01",
        "mxfp8",
    ): "full",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2
    ("Qwen3_235B_a22B", "B300", "NeMo 26.06.01", "none"): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "B300",
        "NeMo 26.06.01",
        "tensorwise",
    ): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_CS_V2
    ("Qwen3_235B_a22B", "GB200", "NeMo 25.11", "mxfp8"): "attn_moe",  # v0.2.0 QWEN3_235B_A22B_GB200_FP8_MX_BASE_CONFIG
    ("Qwen3_235B_a22B", "GB200", "NeMo 25.11", "none"): "attn_moe",  # v0.2.0 QWEN3_235B_A22B_GB200_BF16_BASE_CONFIG
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 25.11",
        "tensorwise",
    ): "attn_moe",  # v0.2.0 QWEN3_235B_A22B_GB200_FP8_CS_BASE_CONFIG
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.02",
        "mxfp8",
    ): "attn_moe",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.02",
        "none",
    ): "attn_moe",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.02",
        "tensorwise",
    ): "attn_moe",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.02.01",
        "mxfp8",
    ): "attn_moe",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.02.01",
        "none",
    ): "attn_moe",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.02.01",
        "tensorwise",
    ): "attn_moe",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.04",
        "mxfp8",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.04",
        "none",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.04",
        "tensorwise",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.04.01",
        "mxfp8",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.04.01",
        "none",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.04.01",
        "tensorwise",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.06",
        "mxfp8",
    ): "full",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.06",
        "none",
    ): "attn_moe",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.06",
        "tensorwise",
    ): "attn_moe",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.06.01",
        "mxfp8",
    ): "full",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.06.01",
        "none",
    ): "attn_moe",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB200",
        "NeMo 26.06.01",
        "tensorwise",
    ): "attn_moe",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_CS_V2
    ("Qwen3_235B_a22B", "GB300", "NeMo 25.11", "mxfp8"): "moe",  # v0.2.0 QWEN3_235B_A22B_GB300_FP8_MX_BASE_CONFIG
    ("Qwen3_235B_a22B", "GB300", "NeMo 25.11", "none"): "moe",  # v0.2.0 QWEN3_235B_A22B_GB300_BF16_BASE_CONFIG
    ("Qwen3_235B_a22B", "GB300", "NeMo 25.11", "tensorwise"): "moe",  # v0.2.0 QWEN3_235B_A22B_GB300_FP8_CS_BASE_CONFIG
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.02",
        "mxfp8",
    ): "attn_moe",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2
    ("Qwen3_235B_a22B", "GB300", "NeMo 26.02", "none"): "moe",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.02",
        "tensorwise",
    ): "attn_moe",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.02.01",
        "mxfp8",
    ): "attn_moe",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.02.01",
        "none",
    ): "attn_moe",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.02.01",
        "tensorwise",
    ): "attn_moe",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.04",
        "mxfp8",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.04",
        "none",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.04",
        "tensorwise",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.04.01",
        "mxfp8",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.04.01",
        "none",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.04.01",
        "tensorwise",
    ): "attn_moe",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.06",
        "mxfp8",
    ): "full",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.06",
        "none",
    ): "attn_moe",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.06",
        "tensorwise",
    ): "attn_moe",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_CS_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.06.01",
        "mxfp8",
    ): "full",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.06.01",
        "none",
    ): "attn_moe",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_BF16_V2
    (
        "Qwen3_235B_a22B",
        "GB300",
        "NeMo 26.06.01",
        "tensorwise",
    ): "attn_moe",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_CS_V2
    ("Qwen3_235B_a22B", "H100", "NeMo 25.11", "none"): "none",  # v0.2.0 QWEN3_235B_A22B_H100_BF16_BASE_CONFIG
    ("Qwen3_235B_a22B", "H100", "NeMo 25.11", "tensorwise"): "none",  # v0.2.0 QWEN3_235B_A22B_H100_FP8_CS_BASE_CONFIG
    ("Qwen3_235B_a22B", "H100", "NeMo 26.02", "none"): "none",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_BF16_V2
    (
        "Qwen3_235B_a22B",
        "H100",
        "NeMo 26.02",
        "tensorwise",
    ): "none",  # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2
    ("Qwen3_235B_a22B", "H100", "NeMo 26.02.01", "none"): "none",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_BF16_V2
    (
        "Qwen3_235B_a22B",
        "H100",
        "NeMo 26.02.01",
        "tensorwise",
    ): "none",  # v0.3.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2
    ("Qwen3_235B_a22B", "H100", "NeMo 26.04", "none"): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_BF16_V2
    (
        "Qwen3_235B_a22B",
        "H100",
        "NeMo 26.04",
        "tensorwise",
    ): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2
    ("Qwen3_235B_a22B", "H100", "NeMo 26.04.01", "none"): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_BF16_V2
    (
        "Qwen3_235B_a22B",
        "H100",
        "NeMo 26.04.01",
        "tensorwise",
    ): "none",  # v0.4.2 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2
    ("Qwen3_235B_a22B", "H100", "NeMo 26.06", "none"): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_BF16_V2
    (
        "Qwen3_235B_a22B",
        "H100",
        "NeMo 26.06",
        "tensorwise",
    ): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2
    ("Qwen3_235B_a22B", "H100", "NeMo 26.06.01", "none"): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_BF16_V2
    (
        "Qwen3_235B_a22B",
        "H100",
        "NeMo 26.06.01",
        "tensorwise",
    ): "none",  # v0.5.1 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2
    ("Qwen3_30B_a3B", "B200", "NeMo 25.11", "mxfp8"): "moe",  # v0.2.0 QWEN3_30B_A3B_B200_FP8_MX_BASE_CONFIG
    ("Qwen3_30B_a3B", "B200", "NeMo 25.11", "none"): "moe",  # v0.2.0 QWEN3_30B_A3B_B200_BF16_BASE_CONFIG
    ("Qwen3_30B_a3B", "B200", "NeMo 25.11", "tensorwise"): "moe",  # v0.2.0 QWEN3_30B_A3B_B200_FP8_CS_BASE_CONFIG
    ("Qwen3_30B_a3B", "B200", "NeMo 26.02", "mxfp8"): "moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.02", "none"): "moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_BF16_V1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.02", "tensorwise"): "moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_CS_V1
    (
        "Qwen3_30B_a3B",
        "B200",
        "NeMo 26.02.01",
        "mxfp8",
    ): "attn_moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.02.01", "none"): "attn_moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_BF16_V1
    (
        "Qwen3_30B_a3B",
        "B200",
        "NeMo 26.02.01",
        "tensorwise",
    ): "attn_moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_CS_V1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.04", "mxfp8"): "attn_moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.04", "none"): "attn_moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_BF16_V1
    (
        "Qwen3_30B_a3B",
        "B200",
        "NeMo 26.04",
        "tensorwise",
    ): "attn_moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_CS_V1
    (
        "Qwen3_30B_a3B",
        "B200",
        "NeMo 26.04.01",
        "mxfp8",
    ): "attn_moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.04.01", "none"): "attn_moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_BF16_V1
    (
        "Qwen3_30B_a3B",
        "B200",
        "NeMo 26.04.01",
        "tensorwise",
    ): "attn_moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_CS_V1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.06", "mxfp8"): "full",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.06", "none"): "attn_moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_BF16_V1
    (
        "Qwen3_30B_a3B",
        "B200",
        "NeMo 26.06",
        "tensorwise",
    ): "attn_moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_CS_V1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.06.01", "mxfp8"): "full",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.06.01", "none"): "attn_moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_BF16_V1
    (
        "Qwen3_30B_a3B",
        "B200",
        "NeMo 26.06.01",
        "tensorwise",
    ): "attn_moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_CS_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.02", "mxfp8"): "moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.02", "none"): "moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_BF16_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.02", "tensorwise"): "moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_CS_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.02.01", "mxfp8"): "moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.02.01", "none"): "moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_BF16_V1
    (
        "Qwen3_30B_a3B",
        "B300",
        "NeMo 26.02.01",
        "tensorwise",
    ): "moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_CS_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.04", "mxfp8"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.04", "none"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_BF16_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.04", "tensorwise"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_CS_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.04.01", "mxfp8"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.04.01", "none"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_BF16_V1
    (
        "Qwen3_30B_a3B",
        "B300",
        "NeMo 26.04.01",
        "tensorwise",
    ): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_CS_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.06", "mxfp8"): "full",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.06", "none"): "moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_BF16_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.06", "tensorwise"): "moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_CS_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.06.01", "mxfp8"): "full",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.06.01", "none"): "moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_BF16_V1
    (
        "Qwen3_30B_a3B",
        "B300",
        "NeMo 26.06.01",
        "tensorwise",
    ): "moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_CS_V1
    ("Qwen3_30B_a3B", "GB200", "NeMo 25.11", "mxfp8"): "moe",  # v0.2.0 QWEN3_30B_A3B_GB200_FP8_MX_BASE_CONFIG
    ("Qwen3_30B_a3B", "GB200", "NeMo 25.11", "none"): "attn_moe",  # v0.2.0 QWEN3_30B_A3B_GB200_BF16_BASE_CONFIG
    ("Qwen3_30B_a3B", "GB200", "NeMo 25.11", "tensorwise"): "attn_moe",  # v0.2.0 QWEN3_30B_A3B_GB200_FP8_CS_BASE_CONFIG
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.02", "mxfp8"): "moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.02", "none"): "attn_moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB200",
        "NeMo 26.02",
        "tensorwise",
    ): "attn_moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_CS_V1
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.02.01", "mxfp8"): "moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1
    (
        "Qwen3_30B_a3B",
        "GB200",
        "NeMo 26.02.01",
        "none",
    ): "attn_moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB200",
        "NeMo 26.02.01",
        "tensorwise",
    ): "attn_moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_CS_V1
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.04", "mxfp8"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.04", "none"): "attn_moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB200",
        "NeMo 26.04",
        "tensorwise",
    ): "attn_moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_CS_V1
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.04.01", "mxfp8"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1
    (
        "Qwen3_30B_a3B",
        "GB200",
        "NeMo 26.04.01",
        "none",
    ): "attn_moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB200",
        "NeMo 26.04.01",
        "tensorwise",
    ): "attn_moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_CS_V1
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.06", "mxfp8"): "full",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.06", "none"): "attn_moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB200",
        "NeMo 26.06",
        "tensorwise",
    ): "attn_moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_CS_V1
    (
        "Qwen3_30B_a3B",
        "GB200",
        "NeMo 26.06.01",
        "mxfp8",
    ): "full",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1
    (
        "Qwen3_30B_a3B",
        "GB200",
        "NeMo 26.06.01",
        "none",
    ): "attn_moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB200",
        "NeMo 26.06.01",
        "tensorwise",
    ): "attn_moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_CS_V1
    (
        "Qwen3_30B_a3B",
        "GB200",
        "NeMo 26.08",
        "mxfp8",
    ): "full",  # v0.6.0 perf_recipes/qwen/gb200/qwen3_moe.py qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx_config
    ("Qwen3_30B_a3B", "GB300", "NeMo 25.11", "mxfp8"): "moe",  # v0.2.0 QWEN3_30B_A3B_GB300_FP8_MX_BASE_CONFIG
    ("Qwen3_30B_a3B", "GB300", "NeMo 25.11", "none"): "moe",  # v0.2.0 QWEN3_30B_A3B_GB300_BF16_BASE_CONFIG
    ("Qwen3_30B_a3B", "GB300", "NeMo 25.11", "tensorwise"): "moe",  # v0.2.0 QWEN3_30B_A3B_GB300_FP8_CS_BASE_CONFIG
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.02", "mxfp8"): "moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.02", "none"): "moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB300",
        "NeMo 26.02",
        "tensorwise",
    ): "moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_CS_V1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.02.01", "mxfp8"): "moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.02.01", "none"): "moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB300",
        "NeMo 26.02.01",
        "tensorwise",
    ): "moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_CS_V1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.04", "mxfp8"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.04", "none"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB300",
        "NeMo 26.04",
        "tensorwise",
    ): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_CS_V1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.04.01", "mxfp8"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.04.01", "none"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB300",
        "NeMo 26.04.01",
        "tensorwise",
    ): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_CS_V1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.06", "mxfp8"): "full",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.06", "none"): "moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB300",
        "NeMo 26.06",
        "tensorwise",
    ): "moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_CS_V1
    (
        "Qwen3_30B_a3B",
        "GB300",
        "NeMo 26.06.01",
        "mxfp8",
    ): "full",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.06.01", "none"): "moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_BF16_V1
    (
        "Qwen3_30B_a3B",
        "GB300",
        "NeMo 26.06.01",
        "tensorwise",
    ): "moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_CS_V1
    (
        "Qwen3_30B_a3B",
        "GB300",
        "NeMo 26.08",
        "mxfp8",
    ): "full",  # v0.6.0 perf_recipes/qwen/gb300/qwen3_moe.py qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config
    ("Qwen3_30B_a3B", "H100", "NeMo 25.11", "none"): "moe",  # v0.2.0 QWEN3_30B_A3B_H100_BF16_BASE_CONFIG
    ("Qwen3_30B_a3B", "H100", "NeMo 25.11", "tensorwise"): "none",  # v0.2.0 QWEN3_30B_A3B_H100_FP8_CS_BASE_CONFIG
    ("Qwen3_30B_a3B", "H100", "NeMo 26.02", "none"): "moe",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_BF16_V1
    (
        "Qwen3_30B_a3B",
        "H100",
        "NeMo 26.02",
        "tensorwise",
    ): "none",  # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1
    ("Qwen3_30B_a3B", "H100", "NeMo 26.02.01", "none"): "moe",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_BF16_V1
    (
        "Qwen3_30B_a3B",
        "H100",
        "NeMo 26.02.01",
        "tensorwise",
    ): "none",  # v0.3.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1
    ("Qwen3_30B_a3B", "H100", "NeMo 26.04", "none"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_BF16_V1
    (
        "Qwen3_30B_a3B",
        "H100",
        "NeMo 26.04",
        "tensorwise",
    ): "none",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1
    ("Qwen3_30B_a3B", "H100", "NeMo 26.04.01", "none"): "moe",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_BF16_V1
    (
        "Qwen3_30B_a3B",
        "H100",
        "NeMo 26.04.01",
        "tensorwise",
    ): "none",  # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1
    ("Qwen3_30B_a3B", "H100", "NeMo 26.06", "none"): "moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_BF16_V1
    (
        "Qwen3_30B_a3B",
        "H100",
        "NeMo 26.06",
        "tensorwise",
    ): "none",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1
    ("Qwen3_30B_a3B", "H100", "NeMo 26.06.01", "none"): "moe",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_BF16_V1
    (
        "Qwen3_30B_a3B",
        "H100",
        "NeMo 26.06.01",
        "tensorwise",
    ): "none",  # v0.5.1 QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1
}
RECIPE_CUDA_GRAPHS.update(
    {  # cac49dcd7 qwen3_30b_a3b_llm_pretrain.yaml perf_matrix (module doc); the token-drop rows' recipe is not stated
        # in the table: tensorwise (nemo_runs.RECIPE["not stated in table"])
        ("Qwen3_30B_a3B (tokendrop)", "GB200", "NeMo 25.09", "tensorwise"): "full",
        ("Qwen3_30B_a3B (tokendrop)", "B200", "NeMo 25.09", "tensorwise"): "full",
        ("Qwen3_30B_a3B (tokendrop)", "H100", "NeMo 25.09", "tensorwise"): "none",
    }
)


def recipe_cuda_graphs(model: str, gpu: str, container: str, fp8: str) -> str:
    """train.cuda_graphs of one summary row: the table's value, "none" where it is silent (module doc)."""
    return RECIPE_CUDA_GRAPHS.get((model, gpu, container, fp8), "none")

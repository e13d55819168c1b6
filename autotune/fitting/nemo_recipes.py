"""The per-recipe settings of NVIDIA's performance summaries (autotune/fitting/nemo_runs.py maps the rows): what each
Megatron-Bridge / NeMo performance recipe runs beyond the summary's columns, keyed by the row's model, GPU, precision,
GPU count or release, each table with the recipe source (file @ commit) it was read from. Split out of nemo_runs.py
(file size); nemo_runs re-exports the names its readers import."""

from __future__ import annotations

from typing import Any

from autotune.core.types import ParallelPlan

# token-dropping variants: the dropless preset with a capacity factor (nemo_runs module doc)
TOKENDROP = " (tokendrop)"
TOKENDROP_CAPACITY = 1.0

# Activation CPU offloading the Megatron-FSDP perf presets run (plan.act_offload_layers = cpu_offloading_num_layers),
# keyed by (model, gpu, plan.fp8, zero_stage, tp): Megatron-Bridge scripts/performance/configs/llama/
# llama3_workload_base_configs.py @ 00919dcf (LLAMA3_70B_PRETRAIN_CONFIG_GB300_FP8_CS_V1/V2: 20, GB200_FP8_CS: 40;
# mbs 2, use_megatron_fsdp) and llama31_workload_base_configs.py @ 0013c9a8 (LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V1:
# 128 GPUs, TP 2, GBS 64, Megatron-FSDP, 92). Mapped only where the preset matches the row's GPUs, batch and layout.
ACT_OFFLOAD_LAYERS = {
    ("LLAMA3_70B", "GB300", "tensorwise", 3, 1): 20,
    ("LLAMA3_70B", "GB200", "tensorwise", 3, 1): 40,
    ("LLAMA3.1_405B", "GB200", "tensorwise", 3, 2): 92,
}


# Rows whose micro-batch contradicts both their own columns and the recipe of their release, keyed by (model, gpu,
# container): the NeMo 25.11 GPT-OSS-120B H100 row says mbs 4 with ga 2 on 16 data-parallel ranks (16 x 4 x 2 = 128,
# not its gbs 512); Megatron-Bridge r0.2.0 (the 25.11 release branch, 34641780a 2025-11-20) scripts/performance/
# configs/gpt_oss/workload_base_configs.py GPT_OSS_120B_H100_BF16_BASE_CONFIG runs micro_batch_size=1 (PP4, EP8; mbs 4
# and ga 2 are its GB200/GB300/B200 presets' at EP64): the recipe's mbs, ga from gbs.
RECIPE_MBS = {("GPT OSS 120B", "H100", "NeMo 25.11"): 1}
# Rows of the NeMo 26.02.01 table whose layout cells contradict the recipe of their release and the same model, GPU and
# precision in the releases before and after it, keyed by (model, gpu, container, precision): the recipe's
# (mbs, tp, pp, cp, vp). The release is Megatron-Bridge r0.3.1 (docs/releases/known-issues.md @ v0.4.0: "Fixed in
# 26.02.01 (r0.3.1)"; the 26.02.01 table was added on the r0.3.0 release branch, docs/performance-summary.md @
# 8301abfc0), whose presets (scripts/performance/configs/llama/llama3_workload_base_configs.py and
# llama31_workload_base_configs.py @ v0.3.1 9c9dd8489, the GBS-256 / GBS-1536 "V2" variants the rows' batch names) are:
# - LLAMA3_70B_PRETRAIN_CONFIG_GB300_NVFP4_V2 and _FP8_MX_V2: pipeline_model_parallel_size=4,
#   virtual_pipeline_model_parallel_size=5, WorkloadBaseConfig's micro_batch_size=1, TP 1, no Megatron-FSDP; the
#   26.02.01 cells say NVFP4 MBS 2 PP 1 VP n/a and MXFP8 MBS 2 PP 4 VP n/a (the FP8 row's MBS 2 / n/a), where the
#   26.02 and 26.04 tables give both MBS 1 TP 1 PP 4 VP 5 (summary rows 154, 156, 234, 236), as does their throughput:
#   NVFP4 7002 tok/s/GPU between 26.02's 6798 and 26.04's 7397;
# - LLAMA31_405B_PRETRAIN_CONFIG_GB200_NVFP4_V2 = the V1 preset (TP 4, PP 16, CP 1, VP 8) at 256 GPUs; the 26.02.01
#   cell says VP 4 (its FP8 row's), 26.02 and 26.04 say VP 8 (rows 162, 242);
# - LLAMA31_405B_PRETRAIN_CONFIG_GB300_FP8_CS_V2: TP 4, PP 8, CP 1, VP 4; the 26.02.01 cell says TP 2 CP 2 (its MXFP8
#   row's), 26.02 and 26.04 say TP 4 CP 1 (rows 165, 245).
RECIPE_LAYOUT = {
    ("LLAMA3_70B", "GB300", "NeMo 26.02.01", "NVFP4"): (1, 1, 4, 1, 5),
    ("LLAMA3_70B", "GB300", "NeMo 26.02.01", "MXFP8"): (1, 1, 4, 1, 5),
    ("LLAMA3.1_405B", "GB200", "NeMo 26.02.01", "NVFP4"): (1, 4, 16, 1, 8),
    ("LLAMA3.1_405B", "GB300", "NeMo 26.02.01", "FP8"): (1, 4, 8, 1, 4),
}


# Megatron MoE recompute modules of the perf presets (plan.recompute=selective, plan.moe_recompute), keyed by (model,
# gpu, plan.fp8): Megatron-Bridge scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py @ 07eea52d,
# GPT_OSS_120B_PRETRAIN_CONFIG_{B200,GB200,H100}_BF16_V1/V2: recompute_modules=["layernorm", "moe_act"] (the same
# lists @ v0.2.0-v0.5.0; layernorm: plan.norm_recompute, NORM_RECOMPUTE). GB300 / B300 presets recompute nothing.
MOE_RECOMPUTE = {
    ("GPT OSS 120B", "B200", "none"): "moe_act",
    ("GPT OSS 120B", "GB200", "none"): "moe_act",
    ("GPT OSS 120B", "H100", "none"): "moe_act",
}
# the presets whose recompute_modules list "layernorm" (plan.norm_recompute): GPT-OSS's above. DeepSeek-V3's B300
# BF16 (v0.3.0) and B200 NVFP4 (v0.5.0) lists have it too; the summary has no row of either.
NORM_RECOMPUTE = frozenset(MOE_RECOMPUTE)


# Megatron's EP communication overlap (plan.ep_overlap: comm_overlap.overlap_moe_expert_parallel_comm, with
# delay_wgrad_compute) as NVIDIA-NeMo/Megatron-Bridge's perf recipes set it @ 067f987d
# (src/megatron/bridge/perf_recipes/<model>/<gpu>/*.py, directly or through the common helpers
# `_enable_hybridep_full_iteration_mxfp8` (qwen/common.py), `_enable_deepseek_full_iteration_mxfp8`
# (deepseek/common.py), `_apply_gpt_oss_120b_full_iter_fp8mx_configs` (gpt_oss/common.py)), keyed by (model, gpu,
# plan.fp8, n_gpus): on in deepseek_v3_pretrain_256gpu_{b200,b300,gb200,gb300}_fp8mx, qwen3_235b_a22b_pretrain_256gpu_
# {b200,b300,gb200,gb300}_fp8mx, qwen3_235b_a22b_pretrain_256gpu_h100_{bf16,fp8cs}, qwen3_30b_a3b_pretrain_8gpu_
# {b200,b300,gb200,gb300}_fp8mx, gpt_oss_120b_pretrain_64gpu_gb200_{bf16,fp8mx}, gpt_oss_120b_pretrain_64gpu_gb300_
# fp8mx; off in every other config of these models (BF16 / FP8-CS / NVFP4 on Blackwell, Kimi-K2 everywhere, Qwen3-30B
# on 16 H100, the 64-GPU Qwen3-235B B200 FP8-MX config, DeepSeek-V3 on H100). The token-drop rows have no recipe at
# that commit: off (silent recipe = off); so are rows with pp > 1 and no virtual stages, a layout Megatron refuses
# with the overlap (nemo_layout). The summary rows come from older releases (25.09-26.0x); the recipes
# of their release may differ and the table does not say.
EP_OVERLAP_ON = {
    *((m, g, "mxfp8", 256) for m in ("DeepSeekV3", "DeepSeekV3 (w/o MTP)") for g in ("B200", "B300", "GB200", "GB300")),
    *(("Qwen3_235B_a22B", g, "mxfp8", 256) for g in ("B200", "B300", "GB200", "GB300")),
    ("Qwen3_235B_a22B", "H100", "none", 256),
    ("Qwen3_235B_a22B", "H100", "tensorwise", 256),
    *(("Qwen3_30B_a3B", g, "mxfp8", 8) for g in ("B200", "B300", "GB200", "GB300")),
    ("GPT OSS 120B", "GB200", "none", 64),
    ("GPT OSS 120B", "GB200", "mxfp8", 64),
    ("GPT OSS 120B", "GB300", "mxfp8", 64),
}


# Megatron's token dispatcher (plan.moe_dispatcher) as NVIDIA-NeMo/Megatron-Bridge's perf recipes set it @ 067f987d
# (src/megatron/bridge/perf_recipes/<model>/<gpu>/*.py: `cfg.model.moe_flex_dispatcher_backend` in the config function
# or its helper `_enable_deepseek_full_iteration_mxfp8` (deepseek/common.py), `_enable_hybridep_full_iteration_mxfp8`
# (qwen/common.py), `_apply_gpt_oss_120b_full_iter_fp8mx_configs` (gpt_oss/common.py); the perf runner turns a
# deepep / hybridep backend into moe_token_dispatcher_type = "flex", scripts/performance/utils/utils.py
# `finalize_config_overrides`), keyed by (model, gpu, plan.fp8, n_gpus): the backend the recipe names, which is
# plan.moe_dispatcher (HybridEP, NVIDIA's TMA-based variant for NVL72 domains, exchanges the same bytes hierarchically
# as DeepEP; it takes fewer SMs, which is not priced). "alltoall" = the recipe sets
# moe_flex_dispatcher_backend = None / moe_token_dispatcher_type = "alltoall". Keys absent: the recipe is silent (the
# configs inherit the model provider's alltoall, e.g. DeepSeek-V3's bf16 / FP8-CS configs, Kimi-K2 on H100 and B200,
# GPT-OSS on B200 and H100): NOT MAPPED, alltoall. As EP_OVERLAP_ON, the summary's rows come from older releases
# whose recipes may differ.
DISPATCHER = {
    **{(m, "B200", r, 256): "deepep" for m in ("DeepSeekV3", "DeepSeekV3 (w/o MTP)") for r in ("mxfp8", "nvfp4")},
    **{
        (m, g, "mxfp8", 256): "hybridep"
        for m in ("DeepSeekV3", "DeepSeekV3 (w/o MTP)")
        for g in ("B300", "GB200", "GB300")
    },
    **{("DeepSeekV3", "GB300", r, 64): "hybridep" for r in ("none", "mxfp8")},  # _apply_deepseek_v3_64gpu_gb300_fsdp
    **{("Qwen3_235B_a22B", "B200", r, n): "alltoall" for r in ("none", "tensorwise", "mxfp8") for n in (64, 256)},
    ("Qwen3_235B_a22B", "B200", "mxfp8", 256): "hybridep",  # qwen3_235b_a22b_pretrain_256gpu_b200_fp8mx
    **{("Qwen3_235B_a22B", "H100", r, 256): "alltoall" for r in ("none", "tensorwise")},
    **{
        ("Qwen3_235B_a22B", g, r, n): "hybridep"
        for g in ("B300", "GB200", "GB300")
        for r in ("none", "tensorwise", "mxfp8")
        for n in (64, 256)
    },
    **{
        ("Qwen3_30B_a3B", g, r, 8): "hybridep"
        for g in ("B200", "B300", "GB200", "GB300")
        for r in ("none", "tensorwise", "mxfp8")
    },
    ("Qwen3_30B_a3B", "H100", "tensorwise", 16): "hybridep",  # qwen3_30b_a3b_pretrain_16gpu_h100_fp8cs
    **{("GPT OSS 120B", "B300", r, 64): "hybridep" for r in ("none", "mxfp8")},
    **{("GPT OSS 120B", g, "mxfp8", 64): "hybridep" for g in ("GB200", "GB300")},  # _apply_gpt_oss_120b_full_iter_fp8mx
    **{("Kimi_K2", "GB200", r, 256): "hybridep" for r in ("none", "tensorwise", "mxfp8")},
    **{("Kimi_K2", "GB300", r, 256): "hybridep" for r in ("none", "tensorwise", "mxfp8", "nvfp4")},
}
# The config naming DeepEP on B200 runs EP 32 (deepseek_v3_pretrain_256gpu_b200_fp8mx / _nvfp4: PP8 VP2 EP32); the rows
# at PP16 EP8 match `deepseek_v3_pretrain_256gpu_b200_fp8mx_large_scale_config` (PP16, EP8), which names no backend:
# alltoall. Keyed by (model, gpu): the EP degree the dispatcher entry holds for.
DISPATCHER_EP = {("DeepSeekV3", "B200"): 32, ("DeepSeekV3 (w/o MTP)", "B200"): 32}
# Where the row's own release states another recipe than 067f987d, that release's, keyed by (model, gpu, container):
# (dispatcher, plan.ep_overlap). NeMo 25.09's DeepSeek-V3 perf runner (Megatron-Bridge f37f883a8 2025-09-24 "dsv3 2509",
# scripts/performance/run_script.py): `enable_deepep = gpu == "h100"` (recipes/deepseek/deepseek_v3.py: flex dispatcher
# with moe_enable_deepep) and `A2A_1F1B = gpu == "h100"` (overlap_moe_expert_parallel_comm, delay_wgrad_compute); the
# B200 / GB200 rows of that release ran token drop without DeepEP (`use_tokendrop`): alltoall, as mapped above.
RELEASE_RECIPE = {(m, "H100", "NeMo 25.09"): ("deepep", True) for m in ("DeepSeekV3", "DeepSeekV3 (dropless)")}
# GPT-OSS-120B before Megatron-Bridge r0.4.0 (the release each container ships: docs/releases/software-versions.md @
# 067f987d, NeMo 25.11 -> Megatron-Bridge 0.2.0, 26.02 -> 0.3.0; 26.02.01 -> r0.3.1, known-issues.md): the GB200 and
# B300 BF16 configs name neither the EP overlap nor a flex backend (scripts/performance/configs/gpt_oss/
# workload_base_configs.py @ v0.2.0 GPT_OSS_120B_GB200_BF16_BASE_CONFIG, gpt_oss_workload_base_configs.py @ v0.3.0 /
# v0.3.1 GPT_OSS_120B_PRETRAIN_CONFIG_{GB200,B300}_BF16_V2: ep 64, no moe_a2a_overlap, no moe_flex_dispatcher_backend
# -> the provider's alltoall). `moe_a2a_overlap=True` (comm_overlap.overlap_moe_expert_parallel_comm, utils/
# overrides.py `_set_moe_a2a_overlap_overrides`) and B300's hybridep at ep 8 arrive in 7260d6214 (2026-03-23, "perf
# optimizations- GPT-OSS 120B"), first tagged v0.4.0 (NeMo 26.04). The 26.02.01 B300 row runs ep 8, the later
# config's layout, so it keeps the later recipe (DISPATCHER).
RELEASE_RECIPE.update(
    {
        **{("GPT OSS 120B", "GB200", c): ("alltoall", False) for c in ("NeMo 25.11", "NeMo 26.02", "NeMo 26.02.01")},
        ("GPT OSS 120B", "B300", "NeMo 26.02"): ("alltoall", False),
    }
)
# Rows the summary itself marks as a regression of a kernel the model does not price, keyed by (model, container,
# precision): skipped with the summary's footnote as the reason. docs/performance-summary-archive.md @ 067f987d,
# NeMo 26.06.01 GPT OSS 120B MXFP8 (GB300 20,288 and GB200 18,304 tok/s/GPU, 33,166 and 28,947 in 26.06 on the same
# layout): "[^gpt-oss-note]: Performance regression in GPT-OSS 120B pre-training is a known issue
# (NVIDIA/cudnn-frontend#256). It will be resolved with the next container release." That issue: cudnn-frontend's
# `grouped_gemm_dglu_wrapper_sm100` (the MXFP8 fused grouped-GEMM dGeGLU + dbias kernel of the MoE backward) became
# 10x slower between cudnn-frontend 1.23.0 and 1.24.0 on GB200 for GPT-OSS and DeepSeek-V3; 26.08 measures 33,024 /
# 28,672 again.
KNOWN_REGRESSION = {("GPT OSS 120B", "NeMo 26.06.01", "MXFP8"): "NVIDIA/cudnn-frontend#256"}


def recipe_dispatcher(model: str, gpu: str, fp8: str, n_gpus: int, ep: int) -> str:
    """plan.moe_dispatcher of a summary row (DISPATCHER; alltoall where the recipe is silent, where the row's EP is
    another config's (DISPATCHER_EP), or at ep == 1)."""
    backend = DISPATCHER.get((model, gpu, fp8, n_gpus), "alltoall")
    if ep == 1 or DISPATCHER_EP.get((model, gpu), ep) != ep:
        return "alltoall"
    return backend


# Megatron's hidden_dropout the recipes run (train.hidden_dropout; the megatron profile keeps dropout masks only at
# p > 0): 0.0 for every model but GPT-3 5B / 20B. Llama 2 / 3 / 3.1: NeMo nemo/collections/llm/gpt/model/llama.py
# `LlamaConfig` (attention_dropout = hidden_dropout = 0.0) and Megatron-Bridge src/megatron/bridge/models/llama/
# llama_bridge.py @ 067f987d (hidden_dropout=0.0; attention_dropout from the HF config, 0.0); GPT-3 175B: NeMo
# gpt/model/base.py `GPTConfig175B` and Megatron-Bridge recipes/gpt/h100/gpt3_175b.py (both 0.0); Qwen3 / Qwen3-MoE,
# GPT-OSS, DeepSeek-V3, Kimi-K2: their Megatron-Bridge bridges set `provider.hidden_dropout = 0.0`
# (models/qwen/qwen3_moe_bridge.py, gpt_oss/gpt_oss_bridge.py, deepseek/deepseek_v3_bridge.py, kimi/kimi_bridge.py).
# GPT-3 5B / 20B (`GPTConfig5B` / `GPTConfig20B`) set none: Megatron-Core's default 0.1.
HIDDEN_DROPOUT_DEFAULT = {"GPT3-5B", "GPT3-20B"}
# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the job's environment (cluster.expandable_segments: the caching
# allocator maps pages into one growing segment, autotune/predict/reserved.py EXPANDABLE_SCALE), as Megatron-Bridge's
# performance launcher sets it (NVIDIA-NeMo/Megatron-Bridge):
# - scripts/performance/setup_experiment.py @ cac49dcd7 (2025-09-27), then perf_plugins.py @ 55f884376 (2025-11-08):
#   Llama 3.1 405B on GB200 with fp8_cs / fp8_mx; @ 246134010 (2026-05-11) also NVFP4 and GB300 ("expandable
#   segments addition due to CUDA OOM issue");
# - @ 6f24c71f3 (2026-05-12, "move expandable flag") onward: scripts/performance/utils/executors.py PERF_ENV_VARS
#   sets it for every run, and perf_plugins.py removes it again where the config sets nccl_ub or runs Llama with
#   Megatron-FSDP (`remove_allocator_env_vars`; the only nccl_ub presets are Llama 3 70B GB300 Megatron-FSDP ones).
# Containers are dated by their YY.MM name (an assumption: the summary does not say which launcher commit ran a row):
# 25.11 is the first release after cac49dcd7, 26.05 the first after 6f24c71f3. NeMo 1.0 / 2.0 rows (source
# NVIDIA/NeMo) are not read: None (the cluster preset's setting).
EXPANDABLE_405B_FROM = (25, 11)
EXPANDABLE_ALL_FROM = (26, 5)
EXPANDABLE_405B = {("GB200", "tensorwise"), ("GB200", "mxfp8")}


def _container(v: Any) -> tuple[int, int] | None:
    """ "NeMo 26.04.01" -> (26, 4); None where the cell names no YY.MM release."""
    parts = str(v).split()[-1].split(".")
    return (int(parts[0]), int(parts[1])) if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit() else None


def recipe_expandable_segments(r: Any, plan: ParallelPlan) -> bool | None:
    """Whether the row's Megatron-Bridge launcher ran with expandable segments (rules above); None for rows of other
    sources or without a release name."""
    when = _container(r.container)
    if "Megatron-Bridge" not in str(r.source) or when is None:
        return None
    model = str(r.model).removesuffix(TOKENDROP)
    if when >= EXPANDABLE_ALL_FROM:
        return not (plan.zero_stage >= 3 and model.startswith("LLAMA"))  # remove_allocator_env_vars
    return when >= EXPANDABLE_405B_FROM and model == "LLAMA3.1_405B" and (str(r.gpu_type), plan.fp8) in EXPANDABLE_405B


# DeepSeek-V3's multi-token prediction (train.mtp_num_layers) and the 61-layer models' pipeline layouts
# (train.pp_layout). Megatron-Bridge's DeepSeek-V3 recipe sets `mtp_num_layers = 1` (src/megatron/bridge/recipes/
# deepseek/deepseek_v3.py @ v0.1.0rc4 (2025-10) `mtp_num_layers: Optional[int] = 1`; recipes/deepseek/h100/
# deepseek_v3.py @ 067f987d `cfg.model.mtp_num_layers = 1`), and no perf config turns it off (src/megatron/bridge/
# perf_recipes/deepseek/ @ 067f987d: no mtp key); the summary names the runs without it "(w/o MTP)". The rows' own
# figures agree: model TFLOP/s over tokens/s is 260.0 GFLOP per token on every DeepSeek-V3 row but the four "(w/o
# MTP)" ones (249.7), the ratio one MTP module adds to Megatron's count (megatron/training/training.py
# num_floating_point_operations; tests/unit/test_pp_layout.py). Layouts: the recipe's `_get_deepseek_v3_pipeline_layout`
# (recipes/deepseek/h100/deepseek_v3.py @ 067f987d; the same map in recipes/deepseek/deepseek_v3.py @ v0.1.0rc4) and
# Kimi-K2's `_get_kimi_k2_pipeline_layout` (recipes/kimi/kimi_k2.py @ 067f987d) depend on pp*vp only ((8,1) = (4,2),
# (16,1) = (8,2) = (4,4) = (2,8), which the GB300 perf configs pass as "Et*4|(t*4|)*14tmL"): the embedding with the
# first stage's layers, the rest of the 61 layers evenly, the last stage short, then MTP and loss. NeMo 25.09 / 25.11 on
# H100 (PP8 VP4) ran "Et|(tt|)*30mL" (scripts/performance/run_script.py @ v0.1.0rc4:66; configs/deepseek/
# deepseek_llm_pretrain.py @ v0.2.0:164).
MTP_MODELS = ("DeepSeekV3", "DeepSeekV3 (w/ MTP)", "DeepSeekV3 (dropless)", "DeepSeekV3 (tokendrop)")
_LAYOUT_61 = {4: "Et*16|t*16|t*16|t*13{m}L", 8: "Et*8|(t*8|)*6t*5{m}L", 16: "Et*4|(t*4|)*14t{m}L"}


def recipe_mtp_layout(model: str, gpu: str, container: str, pp: int, vpp: int) -> tuple[int, str | None]:
    """(train.mtp_num_layers, train.pp_layout) of a summary row, by the tables above; (0, None) for other models."""
    mtp = 1 if model in MTP_MODELS else 0
    if not (model.startswith("DeepSeekV3") or model == "Kimi_K2") or pp == 1:
        return mtp, None
    if model.startswith("DeepSeekV3") and gpu == "H100" and (pp, vpp) == (8, 4):
        return mtp, "Et|(tt|)*30mL"
    layout = _LAYOUT_61.get(pp * vpp)
    return mtp, None if layout is None else layout.format(m="m" * mtp)


# Megatron's recompute_modules of the MLA models' recipes (plan.mla_recompute = "mla_up_proj"; "moe_act" as
# plan.moe_recompute), per release (NVIDIA-NeMo/Megatron-Bridge scripts/performance/run_script.py @ v0.1.0rc4:91-98
# (25.09: mla_up_proj on every GPU); scripts/performance/configs/deepseek/*workload_base_configs.py @ v0.2.0 (25.11),
# v0.3.0 (26.02), v0.4.0 (26.04), v0.5.0 (26.06); configs/kimi/kimi_workload_base_configs.py @ v0.4.0 / v0.5.0):
# DeepSeek-V3 runs mla_up_proj everywhere but GB300 BF16 and every 25.11 GB300 config (["moe_act"]), GB200 FP8 in
# 26.04 (["mlp"]: the dense layers' MLP, plan.mlp_recompute, `recipe_mlp_recompute`) and GB300 MXFP8 at micro-batch 1
# from 26.06 ([]); Kimi-K2 on GB300 runs mla_up_proj.
_MLA_NO_UP_PROJ = ("NeMo 26.04", "NeMo 26.04.01")


def recipe_mlp_recompute(model: str, gpu: str, container: str, fp8: str) -> bool:
    """plan.mlp_recompute of a summary row: DeepSeek-V3's GB200 FP8 presets of 26.04 (recompute_modules=["mlp"],
    scripts/performance/configs/deepseek/deepseek_workload_base_configs.py @ v0.4.0 DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_V1,
    which its FP8 configs keep; _MLA_NO_UP_PROJ). Not mapped: the H100 presets' ["mla_up_proj", "mlp"] (@ v0.2.0 -
    v0.5.0; the summary's H100 row is 25.09's, whose run_script.py @ v0.1.0rc4 names mla_up_proj only) and B200 FP8_MX
    of 26.06 (no row)."""
    return model.startswith("DeepSeekV3") and gpu == "GB200" and fp8 != "none" and container in _MLA_NO_UP_PROJ


def recipe_recompute_modules(model: str, gpu: str, container: str, fp8: str, mbs: int) -> tuple[bool, str]:
    """(plan.mla_recompute, plan.moe_recompute) of a summary row, by the tables above; (False, "none") elsewhere."""
    if model == "Kimi_K2":
        return True, "none"
    if not model.startswith("DeepSeekV3"):
        return False, "none"
    if gpu == "GB300" and (fp8 == "none" or container == "NeMo 25.11"):
        return False, "moe_act"
    if gpu == "GB200" and fp8 != "none" and container in _MLA_NO_UP_PROJ:
        return False, "none"
    if gpu == "GB300" and fp8 == "mxfp8" and mbs == 1 and container >= "NeMo 26.06":
        return False, "none"
    return True, "none"

"""NVIDIA NeMo / Megatron-Bridge performance summaries (benchmarks/data/measured/nemo_megatron_bridge_performance_summary.csv)
as ReferenceRuns: every pretraining row whose model, GPU and precision autotune can express, every other row skipped
with its reason.

How a row becomes a layout (Megatron-Core as Megatron-Bridge's perf recipes run it; where the table is silent the
assumption is named):
- degrees: tp, pp, cp, vp (blank / n/a = 1), ep (blank / n/a = 1; the dense models have none), etp = 1 (the summary
  has no ETP column: Megatron-Bridge's MoE recipes set expert_tensor_parallel_size=1), dp = n_gpus/(tp*pp*cp).
- ZeRO: fsdp > 0 -> Megatron FSDP (zero_stage 3); else the distributed optimizer (ZeRO-1, the perf recipes' default).
- micro-batch mbs (RECIPE_MBS where the row contradicts itself and its recipe), global batch gbs, grad accumulation
  gbs/(dp*mbs); sequence parallelism on whenever tp > 1 (the recipes set sequence_parallel with TP; Megatron requires
  it for MoE with TP); recompute: below.
- precision: BF16 -> bf16 linears; FP8 and FP8-CS (Megatron's FP8 current scaling, a per-tensor scale computed from
  the tensor itself) -> plan.fp8=tensorwise, which is the same recipe (torchao's tensorwise = dynamic per-tensor
  scaling); MXFP8 / FP8-MX -> mxfp8; NVFP4 -> nvfp4. Megatron's delayed-scaling FP8 (the older "FP8" rows on H100)
  runs the same FP8 GEMMs with scales from a history: same GEMM rate, counted as tensorwise.
  "FP8-CS (FP8-MX)" (25.11 archive): the cell's first recipe owns the row's figures, the parenthesised one the
  parenthesised figures (kept in `notes`): tensorwise. "not stated in table" (the 25.09 archive; every such row
  carries a "(FP8-MX vs FP8-CS)" alternative in `notes`): the same FP8-CS recipe. Evidence, same model, GPU and
  layout in 25.09 vs 25.11 (FP8-CS): Llama3 8B GB200 31,357 vs 31,508 tok/s/GPU, B200 29,994 vs 30,624, 405B B200
  664 vs 661; and the H100 rows' 725-763 model TFLOP/s exceed what BF16 reaches (989 peak, 73-77% MFU).
- cells with an alternative ("1 (2)", "64 (0)"): the first value is the row's layout, the parenthesised one the
  alternative's (notes), so `_degree` reads the first.
- routing: the summary's footnote says MoE runs are "force-balanced, no token drop": train.moe_routing=balanced.
  "(tokendrop)" rows run Megatron's capacity-factor routing (moe_expert_capacity_factor 1.0,
  moe_pad_expert_input_to_capacity in Megatron-Bridge's token-drop recipes): model.moe_capacity_factor = 1.0; with
  balanced routing no expert exceeds its capacity, so the predicted time equals the dropless one, as it should.
  "(w/ MTP)" rows (multi-token prediction, not modelled) are skipped.
- fused kernels: plan.compile=True. Megatron-Core runs the block's elementwise chains as fused kernels (Transformer
  Engine's fused RMSNorm+cast LayerNormLinear, `apply_rope_fusion`, `bias_swiglu_fusion`, fused cast-transpose for
  FP8; Megatron-Core TransformerConfig), the memory traffic torch.compile's Inductor fusion reaches in bench_model:
  the same term (perf_terms.compiled_elementwise_factor, fused casts) prices both.
- numerics: bf16 params and grads with an fp32 master copy (Megatron's mixed precision, Rajbhandari et al. 2020);
  the gradient buffer (main_grad) in bf16: the perf recipes set `grad_reduce_in_fp32 = False` (Megatron-Bridge
  scripts/performance/configs/llama/llama3_llm_pretrain.py @ 2a0d46e2 `set_llama3_common_configs`, the same line in
  the Qwen3 / DeepSeek / GPT-OSS perf configs and in NeMo's scripts/performance/llm recipes).
- pipeline split: Llama 3.1 405B and Qwen3-235B run with `account_for_embedding_in_pipeline_split` and
  `account_for_loss_in_pipeline_split` (Megatron-Bridge src/megatron/bridge/recipes/llama/llama3.py 405B configs
  "Large model specific pipeline split configurations", recipes/qwen/qwen3_moe.py qwen3_235b_a22b_pretrain_config
  "Uses account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split"): plan.pp_split_embedding
  and pp_split_loss whenever pp > 1 (126 + 2 and 94 + 2 layers: PP16 x VP8 and PP32 x VP3 split evenly).
- Megatron-FSDP rows (fsdp > 0): zero_stage 3 under the megatron profile (`use_megatron_fsdp=True` with
  `fsdp_double_buffer=True` in the perf configs).
- recompute: none, as the perf recipes run Llama 3 (Megatron-Bridge src/megatron/bridge/recipes/llama/llama3.py:
  `recompute_granularity = None`, `fine_grained_activation_offloading = False`); what a preset adds on top that
  the Megatron-FSDP presets add (activation CPU offloading of N layers) is plan.act_offload_layers (ACT_OFFLOAD_LAYERS);
  the GPT-OSS presets' MoE recompute modules are plan.moe_recompute (MOE_RECOMPUTE).
- FP8 parameters: the Megatron-Bridge rows (source Megatron-Bridge: containers 25.09 onward) with an FP8 recipe
  (tensorwise, mxfp8) run train.fp8_param_gather: the perf recipes take `bf16_with_fp8_current_scaling_mixed` /
  `bf16_with_mxfp8_mixed` (scripts/performance/utils/precision.py; src/megatron/bridge/perf_recipes/_common.py
  `_perf_precision`), which set `fp8_param_gather = True` (src/megatron/bridge/training/mixed_precision.py; current
  scaling since 958fb9b7 2025-07-16, MXFP8 since 91d25dcc 2025-08-21 with reuse_grad_buf_for_mxfp8_param_ag);
  `bf16_with_nvfp4_mixed` sets False. The NeMo 1.0 / 2.0 rows (24.x, 25.04) keep bf16 weights (not read: assumed).
- TP overlap: Llama 3 70B / 405B rows with TP > 1 run Transformer Engine's userbuffers TP overlap (TP_OVERLAP_MODELS).
- EP communication overlap (plan.ep_overlap): per model, GPU, recipe and GPU count from the perf recipes
  (EP_OVERLAP_ON); off where they are silent.
- token dispatcher (plan.moe_dispatcher): per model, GPU, recipe and GPU count from the perf recipes (DISPATCHER):
  Megatron's flex dispatcher with the DeepEP or HybridEP backend -> deepep / hybridep (both exchange hierarchically,
  priced by autotune/predict/moe_dispatch.py), alltoall where the recipe says so; NOT MAPPED (alltoall, the
  Megatron-Bridge model providers' default) where the recipe is silent; where the row's own release states another
  recipe (RELEASE_RECIPE: DeepSeek-V3 on 1024 H100 in NeMo 25.09, DeepEP with the EP overlap), that release's.
- CUDA graphs (train.cuda_graphs): per model, GPU, container and recipe from the performance configs of the container's
  Megatron-Bridge release (autotune/fitting/nemo_cuda_graphs.py, which names what it does not map).
- framework: train.framework=megatron (Megatron-Core), whose profile states the data-parallel overlaps it performs
  (--overlap-grad-reduce, --overlap-param-gather: on in Megatron-Bridge's performance recipes).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from autotune.core.model import ModelSpec
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.nemo_cuda_graphs import recipe_cuda_graphs
from autotune.fitting.run_types import DATA, ReferenceRun, SkippedRow
from autotune.fitting.run_types import preset_model as _preset_model

NEMO_GPU = {"H100": "h100-sxm-80gb", "B200": "b200", "GB200": "gb200-nvl72", "B300": "b300", "GB300": "gb300-nvl72"}
NEMO_MODEL = {
    "LLAMA3_8B": "llama-3.1-8b",  # Llama 3 8B and 3.1 8B share the shape (meta-llama config.json)
    "LLAMA3-8B": "llama-3.1-8b",
    "LLAMA3_70B": "llama-3.1-70b",
    "LLAMA3-70B": "llama-3.1-70b",
    "LLAMA3.1_405B": "llama-3.1-405b",
    "LLAMA2-7B": "llama-2-7b",
    "Qwen3_30B_a3B": "qwen3-30b-a3b",
    "Qwen3_235B_a22B": "qwen3-235b-a22b",
    "DeepSeekV3": "deepseek-v3",
    "DeepSeekV3 (dropless)": "deepseek-v3",
    "DeepSeekV3 (w/o MTP)": "deepseek-v3",
    "GPT OSS 120B": "gpt-oss-120b",
    "Kimi_K2": "kimi-k2",
}
# TP communication overlap (plan.tp_overlap): Megatron-Bridge's performance configs of Llama 3 70B and 405B import the
# Transformer Engine userbuffers overlap configs `userbuffers_{bf16,fp8}_{h100,b200}_h8192_tp4/tp2_mbs1_seqlen8192`
# (70B) and `..._h16384_tp8_cp2_...` / `..._tp4_cp2_...` (405B) (NVIDIA-NeMo/Megatron-Bridge
# scripts/performance/configs/llama3/; megatron/bridge/training/comm_overlap.py), i.e. tp_comm_overlap on whenever
# TP > 1; no such config is named for the other models, which keep plain TP. NVFP4 runs switch it off: every Llama 3 /
# 3.1 perf config sets `tp_comm_overlap = False if precision == "nvfp4"` (scripts/performance/configs/llama/
# llama3_llm_pretrain.py, llama31_llm_pretrain.py @ 0013c9a8), so those rows run plain (sequence-parallel) TP.
TP_OVERLAP_MODELS = {
    "llama-3.1-70b",
    "llama-3.1-405b",
    "nemotron-8b",
    "nemotron-22b",
}  # + Nemotron yamls' ub_tp_comm_overlap
# token-dropping variants: the dropless preset with a capacity factor (module doc)
TOKENDROP = " (tokendrop)"
TOKENDROP_CAPACITY = 1.0
# NeMo 24.07 H100 FP8 rows of dense models without a preset (NVIDIA/NeMo docs performance_summary.md, 2024-09):
# GPT-3 as NeMo's examples/nlp/language_modeling/conf/gpt3 yamls run it (LayerNorm + GeLU 4h MLP, MHA, tied
# embeddings; Brown et al. 2020 Table 2.1 shapes), Llama 2 13B/70B (meta-llama config.json: SwiGLU, RMSNorm, 70B with
# 8 KV heads, vocab 32000, untied). (layers, hidden, ffn, heads, kv heads, vocab, block, tied)
DENSE_SHAPES = {
    "GPT3-5B": (24, 4096, 16384, 32, 32, 50304, "gpt", True),  # NeMo gpt3/5b.yaml; vocab GPT-2 BPE padded to 128
    "GPT3-20B": (44, 6144, 24576, 48, 48, 50304, "gpt", True),  # NeMo gpt3/20b.yaml
    "GPT3-175B": (96, 12288, 49152, 96, 96, 50304, "gpt", True),  # Brown et al. 2020 Table 2.1
    "LLAMA2-13B": (40, 5120, 13824, 40, 40, 32000, "llama", False),
    "LLAMA2-70B": (80, 8192, 28672, 64, 8, 32000, "llama", False),
    # Nemotron-4 8B / 22B as NeMo-Framework-Launcher launcher_scripts/conf/training/nemotron/nemotron_{8b,22b}.yaml
    # @ 089b90e6 run them: multi-head attention, squared-ReLU 4h MLP, no biases, untied, dropout 0, sequence parallel,
    # ub_tp_comm_overlap. Vocab 256,000 (Nemotron-4 340B report, arXiv 2406.11704 Sec 2: the same 256k SentencePiece
    # tokenizer for the family; the summary's model TFLOP/s (643 at 12,507 tok/s for 8B: 51.4 MFLOP per token, 6N with
    # N = 8.5 B) confirms the ~2.1 B embedding + output parameters). The "gpt" block stands in: same two MLP GEMMs and
    # attention; it counts the small bias vectors and prices GELU's elementwise bytes for squared ReLU's.
    # Nemotron-340B (96 heads, 8 KV groups, squared ReLU) has no block: "gpt" is multi-head only.
    "Nemotron-8B": (32, 4096, 16384, 32, 32, 256000, "gpt", False),
    "Nemotron-22B": (40, 6144, 24576, 48, 48, 256000, "gpt", False),
}
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


# Megatron MoE recompute modules of the perf presets (plan.recompute=selective, plan.moe_recompute), keyed by (model,
# gpu, plan.fp8): Megatron-Bridge scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py @ 07eea52d,
# GPT_OSS_120B_PRETRAIN_CONFIG_{B200,GB200,H100}_BF16_V1/V2: recompute_modules=["layernorm", "moe_act"] (the
# layernorm module is not a plan value: its norm outputs stay counted). GB300 / B300 presets recompute nothing.
MOE_RECOMPUTE = {
    ("GPT OSS 120B", "B200", "none"): "moe_act",
    ("GPT OSS 120B", "GB200", "none"): "moe_act",
    ("GPT OSS 120B", "H100", "none"): "moe_act",
}


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


# plan.fp8 recipes whose Megatron-Bridge mixed-precision config sets fp8_param_gather (module doc)
FP8_PARAM_RECIPES = ("tensorwise", "mxfp8")
# models whose recipes account the embedding and the loss in the pipeline split (module doc)
PP_SPLIT_ACCOUNTED = ("LLAMA3.1_405B", "Qwen3_235B_a22B")
RECIPE = {
    "BF16": "none",
    "FP8": "tensorwise",
    "FP8-CS": "tensorwise",
    "MXFP8": "mxfp8",
    "FP8-MX": "mxfp8",
    "NVFP4": "nvfp4",
    "FP8-CS (FP8-MX)": "tensorwise",
    "not stated in table": "tensorwise",
}


def _degree(v: Any) -> int:
    """A degree cell: blank, NaN or n/a means 1; "1 (2)" is the row's 1 (the parenthesised alternative is another
    run's layout)."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or str(v).strip().lower() in ("", "n/a", "nan"):
        return 1
    return int(float(str(v).split()[0]))


def _model(name: str) -> ModelSpec:
    """The summary's model name as a ModelSpec: a preset, a preset with a capacity factor, or a DENSE_SHAPES row."""
    import dataclasses

    if name in DENSE_SHAPES:
        layers, h, f, heads, kv, vocab, block, tied = DENSE_SHAPES[name]
        return ModelSpec(name.lower(), layers, h, f, heads, kv, vocab, tie_embeddings=tied, block=block)
    if name.endswith(TOKENDROP):
        base = _preset_model(NEMO_MODEL[name.removesuffix(TOKENDROP)])
        return dataclasses.replace(base, moe_capacity_factor=TOKENDROP_CAPACITY)
    return _preset_model(NEMO_MODEL[name])


def _known_model(name: str) -> bool:
    return name in NEMO_MODEL or name in DENSE_SHAPES or name.removesuffix(TOKENDROP) in NEMO_MODEL


def _skip_reason(r: Any) -> str | None:
    if str(r.task).lower() != "pretrain":
        return f"task={r.task}: fine-tuning (frozen weights / LoRA) is not modelled"
    if not _known_model(str(r.model)):
        return f"model={r.model}: no preset (hybrid Mamba-Transformer, MTP, unpublished or unstated shapes)"
    if str(r.gpu_type) not in NEMO_GPU:
        return f"gpu_type={r.gpu_type}: no cluster preset"
    if str(r.precision) not in RECIPE:
        return f"precision={r.precision}: no single recipe"
    if any(pd.isna(getattr(r, c)) for c in ("tokens_per_sec_per_gpu", "mbs", "gbs", "tp", "pp")):
        return "tokens/s, micro-batch or a degree not stated"
    return None


def nemo_layout(r: Any) -> tuple[Any, TrainSpec, ParallelPlan]:
    """One summary row as (model, train, plan); raises ValueError (SpecError) when the numbers do not split."""
    import dataclasses

    model = _model(str(r.model))
    n, tp, pp, cp = int(r.n_gpus), _degree(r.tp), _degree(r.pp), _degree(r.cp)
    vpp, ep, gbs = _degree(r.vp), _degree(r.ep), int(r.gbs)
    mbs = RECIPE_MBS.get((str(r.model), str(r.gpu_type), str(r.container)), int(r.mbs))
    dp = n // (tp * pp * cp)
    if dp * tp * pp * cp != n or gbs % (dp * mbs):
        raise ValueError(f"n_gpus={n} gbs={gbs} mbs={mbs} do not split as tp={tp} pp={pp} cp={cp}")
    fsdp = str(r.fsdp).split()[0] if not pd.isna(r.fsdp) else "0"
    plan = ParallelPlan(
        dp=dp,
        tp=tp,
        pp=pp,
        cp=cp,
        vpp=vpp,
        zero_stage=3 if fsdp not in ("0", "nan") else 1,
        micro_batch_size=mbs,
        grad_accum_steps=gbs // (dp * mbs),
        sequence_parallel=tp > 1,
        tp_overlap=tp > 1
        and NEMO_MODEL.get(str(r.model), str(r.model).lower()) in TP_OVERLAP_MODELS
        and RECIPE[str(r.precision)] != "nvfp4",
        pp_schedule="interleaved_1f1b" if vpp > 1 else "1f1b",
        fp8=RECIPE[str(r.precision)],
        ep=ep,
        compile=True,  # fused elementwise kernels and casts (module doc)
        pp_split_embedding=pp > 1 and str(r.model).removesuffix(TOKENDROP) in PP_SPLIT_ACCOUNTED,
        pp_split_loss=pp > 1 and str(r.model).removesuffix(TOKENDROP) in PP_SPLIT_ACCOUNTED,
    )
    off = ACT_OFFLOAD_LAYERS.get((str(r.model), str(r.gpu_type), plan.fp8, plan.zero_stage, plan.tp), 0)
    plan = dataclasses.replace(plan, act_offload_layers=off)
    moe_rc = MOE_RECOMPUTE.get((str(r.model), str(r.gpu_type), plan.fp8), "none")
    if moe_rc != "none":
        plan = dataclasses.replace(plan, recompute="selective", moe_recompute=moe_rc)
    # Megatron refuses the overlap with pp > 1 and no virtual stages (rule ep_overlap_pp_needs_vpp): such a row was
    # measured with another recipe than the one at the commit above, so it stays off
    if (str(r.model), str(r.gpu_type), plan.fp8, n) in EP_OVERLAP_ON and (pp == 1 or vpp > 1):
        plan = dataclasses.replace(plan, ep_overlap=True)
    plan = dataclasses.replace(plan, moe_dispatcher=recipe_dispatcher(str(r.model), str(r.gpu_type), plan.fp8, n, ep))
    release = RELEASE_RECIPE.get((str(r.model), str(r.gpu_type), str(r.container)))
    if release is not None and ep > 1:  # the row's own release recipe (RELEASE_RECIPE)
        plan = dataclasses.replace(plan, moe_dispatcher=release[0], ep_overlap=release[1] and (pp == 1 or vpp > 1))
    train = TrainSpec(
        seq_len=int(r.seq_len),
        global_batch_size=gbs,
        param_dtype="bf16",
        grad_dtype="bf16",
        master_dtype="fp32",
        moe_routing="balanced",
        hidden_dropout=0.1 if str(r.model) in HIDDEN_DROPOUT_DEFAULT else 0.0,
        fp8_param_gather="Megatron-Bridge" in str(r.source) and plan.fp8 in FP8_PARAM_RECIPES,  # module doc
        cuda_graphs=recipe_cuda_graphs(str(r.model), str(r.gpu_type), str(r.container), plan.fp8),
        framework="megatron",  # Megatron-Core: fused Adam, bf16 weights, EP overlap; its overlaps (FrameworkProfile.overlaps) price the DP communication
    )
    return model, train, plan


def load_nemo_rows(folder: Path = DATA) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    """Every summary row as a run or a skip. Not yet in `reference_runs.LOADERS` (the presets' fit): the rows are
    scored out of sample by benchmarks/model_accuracy.py (`nemo_not_fitted`)."""
    df = pd.read_csv(folder / "nemo_megatron_bridge_performance_summary.csv")
    runs, skipped = [], []
    for i, r in df.iterrows():
        reason = _skip_reason(r)
        if reason is None:
            try:
                model, train, plan = nemo_layout(r)
            except ValueError as e:
                reason = str(e)
            else:
                cluster = NEMO_GPU[str(r.gpu_type)]
                runs.append(ReferenceRun("nemo", i, model, train, cluster, plan, float(r.tokens_per_sec_per_gpu)))
                continue
        skipped.append(SkippedRow("nemo", i, reason))
    return runs, skipped

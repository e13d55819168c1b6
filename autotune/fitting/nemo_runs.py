"""NVIDIA NeMo / Megatron-Bridge performance summaries (benchmarks/data/measured/nemo_megatron_bridge_performance_summary.csv)
as ReferenceRuns: every pretraining row whose model, GPU and precision autotune can express, every other row skipped
with its reason.

How a row becomes a layout (Megatron-Core as Megatron-Bridge's perf recipes run it; where the table is silent the
assumption is named):
- degrees: tp, pp, cp, vp (blank / n/a = 1), ep (blank / n/a = 1; the dense models have none), etp = 1 (the summary
  has no ETP column: Megatron-Bridge's MoE recipes set expert_tensor_parallel_size=1), dp = n_gpus/(tp*pp*cp).
- ZeRO: fsdp > 0 -> Megatron FSDP (zero_stage 3); else the distributed optimizer (ZeRO-1, the perf recipes' default).
- micro-batch mbs (RECIPE_MBS where the row contradicts itself and its recipe; RECIPE_LAYOUT: the four NeMo 26.02.01
  rows whose mbs and degrees contradict their release's recipe and the neighbouring releases' rows), global batch gbs, grad accumulation
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
  multi-token prediction: every DeepSeek-V3 row but "(w/o MTP)" runs one MTP module, with the recipe's pipeline
  layout (train.mtp_num_layers, train.pp_layout; nemo_recipes.recipe_mtp_layout, which also lays out Kimi-K2);
  "(w/ MTP)" is the recipe of plain "DeepSeekV3".
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
  the GPT-OSS presets' recompute modules are plan.moe_recompute (MOE_RECOMPUTE) and plan.norm_recompute (NORM_RECOMPUTE).
- FP8 parameters: the Megatron-Bridge rows (source Megatron-Bridge: containers 25.09 onward) with an FP8 recipe
  (tensorwise, mxfp8) run train.fp8_param_gather: the perf recipes take `bf16_with_fp8_current_scaling_mixed` /
  `bf16_with_mxfp8_mixed` (scripts/performance/utils/precision.py; src/megatron/bridge/perf_recipes/_common.py
  `_perf_precision`), which set `fp8_param_gather = True` (src/megatron/bridge/training/mixed_precision.py; current
  scaling since 958fb9b7 2025-07-16, MXFP8 since 91d25dcc 2025-08-21 with reuse_grad_buf_for_mxfp8_param_ag);
  `bf16_with_nvfp4_mixed` sets False. The NeMo 1.x rows (24.03.01, 24.07) keep bf16 weights: their launcher
  yamls set no fp8_params and the H100 FP8 example scripts add model.fp8=true only (NeMo-Framework-Launcher @ 24.07
  examples/training/gpt/h100/20b_fp8_8node.sh, examples/training/llama/h100/llama3_8b_fp8.sh), so Transformer
  Engine 1.8 caches the FP8 weight and its transpose across micro-batches as the profile counts ([TE-WS]; TE v1.8
  module/linear.py `get_fp8_workspace(cache_name="weight", with_transpose=torch.is_grad_enabled())`); the 25.04
  rows (NeMo 2.0) are not read: assumed bf16 too.
- FP8 scaling: the NeMo 1.x and 25.04 "FP8" rows run delayed scaling on Megatron-Core before core_v0.14.0
  (train.fp8_delayed_scaling, DELAYED_FP8_CONTAINERS: the attention projection keeps its quantized input copy); the
  Megatron-Bridge rows (25.09 on) current scaling, FP8-CS.
- master weights: the NeMo 1.x rows store the fp32 master as Apex's 16-bit remainders (train.master_remainders,
  NEMO1_CONTAINERS).
- loss kernel (train.cross_entropy_fusion): the Megatron-Bridge rows run Transformer Engine's fused cross entropy,
  "te": the perf launcher sets `cross_entropy_fusion_impl = "te"` for every recipe (scripts/performance/configs/
  llama3/llama3_70b_llm_pretrain.yaml @ v0.1.0rc3 (2025-10-08), utils/helpers.py @ v0.2.0, utils/overrides.py
  `_set_common_perf_overrides` @ v0.3.0 / v0.3.1 / 067f987d) with GPTModelProvider's `cross_entropy_loss_fusion =
  True` (src/megatron/bridge/models/gpt_provider.py @ v0.3.1). The NVIDIA/NeMo rows: "native", Megatron-Core's
  fused loss with its default impl (NeMo-Framework-Launcher conf/training/llama/llama3_8b.yaml @ 24.07 8325688d:
  cross_entropy_loss_fusion true), which keeps the same fp32 bytes as the unfused one (the GPT-3 yamls do not set it:
  unfused, same bytes; the long-sequence page's recipes are not read: assumed).
- TP overlap: Llama 3 70B / 405B rows with TP > 1 run Transformer Engine's userbuffers TP overlap, and so do the
  NeMo 24.07 rows whose launcher yaml sets ub_tp_comm_overlap (GPT-3 20B, Llama 2 70B, Nemotron 8B / 22B)
  (TP_OVERLAP_MODELS).
- EP communication overlap (plan.ep_overlap): per model, GPU, recipe and GPU count from the perf recipes
  (EP_OVERLAP_ON); off where they are silent.
- token dispatcher (plan.moe_dispatcher): per model, GPU, recipe and GPU count from the perf recipes (DISPATCHER):
  Megatron's flex dispatcher with the DeepEP or HybridEP backend -> deepep / hybridep (both exchange hierarchically,
  priced by autotune/predict/moe_dispatch.py), alltoall where the recipe says so; NOT MAPPED (alltoall, the
  Megatron-Bridge model providers' default) where the recipe is silent; where the row's own release states another
  recipe (RELEASE_RECIPE: DeepSeek-V3 on 1024 H100 in NeMo 25.09, DeepEP with the EP overlap; GPT-OSS-120B on GB200
  and B300 before r0.4.0, alltoall without it), that release's.
- rows the summary footnotes as a kernel regression (KNOWN_REGRESSION: GPT-OSS-120B MXFP8 in 26.06.01) are skipped.
- CUDA graphs (train.cuda_graphs): per model, GPU, container and recipe from the performance configs of the container's
  Megatron-Bridge release (autotune/fitting/nemo_cuda_graphs.py, which names what it does not map; DeepSeek-V3 MXFP8:
  nemo_releases.py).
- release-to-release MoE recipe (nemo_releases.py): the MXFP8 Qwen3 / DeepSeek-V3 Blackwell rows of containers before
  26.06 ran without the EP overlap the 067f987d recipes set, some with another dispatcher; their release's settings.
- Fused grouped MLP (train.fused_grouped_mlp): the MXFP8 MoE configs of Megatron-Bridge v0.5.1 / v0.6.0 that run
  Transformer Engine's CuTe DSL grouped GEMM + activation kernels, and FP8 attention (train.fp8_attention), from the
  same configs (autotune/fitting/nemo_fused_mlp.py).
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
from autotune.fitting.nemo_fused_mlp import recipe_fp8_attention, recipe_fused_grouped_mlp
from autotune.fitting.nemo_recipes import (  # noqa: F401 (recipe_expandable_segments: re-exported for its readers)
    ACT_OFFLOAD_LAYERS,
    EP_OVERLAP_ON,
    HIDDEN_DROPOUT_DEFAULT,
    KNOWN_REGRESSION,
    MOE_RECOMPUTE,
    NORM_RECOMPUTE,
    RECIPE_LAYOUT,
    RECIPE_MBS,
    RELEASE_RECIPE,
    TOKENDROP,
    TOKENDROP_CAPACITY,
    recipe_dispatcher,
    recipe_expandable_segments,
    recipe_mlp_recompute,
    recipe_mtp_layout,
    recipe_recompute_modules,
)
from autotune.fitting.nemo_releases import release_moe_recipe
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
    "DeepSeekV3 (w/ MTP)": "deepseek-v3",  # train.mtp_num_layers = 1 (nemo_recipes.recipe_mtp_layout)
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
# The NeMo 1.x rows (24.07) run the launcher's training yamls, which set `ub_tp_comm_overlap: True` for gpt3/20b,
# llama/llama2_70b, llama/llama3_70b and nemotron/nemotron_{8b,22b}, False for gpt3/175b and nemotron_340b
# (NeMo-Framework-Launcher launcher_scripts/conf/training/ @ tag 24.07; the H100 FP8 example scripts, e.g.
# examples/training/gpt/h100/20b_fp8_8node.sh, do not override it).
TP_OVERLAP_MODELS = {
    "llama-3.1-70b",
    "llama-3.1-405b",
    "nemotron-8b",
    "nemotron-22b",
    "gpt3-20b",
    "llama2-70b",
}
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
    # Nemotron-4 340B as launcher_scripts/conf/training/nemotron/nemotron_340b.yaml @ 24.07 runs it: 96 layers, h 18432,
    # 4h squared-ReLU MLP, 96 heads with 8 query groups (the "gpt" block's grouped K/V), no biases, untied, dropout
    # 0 (head dim 192, K/V 1536 wide): 341 B parameters; 6N + attention = 2.06 TFLOP per token against the row's 686
    # TFLOP/s at 326 tok/s (2.10). Its optimizer: NEMO1_OPTIM.
    "Nemotron-8B": (32, 4096, 16384, 32, 32, 256000, "gpt", False),
    "Nemotron-22B": (40, 6144, 24576, 48, 48, 256000, "gpt", False),
    "Nemotron-340B": (96, 18432, 73728, 96, 8, 256000, "gpt", False),
}
# NeMo 1.x containers (NeMo-Framework-Launcher; NVIDIA/NeMo v1.23.0 in 24.03.01, r2.0.0rc1 in 24.07): every dense
# training yaml the rows ran (launcher_scripts/conf/training/{gpt3,llama,nemotron}/*.yaml @ tags 24.03.01, 24.07) sets
# optim.name distributed_fused_adam with megatron_amp_O2 and bf16 and no fp8_params (the H100 example scripts add
# model.fp8=true only), so NeMo's setup_optimization stores the fp32 master as Apex's 16-bit remainders:
# train.master_remainders ([REM] in autotune/predict/frameworks/megatron.py). NeMo 2.0 (25.04 on) runs Megatron-Core's
# distributed optimizer (full fp32 master).
NEMO1_CONTAINERS = ("NeMo24.03.01.framework", "NeMo 24.07")
# train.fp8_delayed_scaling: the "FP8" rows of these containers run Transformer Engine's delayed scaling (NeMo 1.x
# model.fp8_hybrid with an amax history; NeMo 2.0's scripts/performance/argument_parser.py `--fp8_recipe`, "ds"
# (per-tensor delayed scaling) by default, in 25.04), on Megatron-Core before core_v0.14.0 besides
DELAYED_FP8_CONTAINERS = (*NEMO1_CONTAINERS, "NeMo25.04.rc2")
# Apex DistributedFusedAdam's dtypes where a NeMo 1.x launcher yaml and its H100 example script leave the defaults
# (apex/contrib/optimizers/distributed_fused_adam.py: grad_sync_dtype defaults to `dtype`, the optimizer state's, fp32;
# the gpt3 / llama example scripts add optim.grad_sync_dtype=bf16, the nemotron ones nothing) or set others
# (NeMo-Framework-Launcher launcher_scripts/conf/training/nemotron/*.yaml and examples/training/*/h100/*.sh @ 24.07):
# Nemotron-8B / 22B reduce fp32 gradients; Nemotron-4 340B's yaml sets `dtype: bf16` and `grad_sync_dtype: bf16`, so
# NeMo's setup_optimization keeps no master (store_params=False, [B16] in autotune/predict/frameworks/megatron.py)
# and Adam's moments in bf16.
NEMO1_OPTIM: dict[str, dict] = {
    "Nemotron-8B": {"grad_dtype": "fp32"},
    "Nemotron-22B": {"grad_dtype": "fp32"},
    "Nemotron-340B": {"optimizer_dtype": "bf16", "master_dtype": None, "master_remainders": False},
}
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
        return f"model={r.model}: no preset (hybrid Mamba-Transformer or DeepSeek-V4 layers, or unpublished shapes)"
    if str(r.gpu_type) not in NEMO_GPU:
        return f"gpu_type={r.gpu_type}: no cluster preset"
    if str(r.precision) not in RECIPE:
        return f"precision={r.precision}: no single recipe"
    if any(pd.isna(getattr(r, c)) for c in ("tokens_per_sec_per_gpu", "mbs", "gbs", "tp", "pp")):
        return "tokens/s, micro-batch or a degree not stated"
    issue = KNOWN_REGRESSION.get((str(r.model), str(r.container), str(r.precision)))
    if issue is not None:
        return f"container={r.container}: the summary footnotes a known kernel regression ({issue})"
    return None


def nemo_layout(r: Any) -> tuple[Any, TrainSpec, ParallelPlan]:
    """One summary row as (model, train, plan); raises ValueError (SpecError) when the numbers do not split."""
    import dataclasses

    model = _model(str(r.model))
    name = "DeepSeekV3" if str(r.model) == "DeepSeekV3 (w/ MTP)" else str(r.model)  # its recipe is plain DeepSeekV3's
    n, tp, pp, cp = int(r.n_gpus), _degree(r.tp), _degree(r.pp), _degree(r.cp)
    vpp, ep, gbs = _degree(r.vp), _degree(r.ep), int(r.gbs)
    mbs = RECIPE_MBS.get((name, str(r.gpu_type), str(r.container)), int(r.mbs))
    recipe = RECIPE_LAYOUT.get((name, str(r.gpu_type), str(r.container), str(r.precision)))
    if recipe is not None:  # the release's recipe where the table's cells contradict it (RECIPE_LAYOUT)
        mbs, tp, pp, cp, vpp = recipe
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
        and NEMO_MODEL.get(name, name.lower()) in TP_OVERLAP_MODELS
        and RECIPE[str(r.precision)] != "nvfp4",
        pp_schedule="interleaved_1f1b" if vpp > 1 else "1f1b",
        fp8=RECIPE[str(r.precision)],
        ep=ep,
        compile=True,  # fused elementwise kernels and casts (module doc)
        pp_split_embedding=pp > 1 and name.removesuffix(TOKENDROP) in PP_SPLIT_ACCOUNTED,
        pp_split_loss=pp > 1 and name.removesuffix(TOKENDROP) in PP_SPLIT_ACCOUNTED,
    )
    off = ACT_OFFLOAD_LAYERS.get((name, str(r.gpu_type), plan.fp8, plan.zero_stage, plan.tp), 0)
    plan = dataclasses.replace(plan, act_offload_layers=off)
    moe_rc = MOE_RECOMPUTE.get((name, str(r.gpu_type), plan.fp8), "none")
    mla_rc, release_rc = recipe_recompute_modules(
        name.removesuffix(TOKENDROP), str(r.gpu_type), str(r.container), plan.fp8, mbs
    )
    moe_rc = release_rc if release_rc != "none" else moe_rc
    norm_rc = (name, str(r.gpu_type), plan.fp8) in NORM_RECOMPUTE
    mlp_rc = recipe_mlp_recompute(name.removesuffix(TOKENDROP), str(r.gpu_type), str(r.container), plan.fp8)
    if moe_rc != "none" or mla_rc or norm_rc or mlp_rc:  # recompute_modules, under --recompute-granularity selective
        plan = dataclasses.replace(
            plan,
            recompute="selective",
            moe_recompute=moe_rc,
            mla_recompute=mla_rc,
            norm_recompute=norm_rc,
            mlp_recompute=mlp_rc,
        )
    dispatcher = recipe_dispatcher(name, str(r.gpu_type), plan.fp8, n, ep)
    overlap = (name, str(r.gpu_type), plan.fp8, n) in EP_OVERLAP_ON
    release = RELEASE_RECIPE.get((name, str(r.gpu_type), str(r.container)))
    if release is not None and ep > 1:  # the row's own release recipe (RELEASE_RECIPE)
        dispatcher, overlap = release
    # the MXFP8 MoE recipe of the row's own release (nemo_releases: dispatcher, EP overlap, DeepSeek-V3's CUDA graphs)
    rel_disp, rel_overlap, rel_graphs = release_moe_recipe(
        name, str(r.gpu_type), str(r.container), plan.fp8, (pp, vpp, ep), mbs
    )
    dispatcher = rel_disp if rel_disp is not None and ep > 1 else dispatcher
    overlap = overlap if rel_overlap is None else rel_overlap
    # Megatron refuses the overlap with pp > 1 and no virtual stages (rule ep_overlap_pp_needs_vpp): such a row was
    # measured with another recipe than the one at the commit above, so it stays off
    plan = dataclasses.replace(plan, moe_dispatcher=dispatcher, ep_overlap=overlap and (pp == 1 or vpp > 1))
    mtp, layout = recipe_mtp_layout(name.removesuffix(TOKENDROP), str(r.gpu_type), str(r.container), pp, vpp)
    if layout is not None:  # Megatron refuses a layout with the embedding / loss pipeline-split accounting
        plan = dataclasses.replace(plan, pp_split_embedding=False, pp_split_loss=False)
    train = TrainSpec(
        seq_len=int(r.seq_len),
        global_batch_size=gbs,
        param_dtype="bf16",
        grad_dtype="bf16",
        master_dtype="fp32",
        moe_routing="balanced",
        hidden_dropout=0.1 if name in HIDDEN_DROPOUT_DEFAULT else 0.0,
        fp8_param_gather="Megatron-Bridge" in str(r.source) and plan.fp8 in FP8_PARAM_RECIPES,  # module doc
        master_remainders=str(r.container) in NEMO1_CONTAINERS,  # NEMO1_CONTAINERS
        fp8_delayed_scaling=str(r.container) in DELAYED_FP8_CONTAINERS and plan.fp8 == "tensorwise",  # module doc
        cross_entropy_fusion="te" if "Megatron-Bridge" in str(r.source) else "native",  # module doc
        cuda_graphs=rel_graphs or recipe_cuda_graphs(name, str(r.gpu_type), str(r.container), plan.fp8),
        fused_grouped_mlp=recipe_fused_grouped_mlp(name, str(r.gpu_type), str(r.container), plan.fp8),
        fp8_attention=recipe_fp8_attention(name, str(r.gpu_type), str(r.container), plan.fp8),
        mtp_num_layers=mtp,
        pp_layout=layout,
        framework="megatron",  # Megatron-Core: fused Adam, bf16 weights, EP overlap; its overlaps (FrameworkProfile.overlaps) price the DP communication
    )
    if str(r.container) in NEMO1_CONTAINERS and name in NEMO1_OPTIM:  # the launcher yaml's optimizer (NEMO1_OPTIM)
        train = dataclasses.replace(train, **NEMO1_OPTIM[name])
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

"""Rules of the recipe knobs only Megatron-Core has (docs/frameworks.md "megatron"): the embedding / loss pipeline-split
accounting, activation CPU offloading, recompute modules of MoE layers, fine-grained activation offloading of the
experts and EP communication overlap. Each generic `*_NEEDS_MEGATRON` rule refuses the knob under the other profiles;
the megatron profile replaces it (`FrameworkProfile.replaces_rules`). Part of the generic table in
autotune/layouts/rules.py, which re-exports these names.
"""

from __future__ import annotations

from autotune.core.plan_arrays import RECOMPUTE_CODE
from autotune.core.rules import Rule

# Megatron-Core TransformerConfig.__post_init__ (megatron/core/transformer/transformer_config.py @ 0044db1f):
# with account_for_embedding/loss_in_pipeline_split, num_layers (+1 for each) must divide by the pipeline size;
# get_num_layers_to_build then gives every virtual stage (L + e + l)/(pp*vpp) slots
PP_SPLIT_NEEDS_PP = Rule(
    "pp_split_needs_pp",
    lambda pp_split_embedding, pp_split_loss, pp: (pp_split_embedding | pp_split_loss) & (pp == 1),
    lambda pp_split_embedding, pp_split_loss: (
        f"plan.pp_split_embedding={str(bool(pp_split_embedding)).lower()} pp_split_loss="
        f"{str(bool(pp_split_loss)).lower()} requires plan.pp > 1: no pipeline split to account in"
    ),
)
PP_SPLIT_DIVIDES = Rule(
    "pp_split_divides",
    lambda pp_split_embedding, pp_split_loss, pp, vpp, model: (
        (pp_split_embedding | pp_split_loss)
        & ((model.num_layers + pp_split_embedding + pp_split_loss) % (pp * vpp) != 0)
    ),
    lambda pp_split_embedding, pp_split_loss, pp, vpp, model: (
        f"num_layers={model.num_layers} + {int(pp_split_embedding) + int(pp_split_loss)} (embedding / loss slots) "
        f"is not divisible by pp*vpp={pp * vpp}: Megatron's pipeline-split accounting needs an even split"
    ),
)
# only Megatron-Core has the accounting: the megatron profile replaces this rule (bench_model's pipeline split,
# torchtitan's, nanotron's and DeepSpeed's have no such option)
PP_SPLIT_NEEDS_MEGATRON = Rule(
    "pp_split_needs_megatron",
    lambda pp_split_embedding, pp_split_loss: pp_split_embedding | pp_split_loss,
    lambda pp_split_embedding, pp_split_loss, train: (
        f"plan.pp_split_embedding / pp_split_loss=true requires train.framework=megatron "
        f"(framework={train.framework}): Megatron-Core's account_for_embedding/loss_in_pipeline_split"
    ),
)
# Megatron-Core's recompute_modules "moe_act" / "moe" (transformer_config.py) act on MoE layers; bench_model,
# torchtitan, nanotron and DeepSpeed have no such module granularity (the megatron profile replaces the second rule)
# Megatron-Core TransformerConfig.__post_init__ (transformer_config.py @ 0044db1f): "CPU offloading can be done only
# for layers less than num_layers", "Currently there is no support for Pipeline parallelism with CPU offloading",
# "CPU offloading does not work when activation recomputation is enabled"
ACT_OFFLOAD_WITHIN_LAYERS = Rule(
    "act_offload_within_layers",
    lambda act_offload_layers, model: act_offload_layers >= model.num_layers,
    lambda act_offload_layers, model: (
        f"plan.act_offload_layers={act_offload_layers} must be less than num_layers={model.num_layers}"
    ),
)
ACT_OFFLOAD_NO_PP = Rule(
    "act_offload_no_pp",
    lambda act_offload_layers, pp: (act_offload_layers > 0) & (pp > 1),
    lambda act_offload_layers, pp: (
        f"plan.act_offload_layers={act_offload_layers} requires plan.pp=1 (pp={pp}): Megatron has no pipeline "
        "parallelism with activation CPU offloading"
    ),
)
ACT_OFFLOAD_NO_RECOMPUTE = Rule(
    "act_offload_no_recompute",
    lambda act_offload_layers, recompute: (act_offload_layers > 0) & (recompute != RECOMPUTE_CODE["none"]),
    lambda act_offload_layers, recompute: (
        f"plan.act_offload_layers={act_offload_layers} requires plan.recompute=none (recompute={recompute}): "
        "Megatron's CPU offloading does not work with activation recomputation"
    ),
)
ACT_OFFLOAD_NEEDS_MEGATRON = Rule(
    "act_offload_needs_megatron",
    lambda act_offload_layers: act_offload_layers > 0,
    lambda act_offload_layers, train: (
        f"plan.act_offload_layers={act_offload_layers} requires train.framework=megatron (framework="
        f"{train.framework}): Megatron-Core's --cpu-offloading-num-layers (not modelled for the others)"
    ),
)
MOE_RECOMPUTE_NEEDS_MOE = Rule(
    "moe_recompute_needs_moe",
    lambda moe_recompute, model: (moe_recompute != 0) & (not model.is_moe),
    lambda moe_recompute, model: f"plan.moe_recompute={moe_recompute} requires an MoE model ({model.name} is dense)",
)
MOE_RECOMPUTE_NEEDS_SELECTIVE = Rule(  # recompute_modules apply under recompute_granularity="selective" only
    "moe_recompute_needs_selective",
    lambda moe_recompute, recompute: (moe_recompute != 0) & (recompute != RECOMPUTE_CODE["selective"]),
    lambda moe_recompute, recompute: (
        f"plan.moe_recompute={moe_recompute} requires plan.recompute=selective (recompute={recompute}): Megatron's "
        "--recompute-modules apply to selective recompute"
    ),
)
MOE_RECOMPUTE_NEEDS_MEGATRON = Rule(
    "moe_recompute_needs_megatron",
    lambda moe_recompute: moe_recompute != 0,
    lambda moe_recompute, train: (
        f"plan.moe_recompute={moe_recompute} requires train.framework=megatron (framework={train.framework}): "
        "Megatron-Core's --recompute-modules moe_act / moe"
    ),
)
MOE_OFFLOAD_NEEDS_MEGATRON = Rule(
    "moe_offload_needs_megatron",
    lambda moe_offload: moe_offload != 0,
    lambda moe_offload, train: (
        f"plan.moe_offload={moe_offload} requires train.framework=megatron (framework={train.framework}): "
        "Megatron-Core's --fine-grained-activation-offloading --offload-modules"
    ),
)
EP_OVERLAP_NEEDS_MEGATRON = Rule(
    "ep_overlap_needs_megatron",
    lambda ep_overlap: ep_overlap,
    lambda train: (
        f"plan.ep_overlap=true requires train.framework=megatron (framework={train.framework}): Megatron-Core's "
        "--overlap-moe-expert-parallel-comm; the others dispatch on the compute stream"
    ),
)
# Megatron-Core's rank order option (megatron/training/arguments.py @ core_v0.16.1 `--use-tp-pp-dp-mapping`); the other
# trainers build their meshes in their own order (torchtitan and bench_model: pp outermost, as Megatron's default)
TP_PP_DP_MAPPING_NEEDS_MEGATRON = Rule(
    "tp_pp_dp_mapping_needs_megatron",
    lambda tp_pp_dp_mapping: tp_pp_dp_mapping,
    lambda train: (
        f"plan.tp_pp_dp_mapping=true requires train.framework=megatron (framework={train.framework}): Megatron-Core's "
        "--use-tp-pp-dp-mapping rank order"
    ),
)


# Megatron's custom pipeline layout (train.pp_layout, autotune/core/pp_layout.py): its stage count is pp * vpp
# (PipelineParallelLayerLayout.__init__ @ core_v0.16.1: len(layout) divisible by pp, vpp = len / pp), and
# TransformerConfig.__post_init__ refuses it "with other pipeline layout arguments" (account_for_embedding / loss)
def _layout_stages(train) -> int:
    from autotune.core.pp_layout import train_layout

    return len(train_layout(train.pp_layout))


# Megatron-Core's recompute_modules "mla_up_proj" (transformer_config.py @ core_v0.16.1): a selective-recompute module
# of multi-latent attention (multi_latent_attention.py `recompute_up_proj`); the other trainers have no such module
MLA_RECOMPUTE_NEEDS_MLA = Rule(
    "mla_recompute_needs_mla",
    lambda mla_recompute, model: mla_recompute & (model.attention != "mla"),
    lambda model: (
        f"plan.mla_recompute=true needs a multi-latent-attention model (model.attention=mla; {model.name} has "
        f"{model.attention}): mla_up_proj recomputes MLA's up projections"
    ),
)
MLA_RECOMPUTE_NEEDS_SELECTIVE = Rule(
    "mla_recompute_needs_selective",
    lambda mla_recompute, recompute: mla_recompute & (recompute != RECOMPUTE_CODE["selective"]),
    lambda recompute: (
        f"plan.mla_recompute=true requires plan.recompute=selective (recompute={recompute}): Megatron's "
        "recompute_modules apply with --recompute-granularity selective"
    ),
)
MLA_RECOMPUTE_NEEDS_MEGATRON = Rule(
    "mla_recompute_needs_megatron",
    lambda mla_recompute: mla_recompute,
    lambda train: (
        f"plan.mla_recompute=true requires train.framework=megatron (framework={train.framework}): Megatron-Core's "
        "--recompute-modules mla_up_proj"
    ),
)

# Megatron-Core's recompute_modules "layernorm" (transformer_layer.py @ core_v0.16.1): only norms that are modules of
# their own are recomputed; under Transformer Engine's layer spec (gpt_layer_specs.py) those are MLA's input norm and an
# MoE layer's pre-MLP norm, every other norm is fused into TELayerNormColumnParallelLinear (an IdentityOp it skips)
NORM_RECOMPUTE_NEEDS_SEPARATE_NORM = Rule(
    "norm_recompute_needs_separate_norm",
    lambda norm_recompute, model: norm_recompute & (not model.is_moe) & (model.attention != "mla"),
    lambda model: (
        f"plan.norm_recompute=true would recompute nothing on {model.name}: Megatron's layernorm module recomputes "
        "separate norms only (an MoE layer's pre-MLP norm, MLA's input norm); a dense model's norms are fused into "
        "TELayerNormColumnParallelLinear"
    ),
)
NORM_RECOMPUTE_NEEDS_SELECTIVE = Rule(
    "norm_recompute_needs_selective",
    lambda norm_recompute, recompute: norm_recompute & (recompute != RECOMPUTE_CODE["selective"]),
    lambda recompute: (
        f"plan.norm_recompute=true requires plan.recompute=selective (recompute={recompute}): Megatron's "
        "recompute_modules apply with --recompute-granularity selective"
    ),
)
NORM_RECOMPUTE_NEEDS_MEGATRON = Rule(
    "norm_recompute_needs_megatron",
    lambda norm_recompute: norm_recompute,
    lambda train: (
        f"plan.norm_recompute=true requires train.framework=megatron (framework={train.framework}): Megatron-Core's "
        "--recompute-modules layernorm"
    ),
)

# Megatron-Core's recompute_modules "mlp" (transformer_layer.py @ core_v0.16.1): `recompute_mlp` only where the layer
# is not an MoE layer
MLP_RECOMPUTE_NEEDS_DENSE_LAYER = Rule(
    "mlp_recompute_needs_dense_layer",
    lambda mlp_recompute, model: mlp_recompute & model.is_moe & (model.num_moe_layers >= model.num_layers),
    lambda model: (
        f"plan.mlp_recompute=true would recompute nothing on {model.name}: every one of its {model.num_layers} layers "
        "is an MoE layer, and Megatron's mlp module recomputes dense MLPs only (use plan.moe_recompute)"
    ),
)
MLP_RECOMPUTE_NEEDS_SELECTIVE = Rule(
    "mlp_recompute_needs_selective",
    lambda mlp_recompute, recompute: mlp_recompute & (recompute != RECOMPUTE_CODE["selective"]),
    lambda recompute: (
        f"plan.mlp_recompute=true requires plan.recompute=selective (recompute={recompute}): Megatron's "
        "recompute_modules apply with --recompute-granularity selective"
    ),
)
MLP_RECOMPUTE_NEEDS_MEGATRON = Rule(
    "mlp_recompute_needs_megatron",
    lambda mlp_recompute: mlp_recompute,
    lambda train: (
        f"plan.mlp_recompute=true requires train.framework=megatron (framework={train.framework}): Megatron-Core's "
        "--recompute-modules mlp"
    ),
)


PP_LAYOUT_STAGES = Rule(
    "pp_layout_stages",
    lambda pp, vpp, train: (pp * vpp != _layout_stages(train)) if train.pp_layout is not None else pp < 0,
    lambda pp, vpp, train: (
        f"train.pp_layout has {_layout_stages(train)} stages; pp*vpp={pp * vpp} (pp={pp}, vpp={vpp}): "
        "Megatron's layout fixes the pipeline's stage count"
    ),
)
PP_LAYOUT_NO_SPLIT = Rule(
    "pp_layout_no_split",
    lambda pp_split_embedding, pp_split_loss, train: (
        (pp_split_embedding | pp_split_loss) & (train.pp_layout is not None)
    ),
    lambda train: (
        "plan.pp_split_embedding / pp_split_loss=true with train.pp_layout: Megatron-Core refuses a layout "
        "with other pipeline layout arguments (the layout places the embedding and the loss)"
    ),
)

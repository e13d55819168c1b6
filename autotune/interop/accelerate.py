"""Hugging Face accelerate config (YAML for `accelerate launch --config_file FILE`), key names of accelerate 1.15.0
(`accelerate/commands/config/config_args.py` ClusterConfig; `commands/config/cluster.py` writes the fsdp_config /
deepspeed_config / parallelism_config keys; `commands/launch.py` reads them back as launch flags).

Which plugin (accelerate applies one of them, configured in the file; TP/CP need FSDP2's ParallelismConfig):
- tp = cp = 1, zero_stage 0/2/3: FSDP (version 1) with the sharding strategy users know from fsdp_config.yaml:
  NO_SHARD / SHARD_GRAD_OP / FULL_SHARD. accelerate 1.15 spells that key `fsdp_reshard_after_forward` (the older
  `fsdp_sharding_strategy` is deprecated in `utils/dataclasses.py`).
- tp = cp = 1, zero_stage 1: the DeepSpeed plugin with zero_stage 1 (FSDP has no optimizer-only sharding).
- tp > 1 or cp > 1: FSDP2 plus `parallelism_config` (dp_shard/tp/cp sizes); accelerate's ParallelismConfig refuses
  TP/CP with pure replication, so zero_stage 0/1 become reshard_after_forward=false (ZeRO-2-like) and say so; with
  dp = cp = 1 there is nothing for FSDP to shard, so the file uses MULTI_GPU with tp only (accelerate's own rule).
The micro-batch size and gradient accumulation live in the training script (DataLoader batch_size,
Accelerator(gradient_accumulation_steps=...)) except under the DeepSpeed plugin: they are listed as not mapped.
"""

from __future__ import annotations

from autotune.core.model import ModelSpec
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.interop._common import (
    Export,
    ExportContext,
    apply_tables,
    comment_block,
    header_lines,
    skip_not_mapped,
    skip_train,
)
from autotune.interop.plan_keys import TABLES
from autotune.interop.train_keys import TRAIN_TABLES

TARGET = "accelerate 1.15.0 (accelerate/commands/config/config_args.py; accelerate launch --config_file FILE)"
FSDP1_STRATEGY = {0: "NO_SHARD", 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}
# FSDP1 hybrid sharding (accelerate utils/constants.py FSDP_SHARDING_STRATEGY): shard within a node, replicate across
# nodes; torch's FSDP1 builds the shard group from the devices of one node (fsdp/_init_utils.py
# _init_intra_and_inter_node_groups), so it expresses plan.dp_shard only when dp_shard == gpus_per_node.
FSDP1_HYBRID = {2: "HYBRID_SHARD_ZERO2", 3: "HYBRID_SHARD"}
PLAN_KEYS = TABLES["accelerate"]  # autotune/interop/plan_keys.py
TRAIN_KEYS = TRAIN_TABLES["accelerate"]  # autotune/interop/train_keys.py


def translate(ctx: ExportContext) -> Export:
    p = ctx.plan
    ex = Export(target=TARGET, body={})
    # pipeline fields: one line below; the micro-batch is the script's DataLoader batch_size (a note, not a skip)
    skip_not_mapped(ex, p, PLAN_KEYS, handled=("pp", "vpp", "pp_schedule", "micro_batch_size"))
    skip_train(ex, ctx, TRAIN_KEYS)
    body: dict = {"compute_environment": "LOCAL_MACHINE", "debug": False}
    if p.tp == p.cp == 1 and (p.zero_stage == 1 or p.offload == "optimizer"):
        body.update(_deepspeed_plugin(ctx, ex))
    elif p.tp == p.cp == 1 and p.dp_shard in (0, ctx.cluster.gpus_per_node):
        body.update(_fsdp1(ctx, ex))
    else:
        body.update(_fsdp2_nd(ctx, ex))
    # accelerate checks dp_replicate*dp_shard*tp*cp == num_processes; without PP that is the whole world
    procs = p.dp * p.tp * p.cp
    body.update(
        {
            "machine_rank": 0,
            "main_training_function": "main",
            "mixed_precision": "fp8" if p.fp8 == "tensorwise" else "bf16" if ctx.bf16 else "no",
            "num_machines": -(-procs // ctx.cluster.gpus_per_node),
            "num_processes": procs,
            "rdzv_backend": "static",
            "same_network": True,
            "use_cpu": False,
        }
    )
    if p.pp > 1:
        ex.skip(
            f"plan.pp={p.pp} vpp={p.vpp} pp_schedule={p.pp_schedule}",
            "accelerate has no pipeline parallelism for training (its PiPPy integration is inference-only); "
            f"the file describes num_processes = dp*tp*cp = {procs} ranks, not {ctx.world_size}",
        )
    if p.fp8 == "tensorwise":
        # accelerate 1.x commands/launch.py: fp8_config keys become --fp8_<key>; backend "ao" = torchao, whose
        # AORecipeKwargs default Float8LinearConfig() is the tensorwise recipe (utils/dataclasses.py)
        body["fp8_config"] = {"backend": "AO"}
        ex.notes.append(
            "fp8: accelerate's AO backend skips the first and last linear layers by default "
            "(utils/ao.py filter_first_and_last_linear_layers); autotune modelled every block linear in fp8 "
            "and the LM head in bf16"
        )
    elif p.fp8 == "rowwise":
        ex.skip(
            "plan.fp8=rowwise",
            "accelerate's config file selects only the FP8 backend; the rowwise recipe needs "
            "AORecipeKwargs(config=Float8LinearConfig.from_recipe_name('rowwise')) in the training script",
        )
    elif p.fp8 in ("mxfp8", "nvfp4"):
        ex.skip(f"plan.fp8={p.fp8}", "accelerate's fp8 backends (TE, MSAMP, AO float8) have no block-scaled recipe")
    ex.body = body
    return apply_tables(ex, ctx, PLAN_KEYS, TRAIN_KEYS)


def _fsdp1(ctx: ExportContext, ex: Export) -> dict:
    p = ctx.plan
    _script_batch(ctx, ex, with_accum=True)
    return {
        "distributed_type": "FSDP",
        "fsdp_config": {
            "fsdp_activation_checkpointing": _full_recompute(ctx, ex),
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_backward_prefetch": "BACKWARD_PRE",
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_forward_prefetch": False,
            "fsdp_offload_params": p.offload == "params",  # FSDP1 CPUOffload(offload_params=True)
            "fsdp_reshard_after_forward": (FSDP1_HYBRID if p.dp_shard else FSDP1_STRATEGY)[p.zero_stage],
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_sync_module_states": True,
            "fsdp_use_orig_params": True,
            "fsdp_version": 1,
        },
    }


def _fsdp2_nd(ctx: ExportContext, ex: Export) -> dict:
    p = ctx.plan
    _script_batch(ctx, ex, with_accum=True)
    sizes = {
        "parallelism_config_dp_replicate_size": p.dp // p.dp_shard_size,  # HSDP: replicate x shard
        "parallelism_config_dp_shard_size": p.dp_shard_size,
        "parallelism_config_tp_size": p.tp,
        "parallelism_config_cp_size": p.cp,
    }
    if p.dp == 1 and p.cp == 1:  # only TP: FSDP would have no mesh dimension to shard across
        _full_recompute(ctx, ex, plugin="MULTI_GPU (no activation-checkpointing key)")
        return {"distributed_type": "MULTI_GPU", "parallelism_config": sizes}
    if p.offload == "optimizer":
        ex.skip(
            "plan.offload=optimizer",
            "FSDP2 has no optimizer-only CPU offload (CPUOffloadPolicy moves params, grads and optimizer state); "
            "accelerate's DeepSpeed plugin has it but not with TP/CP: not offloaded in this file",
        )
    if p.zero_stage in (0, 1) and p.dp > 1:
        ex.skip(
            f"plan.zero_stage={p.zero_stage}",
            "accelerate composes TP/CP only with FSDP2 sharding over dp; "
            "written as fsdp_reshard_after_forward=false (ZeRO-2-like: gradients and optimizer state sharded)",
        )
    return {
        "distributed_type": "FSDP",
        "fsdp_config": {
            "fsdp_activation_checkpointing": _full_recompute(ctx, ex),
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_offload_params": p.offload == "params",  # FSDP2 CPUOffloadPolicy
            "fsdp_reshard_after_forward": p.zero_stage == 3,
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_version": 2,
        },
        "parallelism_config": sizes,
    }


def _deepspeed_plugin(ctx: ExportContext, ex: Export) -> dict:
    _script_batch(ctx, ex, with_accum=False)
    if ctx.plan.recompute != "none":
        ex.skip(
            f"plan.recompute={ctx.plan.recompute}",
            "the DeepSpeed plugin has no activation-checkpointing key; "
            "call gradient_checkpointing_enable() (full) in the script",
        )
    return {
        "distributed_type": "DEEPSPEED",
        "deepspeed_config": {
            "gradient_accumulation_steps": ctx.plan.grad_accum_steps,
            "offload_optimizer_device": "cpu" if ctx.plan.offload != "none" else "none",
            "offload_param_device": "cpu" if ctx.plan.offload == "params" else "none",
            "zero3_init_flag": False,
            "zero_stage": ctx.plan.zero_stage,
        },
    }


def _full_recompute(ctx: ExportContext, ex: Export, plugin: str = "FSDP") -> bool:
    mode = ctx.plan.recompute
    if mode == "selective" or (mode == "full" and plugin != "FSDP"):
        ex.skip(
            f"plan.recompute={mode}",
            f"{plugin}: accelerate's only switch is fsdp_activation_checkpointing (whole transformer layers)",
        )
    return mode == "full"


def _script_batch(ctx: ExportContext, ex: Export, with_accum: bool) -> None:
    p = ctx.plan
    ex.skip(f"plan.micro_batch_size={p.micro_batch_size}", "set the per-process DataLoader batch_size in the script")
    if with_accum:
        ex.skip(
            f"plan.grad_accum_steps={p.grad_accum_steps}",
            "set Accelerator(gradient_accumulation_steps=...) in the script",
        )


def render(model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, plan: ParallelPlan) -> str:
    import yaml

    ctx = ExportContext(model, train, cluster, plan)
    ex = translate(ctx)
    return comment_block(header_lines(ctx, ex)) + yaml.safe_dump(ex.body, sort_keys=False)

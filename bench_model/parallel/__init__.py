"""`parallelize`: apply parallelism to one (pipeline-stage) model from outside, in the fixed torchtitan order
float8 linears (plan.fp8) -> TP + SP (+ async TP: plan.tp_overlap) -> expert parallelism (MoE models: experts sharded
over ep/etp, token dispatch, bench_model.parallel.expert_parallel) -> CP -> activation recompute -> torch.compile per
block (spec.compile) -> data parallel (ZeRO stage over dp x cp; the routed experts over edp; plan.offload=params adds
FSDP2's CPUOffloadPolicy there). Pipeline splitting happens before, in bench_model.parallel.pipeline."""

from __future__ import annotations

from torch import nn

from autotune.core.errors import SpecError
from autotune.core.types import ParallelPlan
from bench_model.parallel.context_parallel import apply_context_parallel
from bench_model.parallel.data_parallel import apply_data_parallel, needs_fsdp
from bench_model.parallel.expert_parallel import apply_expert_parallel, expert_grad_divisor
from bench_model.parallel.float8 import apply_float8
from bench_model.parallel.mesh import Meshes, build_meshes
from bench_model.parallel.recompute import apply_recompute
from bench_model.parallel.tensor_parallel import apply_tensor_parallel, enable_async_tp

__all__ = ["Meshes", "build_meshes", "parallelize"]


def parallelize(
    model: nn.Module,
    meshes: Meshes,
    plan: ParallelPlan,
    precision: str,
    compile: bool = False,
    device_type: str = "cpu",
) -> None:
    if plan.pp_split_embedding or plan.pp_split_loss:  # Megatron-Core's split option; bench_model's has no such slot
        raise SpecError(
            f"plan.pp_split_embedding={str(plan.pp_split_embedding).lower()} pp_split_loss="
            f"{str(plan.pp_split_loss).lower()}: bench_model's pipeline split (bench_model/parallel/pipeline.py) gives "
            "the embedding and the loss no layer slot; this is Megatron-Core's account_for_*_in_pipeline_split"
        )
    if plan.mla_recompute:  # rule mla_recompute_needs_megatron
        raise SpecError(
            "plan.mla_recompute=true: Megatron-Core's --recompute-modules mla_up_proj; bench_model's MLA "
            "(bench_model/mla.py) has no up-projection recompute"
        )
    if plan.norm_recompute:  # rule norm_recompute_needs_megatron
        raise SpecError(
            "plan.norm_recompute=true: Megatron-Core's --recompute-modules layernorm; bench_model's selective "
            "recompute is its own op policy (bench_model/parallel/recompute.py), with no norm-only module"
        )
    if plan.mlp_recompute:  # rule mlp_recompute_needs_megatron
        raise SpecError(
            "plan.mlp_recompute=true: Megatron-Core's --recompute-modules mlp; bench_model's selective recompute is "
            "its own op policy (bench_model/parallel/recompute.py), with no MLP-only module"
        )
    if plan.tp_pp_dp_mapping:  # rule tp_pp_dp_mapping_needs_megatron
        raise SpecError(
            "plan.tp_pp_dp_mapping=true: Megatron-Core's --use-tp-pp-dp-mapping rank order; bench_model builds its "
            "mesh pp-outermost (bench_model/parallel/mesh.py)"
        )
    if plan.moe_recompute != "none" or plan.act_offload_layers or plan.moe_offload != "none":  # *_needs_megatron
        raise SpecError(
            f"plan.moe_recompute={plan.moe_recompute} act_offload_layers={plan.act_offload_layers} "
            f"moe_offload={plan.moe_offload}: Megatron-Core's --recompute-modules moe_act/moe, "
            "--cpu-offloading-num-layers and --fine-grained-activation-offloading; bench_model runs none of them"
        )
    if plan.fp8 != "none":  # module swap first, as torchtitan's model converters run before parallelize
        apply_float8(model, plan.fp8)
    if plan.tp > 1:
        apply_tensor_parallel(model, meshes.tp, plan.sequence_parallel)
    if plan.tp_overlap:  # async TP: Inductor's micro-pipeline pass over the compiled blocks (or one SpecError)
        enable_async_tp(meshes.tp, device_type, compile)
    if meshes.expert is not None:
        apply_expert_parallel(model, meshes, plan)
    if plan.cp > 1:
        apply_context_parallel(model, meshes.cp)
    apply_recompute(model, plan.recompute, compiled=compile, layers=plan.recompute_layers)
    if compile:  # per block, in place (parameter names unchanged), as torchtitan does before FSDP
        for block in model.layers.values():
            block.compile()
    if needs_fsdp(plan.dp * plan.cp, precision):
        apply_data_parallel(
            model, meshes, plan.zero_stage, precision, plan.offload, device_type, expert_grad_divisor(plan)
        )

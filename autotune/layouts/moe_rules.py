"""Layout rules of expert parallelism (plan.ep, plan.etp) on mixture-of-experts models, as plain functions over plan
arrays: `MOE_RULES`, `Rule`s of the one table (autotune/layouts/rules.py `RULES` includes them); `check_moe_plan` is the
scalar wrapper the trainer calls before it builds anything.

The mesh semantics they protect: Megatron-Core's "parallel folding" (megatron/core/transformer/moe/README.md, "MoE
Parallel Folding"; parallel_state.py `initialize_model_parallel`, expert ranks generated as etp x ep x edp x pp over
the same world): per pipeline stage the W/pp ranks are viewed as (edp, ep, etp), etp innermost, independently of the
attention's (dp, cp, tp). Hence:

- ep_dense_model: ep or etp > 1 needs experts to split (num_experts > 0);
- ep_divides_experts: each ep rank holds num_experts/ep whole experts (Megatron arguments.py: "num_experts must be
  divisible by expert_model_parallel_size");
- etp_divides_moe_ffn: each etp rank holds moe_ffn_hidden_size/etp columns of every local expert;
- moe_fold: ep*etp must divide the ranks of a stage, W/pp = dp*cp*tp (Megatron: world divisible by etp*ep*pp);
- moe_needs_sp: with tp > 1 and ep*etp > 1 the MoE layer's tokens must differ across the tp ranks, i.e. the residual
  stream is sequence-sharded (Megatron arguments.py: "When using expert parallelism and tensor parallelism, sequence
  parallelism must be used"); without SP every tp rank would dispatch the same tokens again;
- moe_dispatcher_needs_ep: a dispatcher other than the default alltoall needs ep > 1 (which dispatcher each framework
  offers is its profile's rule: autotune/predict/frameworks/).
- ep_overlap_needs_ep, ep_overlap_dispatcher, ep_overlap_no_layer_recompute, ep_overlap_pp_needs_vpp: Megatron's
  EP communication overlap (plan.ep_overlap) as Megatron-Core asserts it (comment at the rules); which frameworks
  offer it at all is `ep_overlap_needs_megatron` (autotune/layouts/rules.py).
- moe_offload_needs_moe, moe_offload_not_with_layer_recompute, moe_offload_not_with_cpu_offloading: Megatron's
  fine-grained activation offloading of the experts' inputs (plan.moe_offload) as TransformerConfig asserts it;
  `moe_offload_needs_megatron` (autotune/layouts/rules.py) keeps it to the megatron profile.
"""

from __future__ import annotations

import numpy as np

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.rules import Rule
from autotune.core.types import ParallelPlan

EP_DENSE_MODEL = Rule(
    "ep_dense_model",
    lambda ep, etp, model: (ep * etp > 1) & (model.num_experts == 0),
    lambda ep, etp: f"ep={ep}, etp={etp} need a mixture-of-experts model (model.num_experts=0)",
)
EP_DIVIDES_EXPERTS = Rule(
    "ep_divides_experts",
    lambda ep, model: (model.num_experts > 0) & (model.num_experts % ep != 0),
    lambda ep, model: f"ep={ep} does not divide num_experts={model.num_experts}",
)
ETP_DIVIDES_MOE_FFN = Rule(
    "etp_divides_moe_ffn",
    lambda etp, model: (model.num_experts > 0) & (model.moe_ffn_hidden_size % etp != 0),
    lambda etp, model: f"etp={etp} does not divide moe_ffn_hidden_size={model.moe_ffn_hidden_size}",
)
MOE_FOLD = Rule(
    "moe_fold",
    lambda ep, etp, dp, cp, tp: (dp * cp * tp) % (ep * etp) != 0,
    lambda ep, etp, dp, cp, tp: (
        f"ep*etp={ep}*{etp}={ep * etp} does not divide the ranks of a pipeline stage "
        f"dp*cp*tp={dp}*{cp}*{tp}={dp * cp * tp} (world must be divisible by etp*ep*pp)"
    ),
)
MOE_NEEDS_SP = Rule(
    "moe_needs_sp",
    lambda ep, etp, tp, sequence_parallel: (ep * etp > 1) & (tp > 1) & ~sequence_parallel.astype(bool),
    lambda ep, etp, tp: (
        f"ep={ep}, etp={etp} with tp={tp} require sequence_parallel=true (the MoE layer needs distinct "
        "tokens on every tp rank, as Megatron-LM requires)"
    ),
)
# plan.moe_dispatcher other than alltoall chooses how EP ranks exchange tokens: with ep = 1 there is no exchange
# (torchtitan parallelize.py: "DeepEP requires expert parallelism (ep_degree > 1)")
MOE_DISPATCHER_NEEDS_EP = Rule(
    "moe_dispatcher_needs_ep",
    lambda moe_dispatcher, ep: (moe_dispatcher != 0) & (ep == 1),
    lambda moe_dispatcher, ep: (
        f"moe_dispatcher={moe_dispatcher} requires ep > 1 (ep={ep}): without expert parallelism no tokens are "
        "dispatched (alltoall is the default)"
    ),
)
# plan.ep_overlap (Megatron --overlap-moe-expert-parallel-comm): what Megatron-Core's TransformerConfig.__post_init__
# asserts (NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py @ d98e8a64): "only supported with expert
# model parallelism", "supported with alltoall/flex token dispatcher" (flex = DeepEP / HybridEP), "disable full
# recomputation" and "disable moe in recompute_modules", "virtual_pipeline_model_parallel_size must be specified when
# pipeline_model_parallel_size > 1" (the combined 1F1B schedule pairs the chunks of the interleaved schedule)
EP_OVERLAP_NEEDS_EP = Rule(
    "ep_overlap_needs_ep",
    lambda ep_overlap, ep: ep_overlap & (ep == 1),
    lambda ep: f"plan.ep_overlap=true requires plan.ep > 1 (ep={ep}): no expert-parallel all-to-all to overlap",
)
EP_OVERLAP_DISPATCHER = Rule(
    "ep_overlap_dispatcher",
    lambda ep_overlap, moe_dispatcher: ep_overlap & (moe_dispatcher == 1),
    lambda moe_dispatcher: (
        f"plan.ep_overlap=true requires plan.moe_dispatcher alltoall, deepep or hybridep "
        f"(moe_dispatcher={moe_dispatcher}): Megatron overlaps the alltoall/flex dispatchers only"
    ),
)
EP_OVERLAP_NO_LAYER_RECOMPUTE = Rule(
    "ep_overlap_no_layer_recompute",
    lambda ep_overlap, recompute, moe_recompute: ep_overlap & ((recompute == 2) | (moe_recompute == 2)),
    lambda recompute, moe_recompute: (
        f"plan.ep_overlap=true requires no full recompute and moe_recompute other than moe (recompute={recompute}, "
        f"moe_recompute={moe_recompute}): Megatron asserts it"
    ),
)
EP_OVERLAP_PP_NEEDS_VPP = Rule(
    "ep_overlap_pp_needs_vpp",
    lambda ep_overlap, pp, vpp: ep_overlap & (pp > 1) & (vpp == 1),
    lambda pp, vpp: (
        f"plan.ep_overlap=true with pp={pp} requires plan.vpp > 1 (vpp={vpp}): Megatron's combined 1F1B schedule "
        "needs the interleaved pipeline"
    ),
)
# plan.moe_offload (Megatron fine-grained activation offloading of the experts' inputs): Megatron-LM
# megatron/core/transformer/transformer_config.py @ d98e8a64 `__post_init__`: "fine_grained_activation_offloading
# cannot be enabled with cpu_offloading"; "Cannot offload {'moe_act', 'expert_fc1', ...} while recomputing the entire
# MoE layer"; the expert modules exist on MoE models only. Which frameworks offer it: `moe_offload_needs_megatron`.
MOE_OFFLOAD_NEEDS_MOE = Rule(
    "moe_offload_needs_moe",
    lambda moe_offload, model: (moe_offload != 0) & (not model.is_moe),
    lambda moe_offload, model: f"plan.moe_offload={moe_offload} requires an MoE model ({model.name} is dense)",
)
MOE_OFFLOAD_NOT_WITH_LAYER_RECOMPUTE = Rule(
    "moe_offload_not_with_layer_recompute",
    lambda moe_offload, moe_recompute: (moe_offload != 0) & (moe_recompute == 2),
    lambda moe_offload, moe_recompute: (
        f"plan.moe_offload={moe_offload} cannot run with moe_recompute={moe_recompute}: Megatron asserts that "
        "nothing inside a recomputed MoE layer is offloaded"
    ),
)
MOE_OFFLOAD_NOT_WITH_CPU_OFFLOADING = Rule(
    "moe_offload_not_with_cpu_offloading",
    lambda moe_offload, act_offload_layers: (moe_offload != 0) & (act_offload_layers > 0),
    lambda moe_offload, act_offload_layers: (
        f"plan.moe_offload={moe_offload} cannot run with act_offload_layers={act_offload_layers}: Megatron's "
        "fine-grained activation offloading cannot be enabled with cpu_offloading"
    ),
)
MOE_RULES: tuple[Rule, ...] = (
    EP_DENSE_MODEL,
    EP_DIVIDES_EXPERTS,
    ETP_DIVIDES_MOE_FFN,
    MOE_FOLD,
    MOE_NEEDS_SP,
    MOE_DISPATCHER_NEEDS_EP,
    EP_OVERLAP_NEEDS_EP,
    EP_OVERLAP_DISPATCHER,
    EP_OVERLAP_NO_LAYER_RECOMPUTE,
    EP_OVERLAP_PP_NEEDS_VPP,
    MOE_OFFLOAD_NEEDS_MOE,
    MOE_OFFLOAD_NOT_WITH_LAYER_RECOMPUTE,
    MOE_OFFLOAD_NOT_WITH_CPU_OFFLOADING,
)


def moe_rejections(arr: dict[str, np.ndarray], model: ModelSpec) -> list[tuple[str, np.ndarray]]:
    """(rule id, failing mask) of each MoE rule over plan arrays, in table order."""
    out = []
    for rule in MOE_RULES:
        ctx = {"model": model} if "model" in rule.context(rule.violated) else {}
        mask = rule.violated(**{c: np.asarray(arr[c]) for c in rule.columns}, **ctx)
        out.append((rule.id, np.broadcast_to(mask, np.shape(arr["dp"]))))
    return out


def check_moe_plan(plan: ParallelPlan, model: ModelSpec) -> None:
    """Raise SpecError with the first MoE rule `plan` breaks (the trainer's own check; the planner uses the table)."""
    arr = arrays_from_plans([plan])
    for rule in MOE_RULES:
        ctx = {"model": model} if "model" in rule.context(rule.violated) else {}
        if bool(np.asarray(rule.violated(**{c: arr[c] for c in rule.columns}, **ctx)).reshape(-1)[0]):
            mctx = {"model": model} if "model" in rule.context(rule.message) else {}
            values = {c: getattr(plan, c) for c in rule.message_columns}
            raise SpecError(f"plan: {rule.message(**values, **mctx)} [{rule.id}]")

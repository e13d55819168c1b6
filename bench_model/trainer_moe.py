"""The trainer's mixture-of-experts settings: the trial's own checks, the routing and auxiliary-loss scaling of every
MoE block, the ZeRO-1 optimizer with the experts' states over their own group, and which expert GEMM path ran."""

from __future__ import annotations

import torch
from torch import nn

from autotune.core.errors import SpecError
from autotune.core.trial import TrialSpec
from autotune.layouts.moe_rules import check_moe_plan
from bench_model.parallel.data_parallel import ZeRO1AdamW
from bench_model.parallel.expert_parallel import moe_modules
from bench_model.parallel.mesh import Meshes
from bench_model.parallel.pipeline import losses_are_scaled


def check_moe_trial(spec: TrialSpec) -> None:
    """One-line SpecErrors for what bench_model cannot run (the layout rules of autotune.layouts.moe_rules, then
    the trainer's own limits)."""
    m, p = spec.model, spec.plan
    check_moe_plan(p, m)
    if p.moe_dispatcher != "alltoall":  # the planner's rule bench_model_moe_dispatcher, for a hand-made spec
        raise SpecError(
            f"plan.moe_dispatcher={p.moe_dispatcher}: bench_model dispatches with all-to-all only (use alltoall)"
        )
    if p.ep_overlap:  # the planner's rule ep_overlap_needs_megatron, for a hand-made spec
        raise SpecError(
            "plan.ep_overlap=true: bench_model dispatches on the compute stream, one micro-batch at a time "
            "(Megatron's --overlap-moe-expert-parallel-comm only; use false)"
        )
    if m.is_moe and m.moe_capacity_factor is not None:
        raise SpecError(
            f"model.moe_capacity_factor={m.moe_capacity_factor}: bench_model runs dropless MoE only (null); "
            "token dropping beyond a capacity is not implemented"
        )
    if m.attention == "mla" and p.tp > 1:
        raise SpecError(f"model.attention=mla with plan.tp={p.tp}: bench_model runs MLA without tensor parallelism")


def configure_moe(part: nn.Module, spec: TrialSpec) -> None:
    """Routing mode and the auxiliary loss's gradient scale of every MoE block of a stage. The balance loss must
    reach the router's gradient with the weight the language-model loss has: 1/grad_accum per micro-batch on the
    flat path (the loss is divided by it), 1 under a pipeline schedule that scales gradients afterwards; times cp,
    because each CP rank holds part of every sequence while FSDP averages over dp x cp (bench_model.moe)."""
    p = spec.plan
    per_microbatch = 1.0 / p.grad_accum_steps if p.pp == 1 or losses_are_scaled() else 1.0
    for moe in moe_modules(part):
        moe.balanced = spec.train.moe_routing == "balanced"
        moe.aux_scale = p.cp * per_microbatch


class _Optimizers:
    """Several optimizers stepped as one (dense states over dp x cp, expert states over edp)."""

    def __init__(self, *optimizers):
        self.optimizers = optimizers
        self.param_groups = [g for o in optimizers for g in o.param_groups]

    def step(self) -> None:
        for o in self.optimizers:
            o.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.optimizers:
            o.zero_grad(set_to_none=set_to_none)


def expert_zero1_optimizer(parts: list[nn.Module], meshes: Meshes, host: bool, **kwargs):
    """ZeRO-1 with routed experts: the dense parameters' AdamW slices over dp x cp, the experts' over edp (the ranks
    holding the same expert slice; Megatron's distributed optimizer shards expert states over EDP)."""
    expert = {id(q) for part in parts for moe in moe_modules(part) for q in moe.experts.parameters()}
    params = [q for part in parts for q in part.parameters()]
    dense = [q for q in params if id(q) not in expert]
    experts = [q for q in params if id(q) in expert]
    edp = meshes.expert.edp
    opt_dense = ZeRO1AdamW(dense, meshes.dp_cp.get_group(), host=host, **kwargs)
    if edp.size() > 1:
        return _Optimizers(opt_dense, ZeRO1AdamW(experts, edp.get_group(), host=host, **kwargs))
    return _Optimizers(opt_dense, torch.optim.AdamW(experts, **kwargs))


def experts_path(parts: list[nn.Module]) -> str:
    """How the routed experts ran in the last forward: "grouped_mm", "loop", or "" on a dense model."""
    paths = sorted({moe.experts.path for part in parts for moe in moe_modules(part) if moe.experts.path})
    return ",".join(paths)

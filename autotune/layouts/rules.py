"""Rules a parallel layout must satisfy before it can run, each with a human reason naming values and rule.

`RULES` is the one table of the generic rules (a `Rule` each: autotune/core/rules.py); a framework profile drops the
generic rules that are its framework's limits (`replaces_rules`) and adds its own (`FrameworkProfile.rules`).
`rejections` evaluates a table over plan arrays and is the only evaluator: the planner calls it on every candidate,
`check_plan` on one plan (arrays of length 1), and `require_well_formed` (the exporters and the bench trainer) on the
rules that make a plan no layout at all (`WELL_FORMED`: the batch product and the cross-field rules of one
`ParallelPlan`). Rules are checked in order and a candidate keeps the first reason it fails, with that rule's stable
id (`tp_divides_heads`, `pp_microbatches`, ...: the `reject_rule` column; code tests the id, never the message).
Reasons are formatted once per distinct value combination (a few dozen), not once per candidate.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import (
    FP8_CODE,
    OFFLOAD_CODE,
    SCHEDULE_CODE,
    arrays_from_plans,
    plan_cells,
)
from autotune.core.rules import Rule
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.layouts.megatron_rules import (
    ACT_OFFLOAD_NEEDS_MEGATRON,
    ACT_OFFLOAD_NO_PP,
    ACT_OFFLOAD_NO_RECOMPUTE,
    ACT_OFFLOAD_WITHIN_LAYERS,
    EP_OVERLAP_NEEDS_MEGATRON,
    MLA_RECOMPUTE_NEEDS_MEGATRON,
    MLA_RECOMPUTE_NEEDS_MLA,
    MLA_RECOMPUTE_NEEDS_SELECTIVE,
    MLP_RECOMPUTE_NEEDS_DENSE_LAYER,
    MLP_RECOMPUTE_NEEDS_MEGATRON,
    MLP_RECOMPUTE_NEEDS_SELECTIVE,
    MOE_OFFLOAD_NEEDS_MEGATRON,
    MOE_RECOMPUTE_NEEDS_MEGATRON,
    MOE_RECOMPUTE_NEEDS_MOE,
    MOE_RECOMPUTE_NEEDS_SELECTIVE,
    NORM_RECOMPUTE_NEEDS_MEGATRON,
    NORM_RECOMPUTE_NEEDS_SELECTIVE,
    NORM_RECOMPUTE_NEEDS_SEPARATE_NORM,
    PP_LAYOUT_NO_SPLIT,
    PP_LAYOUT_STAGES,
    PP_SPLIT_DIVIDES,
    PP_SPLIT_NEEDS_MEGATRON,
    PP_SPLIT_NEEDS_PP,
    TP_PP_DP_MAPPING_NEEDS_MEGATRON,
)
from autotune.layouts.moe_rules import MOE_RULES
from autotune.layouts.recompute_rules import RECOMPUTE_LAYERS_NEEDS_FULL, RECOMPUTE_LAYERS_RULES
from autotune.predict.frameworks import get_profile
from autotune.predict.perf_terms import RECIPE_PEAK_FIELD
from autotune.spec.config import SpaceSpec


def _domain(cluster: ClusterSpec) -> str:
    """The fast-link limit a within-node rule names: the NVLink domain where the preset sets one (GB200 NVL72: 72 GPUs
    over 18 nodes of 4), else the node."""
    if cluster.nvlink_domain_size is not None:
        return f"nvlink_domain_size={cluster.nvlink_domain_size}"
    return f"gpus_per_node={cluster.gpus_per_node}"


MEMORY_RULE = (
    "memory"  # the planner's own rejection: the layout's estimated peak does not fit (autotune.layouts.planner)
)
HOST_MEMORY_RULE = "host_memory"  # the offloaded states do not fit in cluster.host_memory_bytes_per_gpu (planner)

BATCH_DIVISIBLE = Rule(
    "batch_divisible",
    lambda dp, micro_batch_size, train: train.global_batch_size % (dp * micro_batch_size) != 0,
    lambda dp, micro_batch_size, train: (
        f"train.global_batch_size={train.global_batch_size} is not divisible by dp*micro_batch_size="
        f"{dp}*{micro_batch_size}={dp * micro_batch_size}"
    ),
)
BATCH_PRODUCT = Rule(
    "batch_product",
    lambda dp, micro_batch_size, grad_accum_steps, train: (
        dp * micro_batch_size * grad_accum_steps != train.global_batch_size
    ),
    lambda dp, micro_batch_size, grad_accum_steps, train: (
        f"dp*micro_batch_size*grad_accum_steps={dp}*{micro_batch_size}*{grad_accum_steps}="
        f"{dp * micro_batch_size * grad_accum_steps} != train.global_batch_size={train.global_batch_size}"
    ),
)
# Megatron's sequence parallelism splits the TP group's activations (Korthikanti et al. 2022 Sec 4.2.2): no TP, no SP
SP_NEEDS_TP = Rule(
    "sp_needs_tp",
    lambda sequence_parallel, tp: sequence_parallel & (tp == 1),
    lambda tp: f"plan.sequence_parallel=true requires plan.tp > 1 (tp={tp})",
)
# TP communication overlap decomposes the sequence-parallel all-gather / reduce-scatter around the GEMMs they feed
# (Wang et al. 2023): no TP, nothing to overlap; without SP the TP collectives are all-reduces of the GEMM outputs,
# which neither implementation decomposes (Megatron-LM validate_args: "Tensor parallel communication/GEMM overlap can
# happen only when sequence parallelism is enabled"; torch's micro-pipeline TP matches all-gather -> mm and
# mm -> reduce-scatter only)
TP_OVERLAP_NEEDS_TP = Rule(
    "tp_overlap_needs_tp",
    lambda tp_overlap, tp: tp_overlap & (tp == 1),
    lambda tp: f"plan.tp_overlap=true requires plan.tp > 1 (tp={tp}): no TP collectives to overlap",
)
TP_OVERLAP_NEEDS_SP = Rule(
    "tp_overlap_needs_sp",
    lambda tp_overlap, sequence_parallel, tp: tp_overlap & ~np.asarray(sequence_parallel, dtype=bool) & (tp > 1),
    lambda tp: (
        f"plan.tp_overlap=true requires plan.sequence_parallel=true (tp={tp}): only SP's all-gather / reduce-scatter "
        "are decomposed around their GEMMs (Megatron --tp-comm-overlap, torch async TP)"
    ),
)
# torch's async TP is Inductor's micro-pipeline TP pass (torch._inductor.config._micro_pipeline_tp): it rewrites
# compiled graphs only. bench_model and torchtitan 0.2.2 (maybe_enable_async_tp raises without compile) need
# plan.compile; Megatron (Transformer Engine userbuffers) and nanotron replace this rule.
TP_OVERLAP_NEEDS_COMPILE = Rule(
    "tp_overlap_needs_compile",
    lambda tp_overlap, compile: tp_overlap & ~np.asarray(compile, dtype=bool),
    lambda compile: (
        f"plan.tp_overlap=true requires plan.compile=true (compile={str(bool(compile)).lower()}): torch async TP is "
        "Inductor's micro-pipeline TP pass, applied to compiled graphs only"
    ),
)
VPP_NEEDS_PP = Rule(
    "vpp_needs_pp",
    lambda vpp, pp: (vpp > 1) & (pp == 1),
    lambda vpp, pp: f"plan.vpp={vpp} requires plan.pp > 1 (pp={pp})",
)
# torch.distributed.pipelining: ScheduleInterleaved1F1B runs several stages per rank, the others one
SCHEDULE_MATCHES_VPP = Rule(
    "schedule_matches_vpp",
    lambda vpp, pp, pp_schedule: ((vpp > 1) != (pp_schedule == SCHEDULE_CODE["interleaved_1f1b"])) & (pp > 1),
    lambda pp_schedule, vpp: (
        f"plan.pp_schedule={pp_schedule!r} with vpp={vpp}: interleaved_1f1b is used exactly when vpp > 1"
    ),
)
# HSDP (Zhao et al. 2023, "PyTorch FSDP", Sec 3.2.2): shard groups tile dp; only FSDP (ZeRO 2/3) shards params/grads
DP_SHARD_DIVIDES_DP = Rule(
    "dp_shard_divides_dp",
    lambda dp_shard, dp: (dp_shard > 0) & (dp % np.maximum(dp_shard, 1) != 0),
    lambda dp_shard, dp: f"plan.dp_shard={dp_shard} does not divide plan.dp={dp}",
)
DP_SHARD_NEEDS_FSDP = Rule(
    "dp_shard_needs_fsdp",
    lambda dp_shard, dp, zero_stage: (dp_shard > 0) & (dp_shard != dp) & (zero_stage < 2),
    lambda dp_shard, zero_stage: (
        f"plan.dp_shard={dp_shard} requires plan.zero_stage >= 2 (zero_stage={zero_stage} shards no parameters or "
        "gradients; hybrid sharding is FSDP's)"
    ),
)
TP_DIVIDES_HEADS = Rule(
    "tp_divides_heads",
    lambda tp, model: model.num_heads % tp != 0,
    lambda tp, model: f"tp={tp} does not divide num_heads={model.num_heads}",
)
TP_DIVIDES_KV_HEADS = Rule(
    "tp_divides_kv_heads",
    lambda tp, model: model.num_kv_heads % tp != 0,
    lambda tp, model: f"tp={tp} does not divide num_kv_heads={model.num_kv_heads}",
)
TP_WITHIN_NODE = Rule(
    "tp_within_node",
    lambda tp, cluster, space: (tp > cluster.fast_domain) & space.tp_within_node,
    lambda tp, cluster: f"tp={tp} exceeds {_domain(cluster)} (space.tp_within_node=true)",
)
PP_WITHIN_LAYERS = Rule(
    "pp_within_layers",
    lambda pp, pp_split_embedding, pp_split_loss, model: pp > model.num_layers + pp_split_embedding + pp_split_loss,
    lambda pp, model: f"pp={pp} exceeds num_layers={model.num_layers}",
)
# with Megatron's embedding / loss pipeline-split accounting the embedding and the loss each fill one layer's slot
# (megatron/core/transformer/transformer_config.py: num_layers += 1 for each), so pp*vpp may reach L + 2
VPP_WITHIN_LAYERS = Rule(
    "vpp_within_layers",
    lambda pp, vpp, pp_split_embedding, pp_split_loss, model: (
        pp * vpp > model.num_layers + pp_split_embedding + pp_split_loss
    ),
    lambda pp, vpp, model: f"pp*vpp={pp}*{vpp}={pp * vpp} exceeds num_layers={model.num_layers}",
)
PP_DIVIDES_LAYERS = Rule(
    "pp_divides_layers",
    lambda pp, vpp, model, space: (model.num_layers % (pp * vpp) != 0) & (not space.allow_uneven_pp),
    lambda pp, vpp, model: (
        f"pp*vpp={pp * vpp} does not divide num_layers={model.num_layers} (space.allow_uneven_pp=false)"
    ),
)
CP_DIVIDES_SEQ = Rule(
    "cp_divides_seq",
    lambda cp, train: (cp > 1) & (train.seq_len % (2 * cp) != 0),
    lambda cp, train: f"seq_len={train.seq_len} is not divisible by 2*cp={2 * cp} (load-balanced causal chunks)",
)
# torch.distributed.pipelining: Schedule1F1B raises for n_microbatches < num_stages; Interleaved1F1B needs
# n_microbatches % pp == 0
PP_MICROBATCHES = Rule(
    "pp_microbatches",
    lambda pp_schedule, pp, grad_accum_steps: (
        (pp_schedule == SCHEDULE_CODE["1f1b"]) & (pp > 1) & (grad_accum_steps < pp)
    ),
    lambda grad_accum_steps, pp: (
        f"grad_accum_steps={grad_accum_steps} < pp={pp}: pp_schedule=1f1b needs at least pp micro-batches "
        "(gpipe runs it)"
    ),
)
INTERLEAVED_MICROBATCHES = Rule(
    "interleaved_microbatches",
    lambda pp_schedule, pp, grad_accum_steps: (
        (pp_schedule == SCHEDULE_CODE["interleaved_1f1b"]) & (grad_accum_steps % pp != 0)
    ),
    lambda grad_accum_steps, pp: (
        f"grad_accum_steps={grad_accum_steps} is not a multiple of pp={pp} "
        "(Interleaved1F1B needs n_microbatches % pp == 0)"
    ),
)
ZERO_NEEDS_DP = Rule(
    "zero_needs_dp",
    lambda zero_stage, dp, cp: (zero_stage > 0) & (dp * cp == 1),
    lambda zero_stage: f"zero_stage={zero_stage} shards nothing at dp*cp=1",
)
# CPU offload (docs/memory_model.md "CPU offload"): DeepSpeed's offload_optimizer is valid for ZeRO stages 1-3 and
# offload_param for stage 3 only (DeepSpeed docs, "ZeRO: offload_optimizer / offload_param"); FSDP2's
# CPUOffloadPolicy offloads the sharded parameters, which bench_model shards at rest in stage 3
OFFLOAD_OPTIMIZER_NEEDS_ZERO = Rule(
    "offload_optimizer_needs_zero",
    lambda offload, zero_stage: (offload == OFFLOAD_CODE["optimizer"]) & (zero_stage == 0),
    lambda zero_stage: (
        f"offload=optimizer requires zero_stage >= 1 (zero_stage={zero_stage}): the host optimizer updates a "
        "ZeRO shard (DeepSpeed offload_optimizer: ZeRO stages 1-3)"
    ),
)
OFFLOAD_PARAMS_NEEDS_ZERO3 = Rule(
    "offload_params_needs_zero3",
    lambda offload, zero_stage: (offload == OFFLOAD_CODE["params"]) & (zero_stage < 3),
    lambda zero_stage: (
        f"offload=params requires zero_stage=3 (zero_stage={zero_stage}): parameters are offloaded as "
        "FSDP shards (FSDP2 CPUOffloadPolicy, DeepSpeed offload_param: ZeRO-3 only)"
    ),
)
# the point of HSDP is to keep the per-block gathers on NVLink; a user who wants multi-node shard groups says so
DP_SHARD_WITHIN_NODE = Rule(
    "dp_shard_within_node",
    lambda dp_shard, cp, tp, cluster, space: (
        (dp_shard > 0) & (dp_shard * cp * tp > cluster.fast_domain) & space.dp_shard_within_node
    ),
    lambda dp_shard, cp, tp, cluster: (
        f"dp_shard*cp*tp={dp_shard}*{cp}*{tp}={dp_shard * cp * tp} exceeds {_domain(cluster)}: the HSDP shard "
        "group spans NVLink domains (space.dp_shard_within_node=true)"
        if cluster.nvlink_domain_size is not None
        else f"dp_shard*cp*tp={dp_shard}*{cp}*{tp}={dp_shard * cp * tp} exceeds gpus_per_node="
        f"{cluster.gpus_per_node}: the HSDP shard group spans nodes (space.dp_shard_within_node=true)"
    ),
)


def _recipe_without_peak(fp8: Any, cluster: ClusterSpec) -> np.ndarray:
    """Rows whose recipe's tensor-core peak (perf_terms.RECIPE_PEAK_FIELD) the preset does not have: FP8 on A100,
    MXFP8 / NVFP4 before Blackwell."""
    missing = [FP8_CODE[r] for r, f in RECIPE_PEAK_FIELD.items() if getattr(cluster, f) is None]
    return np.isin(fp8, missing)


FP8_NEEDS_PEAK = Rule(
    "fp8_needs_peak",
    _recipe_without_peak,
    lambda fp8, cluster: (
        f"fp8={fp8} needs {'FP8' if fp8 in ('tensorwise', 'rowwise') else fp8.upper()} tensor cores: cluster preset "
        f"{cluster.name} has {RECIPE_PEAK_FIELD[fp8]}=null"
    ),
)

# a plan that breaks one of these is no layout at all (whatever the model or the cluster)
WELL_FORMED: tuple[Rule, ...] = (
    DP_SHARD_DIVIDES_DP,
    DP_SHARD_NEEDS_FSDP,
    SP_NEEDS_TP,
    TP_OVERLAP_NEEDS_TP,
    TP_OVERLAP_NEEDS_SP,
    VPP_NEEDS_PP,
    PP_SPLIT_NEEDS_PP,
    RECOMPUTE_LAYERS_NEEDS_FULL,
    SCHEDULE_MATCHES_VPP,
    BATCH_DIVISIBLE,
    BATCH_PRODUCT,
)
# the generic table, in the order reasons are reported
RULES: tuple[Rule, ...] = (
    *WELL_FORMED,
    *MOE_RULES,
    TP_DIVIDES_HEADS,
    TP_DIVIDES_KV_HEADS,
    TP_WITHIN_NODE,
    PP_WITHIN_LAYERS,
    VPP_WITHIN_LAYERS,
    PP_DIVIDES_LAYERS,
    PP_LAYOUT_STAGES,
    PP_LAYOUT_NO_SPLIT,
    PP_SPLIT_DIVIDES,
    PP_SPLIT_NEEDS_MEGATRON,
    ACT_OFFLOAD_WITHIN_LAYERS,
    ACT_OFFLOAD_NO_PP,
    ACT_OFFLOAD_NO_RECOMPUTE,
    ACT_OFFLOAD_NEEDS_MEGATRON,
    MOE_RECOMPUTE_NEEDS_MOE,
    MOE_RECOMPUTE_NEEDS_SELECTIVE,
    MOE_RECOMPUTE_NEEDS_MEGATRON,
    MOE_OFFLOAD_NEEDS_MEGATRON,
    EP_OVERLAP_NEEDS_MEGATRON,
    TP_PP_DP_MAPPING_NEEDS_MEGATRON,
    MLA_RECOMPUTE_NEEDS_MLA,
    MLA_RECOMPUTE_NEEDS_SELECTIVE,
    MLA_RECOMPUTE_NEEDS_MEGATRON,
    NORM_RECOMPUTE_NEEDS_SEPARATE_NORM,
    NORM_RECOMPUTE_NEEDS_SELECTIVE,
    NORM_RECOMPUTE_NEEDS_MEGATRON,
    MLP_RECOMPUTE_NEEDS_DENSE_LAYER,
    MLP_RECOMPUTE_NEEDS_SELECTIVE,
    MLP_RECOMPUTE_NEEDS_MEGATRON,
    *RECOMPUTE_LAYERS_RULES,
    CP_DIVIDES_SEQ,
    PP_MICROBATCHES,
    INTERLEAVED_MICROBATCHES,
    ZERO_NEEDS_DP,
    OFFLOAD_OPTIMIZER_NEEDS_ZERO,
    OFFLOAD_PARAMS_NEEDS_ZERO3,
    DP_SHARD_WITHIN_NODE,
    FP8_NEEDS_PEAK,
    TP_OVERLAP_NEEDS_COMPILE,
)
_NO_SPACE = SpaceSpec()  # check_plan without a search space: its switches at their defaults


def job_rules(train: TrainSpec) -> tuple[Rule, ...]:
    """The table for `train.framework`: the generic rules its profile keeps, then the profile's own."""
    prof = get_profile(train.framework)
    return (*(r for r in RULES if r.id not in prof.replaces_rules), *prof.rules())


def rejections(
    arr: dict[str, np.ndarray],
    model: ModelSpec | None,
    train: TrainSpec,
    cluster: ClusterSpec | None,
    space: Any = None,
    rules: Iterable[Rule] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Two object arrays: the first failed rule's id and its reason per candidate, None when every rule holds.
    `rules`: the table to evaluate (default: `job_rules(train)`)."""
    n = len(arr["dp"])
    context = {"model": model, "train": train, "cluster": cluster, "space": _NO_SPACE if space is None else space}
    ids, out = np.full(n, None, dtype=object), np.full(n, None, dtype=object)
    open_ = np.ones(n, dtype=bool)
    for rule in job_rules(train) if rules is None else rules:
        mask = rule.violated(
            **{c: arr[c] for c in rule.columns}, **{k: context[k] for k in rule.context(rule.violated)}
        )
        hit = np.broadcast_to(mask, (n,)) & open_
        if not hit.any():
            continue
        idx = np.flatnonzero(hit)
        cols = rule.message_columns
        fixed = {k: context[k] for k in rule.context(rule.message)}
        keys = np.stack([arr[c][idx] for c in cols], axis=1) if cols else np.zeros((len(idx), 1), np.int64)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        texts = [rule.prefix + rule.message(**plan_cells(cols, row), **fixed) for row in uniq]
        out[idx] = np.array(texts, dtype=object)[np.asarray(inverse).reshape(-1)]
        ids[idx] = rule.id
        open_ &= ~hit
    return ids, out


def reject_reasons(
    arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, space=None
) -> np.ndarray:
    """Object array: the first failed rule's reason per candidate, or None when every rule holds."""
    return rejections(arr, model, train, cluster, space)[1]


def check_plan(plan: ParallelPlan, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, space=None) -> str | None:
    """The reason `plan` cannot run (first failed rule), or None."""
    return reject_reasons(arrays_from_plans([plan]), model, train, cluster, space)[0]


def require_well_formed(plan: ParallelPlan, train: TrainSpec) -> None:
    """SpecError with the first `WELL_FORMED` rule `plan` breaks (batch product included): what the exporters and the
    bench trainer refuse before they act on a plan."""
    reason = rejections(arrays_from_plans([plan]), None, train, None, None, WELL_FORMED)[1][0]
    if reason is not None:
        raise SpecError(reason)

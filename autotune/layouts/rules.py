"""Rules a parallel layout must satisfy before it can run, each with a human reason naming values and rule.

One vectorised implementation (`rejections`) over plan arrays; `check_plan` is the scalar wrapper. Rules are
checked in order and a candidate keeps the first reason it fails, with that rule's stable id (`tp_divides_heads`,
`pp_microbatches`, ...: the `reject_rule` column; code tests the id, never the message). Reasons are formatted once
per distinct value combination (a few dozen), not once per candidate.
"""

from __future__ import annotations

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import CODES, FP8_CODE, SCHEDULE_CODE, arrays_from_plans
from autotune.core.types import FP8_RECIPES, ClusterSpec, ParallelPlan, TrainSpec
from autotune.predict.frameworks import get_profile

MEMORY_RULE = (
    "memory"  # the planner's own rejection: the layout's estimated peak does not fit (autotune.layouts.planner)
)
HOST_MEMORY_RULE = "host_memory"  # the offloaded states do not fit in cluster.host_memory_bytes_per_gpu (planner)
OFFLOAD_CODE: dict[str, int] = CODES["offload"]


def _rules(arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, space) -> list:
    """(rule id, failing mask, message template, columns the message uses), in the order reasons are reported."""
    dp, tp, pp, cp, vpp, z = arr["dp"], arr["tp"], arr["pp"], arr["cp"], arr["vpp"], arr["zero_stage"]
    mbs, m, sched = arr["micro_batch_size"], arr["grad_accum_steps"], arr["pp_schedule"]
    gbs, L, S = train.global_batch_size, model.num_layers, train.seq_len
    tp_within_node = getattr(space, "tp_within_node", True)
    allow_uneven = getattr(space, "allow_uneven_pp", True)
    inter = sched == SCHEDULE_CODE["interleaved_1f1b"]
    off = arr["offload"]
    ds = arr["dp_shard"] if "dp_shard" in arr else np.zeros_like(dp)  # 0 = all of dp (plain FSDP)
    ds_within_node = getattr(space, "dp_shard_within_node", True)
    return [
        (
            "batch_divisible",
            gbs % (dp * mbs) != 0,
            lambda dp, micro_batch_size: (
                f"train.global_batch_size={gbs} is not divisible by dp*micro_batch_size="
                f"{dp}*{micro_batch_size}={dp * micro_batch_size}"
            ),
            ("dp", "micro_batch_size"),
        ),
        (
            "batch_product",
            dp * mbs * m != gbs,
            lambda dp, micro_batch_size, grad_accum_steps: (
                f"dp*micro_batch_size*grad_accum_steps={dp}*{micro_batch_size}"
                f"*{grad_accum_steps}={dp * micro_batch_size * grad_accum_steps} != train.global_batch_size={gbs}"
            ),
            ("dp", "micro_batch_size", "grad_accum_steps"),
        ),
        (
            "tp_divides_heads",
            model.num_heads % tp != 0,
            lambda tp: f"tp={tp} does not divide num_heads={model.num_heads}",
            ("tp",),
        ),
        (
            "tp_divides_kv_heads",
            model.num_kv_heads % tp != 0,
            lambda tp: f"tp={tp} does not divide num_kv_heads={model.num_kv_heads}",
            ("tp",),
        ),
        (
            "tp_within_node",
            (tp > cluster.gpus_per_node) & tp_within_node,
            lambda tp: f"tp={tp} exceeds gpus_per_node={cluster.gpus_per_node} (space.tp_within_node=true)",
            ("tp",),
        ),
        ("pp_within_layers", pp > L, lambda pp: f"pp={pp} exceeds num_layers={L}", ("pp",)),
        (
            "vpp_within_layers",
            pp * vpp > L,
            lambda pp, vpp: f"pp*vpp={pp}*{vpp}={pp * vpp} exceeds num_layers={L}",
            ("pp", "vpp"),
        ),
        (
            "pp_divides_layers",
            (L % (pp * vpp) != 0) & (not allow_uneven),
            lambda pp, vpp: f"pp*vpp={pp * vpp} does not divide num_layers={L} (space.allow_uneven_pp=false)",
            ("pp", "vpp"),
        ),
        (
            "cp_divides_seq",
            (cp > 1) & (S % (2 * cp) != 0),
            lambda cp: f"seq_len={S} is not divisible by 2*cp={2 * cp} (load-balanced causal chunks)",
            ("cp",),
        ),
        (
            "pp_microbatches",
            (sched == SCHEDULE_CODE["1f1b"]) & (pp > 1) & (m < pp),
            lambda grad_accum_steps, pp: (
                f"grad_accum_steps={grad_accum_steps} < pp={pp}: pp_schedule=1f1b needs at "
                f"least pp micro-batches (gpipe runs it)"
            ),
            ("grad_accum_steps", "pp"),
        ),
        (
            "interleaved_microbatches",
            inter & (m % pp != 0),
            lambda grad_accum_steps, pp: (
                f"grad_accum_steps={grad_accum_steps} is not a multiple of pp={pp} "
                f"(Interleaved1F1B needs n_microbatches % pp == 0)"
            ),
            ("grad_accum_steps", "pp"),
        ),
        (
            "zero_needs_dp",
            (z > 0) & (dp * cp == 1),
            lambda zero_stage: f"zero_stage={zero_stage} shards nothing at dp*cp=1",
            ("zero_stage",),
        ),
        # CPU offload (docs/memory_model.md "CPU offload"): DeepSpeed's offload_optimizer is valid for ZeRO stages
        # 1-3 and offload_param for stage 3 only (DeepSpeed docs, "ZeRO: offload_optimizer / offload_param");
        # FSDP2's CPUOffloadPolicy offloads the sharded parameters, which bench_model shards at rest in stage 3
        (
            "offload_optimizer_needs_zero",
            (off == OFFLOAD_CODE["optimizer"]) & (z == 0),
            lambda zero_stage: (
                f"offload=optimizer requires zero_stage >= 1 (zero_stage={zero_stage}): the host optimizer updates a "
                "ZeRO shard (DeepSpeed offload_optimizer: ZeRO stages 1-3)"
            ),
            ("zero_stage",),
        ),
        (
            "offload_params_needs_zero3",
            (off == OFFLOAD_CODE["params"]) & (z < 3),
            lambda zero_stage: (
                f"offload=params requires zero_stage=3 (zero_stage={zero_stage}): parameters are offloaded as "
                "FSDP shards (FSDP2 CPUOffloadPolicy, DeepSpeed offload_param: ZeRO-3 only)"
            ),
            ("zero_stage",),
        ),
        (
            "dp_shard_divides_dp",
            (ds > 0) & (dp % np.maximum(ds, 1) != 0),
            lambda dp_shard, dp: f"dp_shard={dp_shard} does not divide dp={dp}",
            ("dp_shard", "dp"),
        ),
        (
            "dp_shard_needs_fsdp",
            (ds > 0) & (ds != dp) & (z < 2),
            lambda dp_shard, zero_stage: (
                f"dp_shard={dp_shard} requires zero_stage >= 2 (zero_stage={zero_stage} shards no parameters or "
                "gradients; hybrid sharding is FSDP's)"
            ),
            ("dp_shard", "zero_stage"),
        ),
        (
            "dp_shard_within_node",
            (ds > 0) & (ds * cp * tp > cluster.gpus_per_node) & ds_within_node,
            lambda dp_shard, cp, tp: (
                f"dp_shard*cp*tp={dp_shard}*{cp}*{tp}={dp_shard * cp * tp} exceeds gpus_per_node="
                f"{cluster.gpus_per_node}: the HSDP shard group spans nodes (space.dp_shard_within_node=true)"
            ),
            ("dp_shard", "cp", "tp"),
        ),
        (
            "fp8_needs_peak",
            (arr["fp8"] != FP8_CODE["none"]) & (cluster.peak_flops_fp8 is None),
            lambda fp8: (
                f"fp8={FP8_RECIPES[fp8]} needs FP8 tensor cores: cluster preset {cluster.name} has peak_flops_fp8=null"
            ),
            ("fp8",),
        ),
    ]


def rejections(
    arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, space=None
) -> tuple[np.ndarray, np.ndarray]:
    """Two object arrays: the first failed rule's id and its reason per candidate, None when every rule holds."""
    n = len(arr["dp"])
    rules, out = np.full(n, None, dtype=object), np.full(n, None, dtype=object)
    open_ = np.ones(n, dtype=bool)
    # the framework profile (train.framework) replaces the generic rules that are a framework's limits and adds its own
    prof = get_profile(train.framework)
    generic = [r for r in _rules(arr, model, train, cluster, space) if r[0] not in prof.replaces_rules]
    for rule, mask, template, cols in generic + prof.rules(arr, model, train, cluster):
        hit = np.broadcast_to(mask, (n,)) & open_
        if not hit.any():
            continue
        idx = np.flatnonzero(hit)
        keys = np.stack([arr[c][idx] for c in cols], axis=1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        texts = np.array([template(**{c: int(v) for c, v in zip(cols, row)}) for row in uniq], dtype=object)
        out[idx] = texts[np.asarray(inverse).reshape(-1)]
        rules[idx] = rule
        open_ &= ~hit
    return rules, out


def reject_reasons(
    arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, space=None
) -> np.ndarray:
    """Object array: the first failed rule's reason per candidate, or None when every rule holds."""
    return rejections(arr, model, train, cluster, space)[1]


def check_plan(plan: ParallelPlan, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, space=None) -> str | None:
    """The reason `plan` cannot run (first failed rule), or None."""
    return reject_reasons(arrays_from_plans([plan]), model, train, cluster, space)[0]

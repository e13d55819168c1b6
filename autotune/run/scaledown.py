"""Scale-down trials (docs/scale_down.md): run a layout of N GPUs as a replica on the A < N GPUs available and compose
its full-size row.

What a rank does per micro-batch depends on tp, cp, ep, etp, the micro-batch, the sequence, recompute, fp8, compile and
the layers its pipeline stage holds, not on dp, and on pp only through those layers and the schedule. The replica
keeps those per-rank shapes and shrinks what only replicates:
- pp -> 1 stage holding the busiest pipeline rank's layer count (autotune/predict/schedule.py `layers_on_rank`); the
  schedule (bubble, vpp, micro-batches) and the p2p transfers are composed analytically (autotune/predict/compose.py);
- dp -> the largest power-of-two part of dp that the ranks left by tp*cp hold (at least what an expert-parallel group
  needs), the ZeRO stage kept when that is > 1 rank (stage 0 on one rank); ZeRO/FSDP traffic is priced at full dp;
- tp, cp, ep, etp kept whole when they fit in A (their communication is then measured); a tp or ep group larger than
  A keeps its largest power-of-two part that fits, and the missing peers' collectives are priced; a shrunk ep group
  holds the target ranks' own experts, not all of them (`local_experts_model`);
- micro-batches -> min(m, MAX_REPLICA_MICROBATCHES): enough to amortise the optimizer step, the model apportions it.
The launcher sees an ordinary (smaller) TrialSpec, so every backend runs a replica like any trial.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from autotune.core.errors import SpecError
from autotune.core.trial import TrialSpec
from autotune.predict.schedule import layers_on_rank
from autotune.results.schema import normalize_row, row_from_spec

MAX_REPLICA_MICROBATCHES = 4
# the measured columns a composed row takes from the replica unchanged (per-rank facts, or the trial's own cost)
_FROM_REPLICA = ("losses", "final_loss", "started_at", "ended_at", "wall_s", "gpu_seconds", "code_version")
_FROM_REPLICA += ("torch_version", "hostname", "log_path", "timed_steps", "error_type", "error_message", "status")


_ENDS_COLUMNS = ("embed_cpu_time_mean_s", "head_cpu_time_mean_s", "ends_comm_thread_cpu_time_mean_s")
_ENDS_COLUMNS += ("ends_host_cpu_time_s",)


@dataclass(frozen=True)
class ScaleDown:
    """The target trial and the replica that stands in for it."""

    target: TrialSpec
    replica: TrialSpec
    available_gpus: int


def _fit(degree: int, room: int) -> int:
    """The largest power-of-two divisor of `degree` that is <= room (degree itself when it fits)."""
    d = degree
    while d > 1 and (d > room or degree % d):
        d //= 2
    return max(d, 1)


def local_experts_model(model: Any, target_ep: int, replica_ep: int) -> Any:
    """The model a shrunk expert-parallel group's replica runs: its ep ranks hold the target ranks' own experts,
    E x replica_ep / target_ep of them (E / target_ep per rank, as on the target), instead of all E spread over fewer
    ranks. Each local expert then receives the target's rows per grouped GEMM (T k replica_ep / E' = T k target_ep / E
    under even routing) and each rank holds the target's expert weights, gradients and optimizer state, so the
    expert GEMMs' shapes, count and memory are the target rank's; the tokens' all-to-alls to the missing peers are
    priced (compose.py). Where top-k exceeds the local experts (E / target_ep < k, e.g. DeepSeek-V3 at EP 64) a token
    cannot pick k distinct ones: k drops to E' and each expert gets k' / k of the target's rows (the step model's
    gemm_efficiency and copies carry the difference). Group-limited routing (moe_router_num_groups) only chooses
    which experts, never how many rows: kept where its groups still divide E' and offer k experts, dropped otherwise."""
    experts = model.num_experts * replica_ep // target_ep
    groups, group_topk, k = (
        model.moe_router_num_groups,
        model.moe_router_group_topk,
        min(model.moe_router_topk, experts),
    )
    if groups and (groups > experts or experts % groups or group_topk * (experts // groups) < k):
        groups, group_topk = 0, 0
    return dataclasses.replace(
        model,
        num_experts=experts,
        moe_router_topk=k,
        moe_router_num_groups=groups,
        moe_router_group_topk=group_topk,
    )


def replica_spec(target: TrialSpec, available_gpus: int, max_microbatches: int = MAX_REPLICA_MICROBATCHES) -> ScaleDown:
    """The replica TrialSpec of `target` on `available_gpus` ranks (module docstring); same trial id and sweep."""
    p, model = target.plan, target.model
    if p.cp > available_gpus:
        raise SpecError(
            f"plan.cp={p.cp} exceeds --available-gpus={available_gpus}: a context-parallel group sets each rank's "
            "sequence shard and must run whole"
        )
    tp = _fit(p.tp, available_gpus // p.cp)
    inner = tp * p.cp  # ranks of one (tp, cp) group
    ep, etp = 1, 1
    if model.is_moe:
        etp = _fit(p.etp, available_gpus)
        ep = _fit(p.ep, available_gpus // etp)
        while ep > 1 and math.lcm(inner, ep * etp) > available_gpus:
            ep //= 2
    # dp: the fewest ranks the expert group folded over (dp, cp, tp) needs (Megatron-Core folding: ep*etp divides the
    # stage's dp*cp*tp ranks), raised to the largest power-of-two part of the target's dp that the GPUs left hold: a
    # replica with dp > 1 runs the trainer's data-parallel wrapper (FSDP2 per block, its hooks and per-block
    # collectives), which a one-rank replica skips entirely (docs/scale_down.md "Accuracy": measured at dp 2 it
    # carries most of a dp-8 rank's extra CPU)
    dp = math.lcm(inner, ep * etp) // inner
    wide = _fit(p.dp, available_gpus // inner)
    if wide > dp and wide % dp == 0:
        dp = wide
    m = min(p.grad_accum_steps, max_microbatches)
    layers = int(layers_on_rank(model.num_layers, p.pp, p.vpp))
    rmodel = dataclasses.replace(
        model, num_layers=layers, moe_first_k_dense=min(getattr(model, "moe_first_k_dense", 0), max(layers - 1, 0))
    )
    if model.is_moe and ep < p.ep:
        rmodel = local_experts_model(rmodel, p.ep, ep)
    plan = dataclasses.replace(
        p,
        dp=dp,
        tp=tp,
        pp=1,
        vpp=1,
        grad_accum_steps=m,
        pp_schedule="1f1b",
        dp_shard=0,
        ep=ep,
        etp=etp,
        tp_overlap=p.tp_overlap and tp > 1,
        sequence_parallel=p.sequence_parallel and tp > 1,
        # one rank per (tp, cp) group shards nothing: run it unsharded, the target's ZeRO traffic and optimizer shard
        # are priced at full scale (compose.py)
        zero_stage=p.zero_stage if dp * p.cp > 1 else 0,
        offload=p.offload if dp * p.cp > 1 else "none",
    )
    train = dataclasses.replace(target.train, global_batch_size=dp * p.micro_batch_size * m)
    replica = dataclasses.replace(target, model=rmodel, train=train, plan=plan)
    return ScaleDown(target=target, replica=replica, available_gpus=available_gpus)


def measured_step_s(replica_row: dict[str, Any], device_type: str) -> float | None:
    """The replica's per-rank step: wall seconds on GPUs; on CPU ranks the busiest rank's CPU seconds (process_time),
    which do not grow when other processes share the cores (docs/scale_down.md "Fair on a shared CPU")."""
    if device_type == "cpu" and replica_row.get("step_cpu_time_mean_s"):
        return float(replica_row["step_cpu_time_mean_s"])
    t = replica_row.get("step_time_mean_s")
    return None if t is None else float(t)


def measured_optimizer_s(replica_row: dict[str, Any], device_type: str) -> float | None:
    """The replica's optimizer step within `measured_step_s`: on CPU ranks the busiest rank's CPU seconds in it
    (bench_model/trainer.py); None on GPUs (the trainer times no device-synchronised optimizer step) and on rows
    written before the column existed."""
    t = replica_row.get("optimizer_cpu_time_mean_s")
    return float(t) if device_type == "cpu" and t else None


def measured_dp_comm_s(replica_row: dict[str, Any], device_type: str) -> float | None:
    """The replica's sharded data-parallel collectives within `measured_step_s` (CPU ranks: FSDP2's all-gathers and
    reduce-scatters, bench_model/parallel/comm_timing.py); None on GPUs and on rows written before the column."""
    t = replica_row.get("dp_comm_cpu_time_mean_s")
    return float(t) if device_type == "cpu" and t else None


def measured_host_s(replica_row: dict[str, Any], device_type: str) -> float | None:
    """The replica's host (dispatch) seconds per step within `measured_step_s` (CPU ranks: operations counted x
    measured seconds per operation, bench_model/host_cost.py); None on GPUs and on rows written before the column.
    The tensor-parallel collectives' count and tight-loop cost (comm_ops_per_step, comm_op_cpu_s) are recorded but
    not composed (docs/scale_down.md "The composition")."""
    t = replica_row.get("host_cpu_time_s")
    return float(t) if device_type == "cpu" and t else None


def measured_tp_comm_s(replica: TrialSpec, replica_row: dict[str, Any], device_type: str) -> float | None:
    """The replica's tensor-parallel collectives' CPU seconds per step: its CPU on threads other than the training
    thread (`comm_thread_cpu_time_mean_s`: gloo's collective threads, one intra-op thread per rank), taken as tp's
    only when the replica runs no other collective (tp > 1, dp = cp = ep = 1); None otherwise and on GPUs."""
    p, t = replica.plan, replica_row.get("comm_thread_cpu_time_mean_s")
    if device_type != "cpu" or not t or p.tp == 1 or (p.dp, p.cp, p.ep) != (1, 1, 1):
        return None
    return float(t)


def measured_parts(replica: TrialSpec, replica_row: dict[str, Any], device_type: str) -> tuple:
    """The replica's measured parts compose_step takes after its step and layouts: (optimizer, data-parallel
    communication, host, TP communication) seconds, each None where the row has no measurement of it."""
    return (
        measured_optimizer_s(replica_row, device_type),
        measured_dp_comm_s(replica_row, device_type),
        measured_host_s(replica_row, device_type),
        measured_tp_comm_s(replica, replica_row, device_type),
    )


def measured_ends(replica_row: dict[str, Any], device_type: str):
    """The replica's model ends measured apart (CPU ranks: the embedding's and the head + loss's CPU seconds per step,
    bench_model/ends_timing.py) as compose.Ends; None on GPUs and on rows written before the columns."""
    from autotune.predict.compose import Ends

    e, h = replica_row.get("embed_cpu_time_mean_s"), replica_row.get("head_cpu_time_mean_s")
    if device_type != "cpu" or e is None or h is None:
        return None
    comm, host = replica_row.get("ends_comm_thread_cpu_time_mean_s"), replica_row.get("ends_host_cpu_time_s")
    return Ends(float(e), float(h), float(comm or 0.0), float(host or 0.0))


def compose_row(sd: ScaleDown, replica_row: dict[str, Any]) -> dict[str, Any]:
    """The target's row from its replica's: the target's identity and layout, the composed speed (when the replica
    ran), the replica's cost and outcome, and the scale-down columns (autotune/results/schema.py SCALE_DOWN_FIELDS)."""
    from autotune.predict.compose import compose_step, preset_cpu_clusters

    t, r = sd.target, sd.replica
    row = row_from_spec(t)
    row.update({k: replica_row.get(k) for k in _FROM_REPLICA})
    rp = r.plan
    steps = t.warmup_steps + (replica_row.get("timed_steps") or t.timed_steps)
    row.update(
        scaled_from=t.candidate_id,
        replica_num_gpus=rp.world_size,
        replica_dp=rp.dp,
        replica_tp=rp.tp,
        replica_pp=rp.pp,
        replica_cp=rp.cp,
        replica_ep=rp.ep,
        replica_etp=rp.etp,
        replica_num_layers=r.model.num_layers,
        replica_grad_accum_steps=rp.grad_accum_steps,
        peak_mem_allocated_bytes=None,  # the replica's memory is not the target's: probe-memory gives that
        peak_mem_reserved_bytes=None,
    )
    if replica_row.get("status") == "oom" and _replica_holds_more(t, r):
        # the replica kept states the target shards over dp (ZeRO / offload): its OOM says nothing of the target's
        # memory, so it must not feed OOM dominance (autotune/search/oom_pruning.py) as the target's
        row.update(
            status="crash",
            error_type="ReplicaOutOfMemory",
            error_message=f"the replica (dp={r.plan.dp}, zero_stage={r.plan.zero_stage}, offload={r.plan.offload}) ran "
            f"out of memory; the target (dp={t.plan.dp}, zero_stage={t.plan.zero_stage}, offload={t.plan.offload}) "
            "may fit: check it "
            "with `autotune probe-memory` (docs/scale_down.md)",
        )
    measured = measured_step_s(replica_row, t.cluster.device_type)
    if replica_row.get("status") != "ok" or measured is None:
        return normalize_row(row)
    t_opt, t_dp, host, tp_comm = measured_parts(r, replica_row, t.cluster.device_type)
    ends = measured_ends(replica_row, t.cluster.device_type)
    cluster, fsdp = t.cluster, None
    if t.cluster.device_type == "cpu":  # the replica's step is CPU seconds: price in CPU seconds when the preset can
        cpu, fsdp = preset_cpu_clusters(t.cluster, t.plan.tp)
        cluster = cpu or cluster
    args = (measured, (t.plan, t.model, t.train), (rp, r.model, r.train), cluster, t_opt, t_dp, host, tp_comm)
    c = compose_step(*args, fsdp_cluster=fsdp, ends=ends)
    tokens_per_s = t.train.global_batch_tokens / c.step_s
    world = t.plan.world_size
    peak = _peak_flops(replica_row, t)
    flops = t.model.flops_per_token(t.train.seq_len) * tokens_per_s / world
    row.update(
        replica_step_time_s=measured,
        step_time_mean_s=c.step_s,
        step_cpu_time_mean_s=replica_row.get("step_cpu_time_mean_s"),
        optimizer_cpu_time_mean_s=replica_row.get("optimizer_cpu_time_mean_s"),
        dp_comm_cpu_time_mean_s=replica_row.get("dp_comm_cpu_time_mean_s"),
        comm_thread_cpu_time_mean_s=replica_row.get("comm_thread_cpu_time_mean_s"),
        host_ops_per_step=replica_row.get("host_ops_per_step"),
        host_cpu_time_s=replica_row.get("host_cpu_time_s"),
        comm_ops_per_step=replica_row.get("comm_ops_per_step"),
        comm_op_cpu_s=replica_row.get("comm_op_cpu_s"),
        **{k: replica_row.get(k) for k in _ENDS_COLUMNS},
        step_time_std_s=None,
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=tokens_per_s / world,
        tflops_per_gpu=flops / 1e12,
        mfu=flops / peak,
        measured_parts=",".join(c.measured_parts),
        modelled_parts=",".join(c.modelled_parts),
        full_size_gpu_seconds=world * (float(replica_row.get("wall_s") or 0.0) + steps * max(c.step_s - measured, 0.0)),
    )
    return normalize_row(row)


def mean_replica_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One replica row from repeated runs of the same replica: each measured number the composition reads (step,
    optimizer, collectives, host, ends: CPU seconds per step) averaged over the runs that are ok, the rest from the
    first; a robust pick re-runs the finalists' replicas and composes from this (docs/scale_down.md "Best pick")."""
    ok = [r for r in rows if r.get("status") == "ok"]
    if len(ok) < 2:
        return dict(ok[0] if ok else rows[0])
    out = dict(ok[0])
    for k, v in ok[0].items():
        if k.endswith(("_mean_s", "_cpu_s", "_time_s")) and isinstance(v, float):
            vals = [r.get(k) for r in ok]
            if all(isinstance(x, (int, float)) for x in vals):
                out[k] = sum(vals) / len(vals)
    return out


def _replica_holds_more(target: TrialSpec, replica: TrialSpec) -> bool:
    """Whether the replica keeps per-rank state the target shards or offloads (ZeRO >= 1 or offload dropped because the
    replica's dp group is one rank). Otherwise it holds the target's per-rank shapes or fewer layers of them, so its
    OOM is the target's."""
    p, rp = target.plan, replica.plan
    return (p.zero_stage, p.offload) != (rp.zero_stage, rp.offload) or (
        rp.dp * rp.cp < p.dp * p.cp and p.zero_stage > 0
    )


def _peak_flops(replica_row: dict[str, Any], target: TrialSpec) -> float:
    """The per-rank peak the replica's MFU used (CPU ranks measure theirs: bench_model/metrics.py), else the preset's."""
    tf, mfu = replica_row.get("tflops_per_gpu"), replica_row.get("mfu")
    if tf and mfu:
        return float(tf) * 1e12 / float(mfu)
    return target.cluster.peak_flops(target.train.compute_dtype)

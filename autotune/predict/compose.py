"""Composing a full-size step from a scale-down trial (docs/scale_down.md).

A replica runs the target layout's per-rank shapes on fewer ranks: one pipeline stage (the busiest stage's layer
count, pp = vpp = 1), as much of the data-parallel group as the ranks left hold, and the tp / cp / ep groups whole
when they fit. Its measured
step T_r is mapped onto the target with the step-time model's own terms (autotune/predict/perf.py `perf_arrays`, no
second derivation):

    k        = T_r / R.step                 measured / modelled on the replica (R = perf_arrays of the replica)
    stage_mb = k * (F.compute + [F.tp] + [F.cp] + [F.ep]) / m    [axis] measured when its group ran whole
               + (F.tp + ...) / m for each axis whose group was shrunk (priced by alpha-beta, not measured)
    step     = (m + bubble_microbatches(pp, vpp)) * stage_mb     (schedule.py: Narayanan et al. 2021 Eq. 1)
               + k * F.optimizer + F.dp_comm + F.pp_comm         (ZeRO/FSDP and p2p priced at full scale;
                                                                  k * F.dp_comm when the replica ran the whole dp group)

When the replica reports its optimizer step's own seconds T_o (CPU ranks: the trainer's `optimizer_cpu_time_mean_s`),
the optimizer is composed from it by the model's optimizer ratio and k from the rest:

    k   = (T_r - T_o) / (R.step - R.optimizer),   optimizer = T_o * F.optimizer / R.optimizer

so a per-step cost the model apportions wrongly against the compute (measured: bench_model's AdamW on one-thread CPU
ranks is 12-25% of the tiny model's step where the model says 1-3%) is not scaled with the micro-batch count.
When it also reports the seconds T_d of its sharded data-parallel collectives (CPU ranks: `dp_comm_cpu_time_mean_s`,
FSDP2's all-gathers and reduce-scatters, bench_model/parallel/comm_timing.py) and H of its host dispatch
(`host_cpu_time_s`, bench_model/host_cost.py), they leave k too:

    k   = (T_r - T_o - T_d - H - C) / (R.step - R.optimizer - R.dp_comm - R.tp),
    dp  = T_d * F'.dp_comm / R.dp_comm + (F.dp_comm - F'.dp_comm)    (F': the target at the replica's dp; _dp_seconds)
    stage_mb += H / m_r + (C / m_r) * (F.tp / m) / (R.tp / m_r)

with C the tensor-parallel collectives' CPU measured in situ (the replica's CPU on its collective threads, when it
runs no other collective: dp = cp = ep = 1), and H / m_r because the same code on the same layers dispatches the same
operations at any tp. Taking T_d out of k and carrying it by F'.dp_comm / R.dp_comm means a replica that
reduce-scatters every micro-batch (pp = 1) does not carry that into a pipelined target that reduce-scatters once per
step (`base.fsdp_pipeline_held`), and the wider group adds only its extra ring steps and bytes to each collective,
not a ring-step multiple of the replica's per-call cost; taking H out means dispatch does not shrink with the FLOPs.

E, the replica's embedding and head + loss timed apart (CPU ranks: bench_model/ends_timing.py), leaves k with the
model's own ends term (perf.py `ends_compute_s`); the target's busiest stage gets both (pp = 1) or the heavier one
(pp > 1: rank 0 holds the embedding, rank pp-1 the head), where k would have given a pipelined stage both:

    k   = (... - E) / (... - R.ends),   stage_mb = k (F.compute - F.ends) / m + ... + E_target / m_r

A ZeRO-2/3 target whose replica holds no data-parallel rank (a tp-2 replica on 2 ranks) measures no T_d; its FSDP2
traffic is then F.dp_comm priced with `fsdp_cluster` when one is given: the links netbench fitted to collectives that
FSDP2 itself issued (autotune/fitting/netbench_fsdp.py, `fsdp_cpu_cluster`), the model's count, ring steps and bytes.

F = perf_arrays of the target. k carries what the model gets wrong about this hardware and these shapes (the
measurement); F / R carries only what differs between the replica and the target's busiest stage (the embedding on
the first stage or the head on the last one, a shrunk group's per-rank share). When the replica IS the target
(pp = 1, nothing shrunk) the composed step equals the measured one exactly.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.predict.perf import ends_compute_s, perf_arrays
from autotune.predict.schedule import bubble_microbatches

# the collective terms of one micro-batch's stage time, by the plan axis whose group carries them
AXIS_TERMS = {"tp": "tp_comm_s", "cp": "cp_comm_s", "ep": "ep_comm_s"}


@dataclass(frozen=True)
class Composed:
    """A composed full-size step: seconds per step and its parts, and which parts were measured vs modelled."""

    step_s: float
    stage_microbatch_s: float  # the busiest stage's time per micro-batch (measured part scaled + priced part)
    bubble_s: float
    dp_comm_s: float
    pp_comm_s: float
    optimizer_s: float
    measured_scale: float  # k = measured / modelled step of the replica
    measured_parts: tuple[str, ...]
    modelled_parts: tuple[str, ...]


def _terms(plan: ParallelPlan, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec) -> dict[str, float]:
    arr = arrays_from_plans([plan])
    out = {k: float(v[0]) for k, v in perf_arrays(arr, model, train, cluster).items()}
    return {**out, "ends_compute_s": float(ends_compute_s(arr, model, train, cluster)[0])}


# the parts a replica may measure apart (CPU ranks), each with the step-model term it stands for (None: no term)
APART_TERMS = (("optimizer", "optimizer_s"), ("dp", "dp_comm_s"), ("host", None), ("tp", "tp_comm_s"))
APART_TERMS += (("ends", "ends_compute_s"),)


@dataclass(frozen=True)
class Ends:
    """The replica's model ends measured apart (CPU ranks, bench_model/ends_timing.py), CPU seconds per step: the
    embedding's and the head + loss's (all threads), and of both their collectives' threads and host dispatch."""

    embed_s: float
    head_s: float
    comm_thread_s: float
    host_s: float

    @property
    def total_s(self) -> float:
        return self.embed_s + self.head_s


def _take_apart(measured_step_s: float, rep: dict, full: dict, parts: dict) -> tuple[float, dict[str, float]]:
    """k from the replica's step less the parts it measured apart (and their terms from the model's step), and the
    parts taken; a part that does not fit inside what is left, or whose term the model does not have, stays in k."""
    meas, model, taken = measured_step_s, rep["step_s"], {}
    for name, term in APART_TERMS:
        t = parts.get(name)
        if t is None or not 0.0 < t < meas:
            continue
        if (term is not None and not 0.0 < rep[term] < model) or (name == "tp" and full["tp_comm_s"] == 0.0):
            continue
        meas, model, taken[name] = meas - t, model - (rep[term] if term else 0.0), t
    return meas / model, taken


def compose_step(
    measured_step_s: float,
    target: tuple[ParallelPlan, ModelSpec, TrainSpec],
    replica: tuple[ParallelPlan, ModelSpec, TrainSpec],
    cluster: ClusterSpec,
    measured_optimizer_s: float | None = None,
    measured_dp_comm_s: float | None = None,
    measured_host_s: float | None = None,
    measured_tp_comm_s: float | None = None,
    fsdp_cluster: ClusterSpec | None = None,
    ends: Ends | None = None,
    ep_cluster: ClusterSpec | None = None,
) -> Composed:
    """The target's step time composed from the replica's measured step, and of it the parts the replica measured
    apart: optimizer step, data-parallel collectives, host dispatch, tp collectives (module docstring).
    `fsdp_cluster`: links fitted to FSDP2-issued collectives (netbench `fsdp_cpu_cluster`), which price a ZeRO-2/3
    target's FSDP2 traffic when the replica holds no data-parallel rank to measure it on (module docstring).
    `ends`: the replica's embedding and head + loss timed apart (CPU ranks). `ep_cluster`: links fitted to the
    all-to-all alone (netbench `collective_cpu_cluster`), which price a shrunk expert-parallel group's part."""
    tplan, tmodel, ttrain = target
    rplan, rmodel, rtrain = replica
    full = _terms(tplan, tmodel, ttrain, cluster)
    rep = _terms(rplan, rmodel, rtrain, cluster)
    parts = dict(optimizer=measured_optimizer_s, dp=measured_dp_comm_s, host=measured_host_s, tp=measured_tp_comm_s)
    if ends is not None and rplan.pp == 1 and 0.0 < ends.total_s < measured_step_s:
        # the ends' dispatch and collective-thread CPU are inside their windows: not also in H and C
        parts.update(ends=ends.total_s, host=_less(measured_host_s, ends.host_s))
        parts["tp"] = _less(measured_tp_comm_s, ends.comm_thread_s)
    k, taken = _take_apart(measured_step_s, rep, full, parts)
    m, rm = tplan.grad_accum_steps, rplan.grad_accum_steps
    opt = (
        taken["optimizer"] * full["optimizer_s"] / rep["optimizer_s"]
        if "optimizer" in taken
        else k * full["optimizer_s"]
    )
    # host dispatch: the same code on the same layer count dispatches the same operations per micro-batch whatever tp
    # is; tp collectives' CPU: onto the target by the model's own tp ratio per micro-batch (ring steps, bytes)
    priced_mb = taken.get("host", 0.0) / rm
    if "tp" in taken:
        priced_mb += (taken["tp"] / rm) * (full["tp_comm_s"] / m) / (rep["tp_comm_s"] / rm)
    measured_parts, modelled_parts = ["compute", "optimizer", *(["host"] if "host" in taken else [])], ["bubble"]
    measured_mb = full["compute_s"] / m
    if "ends" in taken:  # the target stage's ends from the replica's measured ones, its layers from k
        measured_mb -= full["ends_compute_s"] / m
        priced_mb += _target_ends_s(ends, rplan, tplan, rep, full) / rm
        measured_parts.append("ends")
    for axis, term in AXIS_TERMS.items():
        if getattr(tplan, axis) == 1 or full[term] == 0.0:
            continue
        whole = getattr(rplan, axis) == getattr(tplan, axis)
        (measured_parts if whole else modelled_parts).append(axis)
        if axis == "tp" and "tp" in taken:
            continue
        if whole:
            measured_mb += full[term] / m
        elif axis == "ep" and ep_cluster is not None:
            priced_mb += _terms(tplan, tmodel, ttrain, ep_cluster)[term] / m
        else:
            priced_mb += full[term] / m
    stage_mb = k * measured_mb + priced_mb
    bubble = float(bubble_microbatches(tplan.pp, tplan.vpp)) * stage_mb
    at_rdp = _at_replica_dp(tplan, rplan, tmodel, ttrain, cluster, full) if "dp" in taken else None
    dp_s, dp_measured = _dp_seconds(k, taken.get("dp"), rplan, tplan, rep, full, at_rdp)
    if fsdp_cluster is not None and not dp_measured and rplan.dp * rplan.cp == 1 and tplan.zero_stage >= 2:
        dp_s = _terms(tplan, tmodel, ttrain, fsdp_cluster)["dp_comm_s"]
    if tplan.dp * tplan.cp > 1 and full["dp_comm_s"] > 0:
        (measured_parts if dp_measured else modelled_parts).append("dp")
    if tplan.pp > 1:
        modelled_parts.append("pp")
    step = m * stage_mb + bubble + opt + dp_s + full["pp_comm_s"]
    if tplan.pp == 1:
        modelled_parts.remove("bubble")
    return Composed(
        step_s=step,
        stage_microbatch_s=stage_mb,
        bubble_s=bubble,
        dp_comm_s=dp_s,
        pp_comm_s=full["pp_comm_s"],
        optimizer_s=opt,
        measured_scale=k,
        measured_parts=tuple(measured_parts),
        modelled_parts=tuple(modelled_parts),
    )


def _less(t: float | None, part: float) -> float | None:
    return None if t is None else t - part


def _target_ends_s(ends: Ends, rplan: ParallelPlan, tplan: ParallelPlan, rep: dict, full: dict) -> float:
    """The target's busiest stage's ends per replica step: both at pp = 1; at pp > 1 the heavier of the embedding
    (rank 0) and the head + loss (rank pp-1), each stage holding the same layer count (schedule.layers_of_rank's
    default split). Of the ends, the host dispatch is carried as measured (the same operations at any tp), the
    collective-thread CPU by the model's tp ratio per micro-batch (as C), and the rest by replica tp / target tp (the
    head's V x h GEMM and the loss are split over tp: perf.py `_busiest_stage`)."""
    share = 1.0 if tplan.pp == 1 else max(ends.embed_s, ends.head_s) / ends.total_s
    tp_ratio = 1.0
    if rep["tp_comm_s"] > 0.0 and full["tp_comm_s"] > 0.0:
        tp_ratio = (full["tp_comm_s"] / tplan.grad_accum_steps) / (rep["tp_comm_s"] / rplan.grad_accum_steps)
    rest = max(ends.total_s - ends.host_s - ends.comm_thread_s, 0.0)
    return share * (ends.host_s + ends.comm_thread_s * tp_ratio + rest * rplan.tp / tplan.tp)


def _at_replica_dp(
    tplan: ParallelPlan, rplan: ParallelPlan, tmodel: ModelSpec, ttrain: TrainSpec, cluster: ClusterSpec, full: dict
) -> float:
    """F': the target's data-parallel term with its group shrunk to the replica's (plain FSDP over rplan.dp ranks, as
    the replica ran it): the target's collectives (count, bytes, schedule) at the replica's ring. F when dp is whole."""
    if (rplan.dp, rplan.dp_shard) == (tplan.dp, tplan.dp_shard):
        return full["dp_comm_s"]
    return _terms(dataclasses.replace(tplan, dp=rplan.dp, dp_shard=0), tmodel, ttrain, cluster)["dp_comm_s"]


def _dp_seconds(
    k: float,
    t_d: float | None,
    rplan: ParallelPlan,
    tplan: ParallelPlan,
    rep: dict,
    full: dict,
    at_rdp: float | None = None,
) -> tuple[float, bool]:
    """The target's data-parallel seconds and whether they are measured. Measured when the replica ran the target's
    whole dp group (and ZeRO stage), else priced at full dp; a partial dp group's measured traffic is inside k
    (R.step includes its modelled part). When the replica timed its data-parallel collectives apart (T_d):

        dp = T_d * F' / R.dp_comm + (F.dp_comm - F')

    F' (`at_rdp`, `_at_replica_dp`) is the target's collectives at the replica's group size. T_d * F'/R carries the
    replica's measured cost per collective onto the target's collectives (count and schedule: a pipelined target
    reduce-scatters once per step where the pp-1 replica did every micro-batch, perf.py fsdp_pipeline_held); F - F'
    prices only what the wider ring adds to each of them (ring steps n-1 and bytes (n-1)/n, collectives.dp_ring_s).
    A collective's CPU seconds are not all ring steps: each FSDP2 call on gloo also pays a per-call cost that does not
    grow with the group (the Python issue path, gloo's work enqueue and worker-thread hand-off, a
    reduce-scatter's clone and chunk copy: ProcessGroupGloo enqueues every collective as an AsyncWork run by its
    worker threads, and its reduce_scatter_tensor_coalesced clones the input, all-reduces it and copies one chunk
    out, pytorch torch/csrc/distributed/c10d/ProcessGroupGloo.cpp @ c194358a). Scaling all of T_d by the ring ratio
    F/R (the code before) charged that per-call part 7x from a 2-rank replica to an 8-rank target: measured on the world-8 landscape
    (benchmarks/data/landscape_tiny_w8_cpu_rerun / _r3, dp_comm_cpu_time_mean_s) the target's FSDP2 CPU per step is
    1.8-2.5x the dp-2 replica's where F/R says 5.1. With the whole dp group F' = F and this is T_d * F/R."""
    if t_d is not None:
        f_at = full["dp_comm_s"] if at_rdp is None else at_rdp
        return t_d * f_at / rep["dp_comm_s"] + (full["dp_comm_s"] - f_at), True
    whole = (rplan.dp, rplan.zero_stage) == (tplan.dp, tplan.zero_stage)
    return (k * full["dp_comm_s"] if whole else full["dp_comm_s"]), whole


def preset_cpu_clusters(cluster: Any, tp: int) -> tuple[Any, Any]:
    """(the cluster pricing bare collectives in CPU seconds, the one pricing FSDP2's at a target of tensor-parallel
    degree `tp`) from a preset's stored CPU fits (store_cpu_fits); None for each the preset does not store."""

    def links(lat, bw):
        return dict(
            intra_node_latency_s=lat,
            intra_node_bw_bytes_per_s=bw,
            inter_node_latency_s=lat,
            inter_node_bw_bytes_per_s=bw,
        )

    c = cluster
    if c.cpu_comm_latency_s is None or c.cpu_comm_bw_bytes_per_s is None:
        return None, None
    bare = dataclasses.replace(
        c, comm_efficiency=1.0, dp_overlap=0.0, **links(c.cpu_comm_latency_s, c.cpu_comm_bw_bytes_per_s)
    )
    fsdp = (c.fsdp_tp_cpu_latency_s, c.fsdp_tp_cpu_bw_bytes_per_s) if tp >= 2 else (None, None)
    if fsdp[0] is None:
        fsdp = (c.fsdp_cpu_latency_s, c.fsdp_cpu_bw_bytes_per_s)
    return bare, (None if fsdp[0] is None or fsdp[1] is None else dataclasses.replace(bare, **links(*fsdp)))

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

    k   = (T_r - T_o - T_d - H - C) / (R.step - R.optimizer - R.dp_comm - R.tp),   dp = T_d * F.dp_comm / R.dp_comm,
    stage_mb += H / m_r + (C / m_r) * (F.tp / m) / (R.tp / m_r)

with C the tensor-parallel collectives' CPU measured in situ (the replica's CPU on its collective threads, when it
runs no other collective: dp = cp = ep = 1), and H / m_r because the same code on the same layers dispatches the same
operations at any tp.

so a replica that reduce-scatters every micro-batch (pp = 1) does not carry that into a pipelined target that
reduce-scatters once per step (perf.py `fsdp_pipeline_held`), and dispatch does not shrink with the FLOPs.

F = perf_arrays of the target. k carries what the model gets wrong about this hardware and these shapes (the
measurement); F / R carries only what differs between the replica and the target's busiest stage (the embedding on
the first stage or the head on the last one, a shrunk group's per-rank share). When the replica IS the target
(pp = 1, nothing shrunk) the composed step equals the measured one exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.predict.perf import perf_arrays
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
    return {k: float(v[0]) for k, v in perf_arrays(arrays_from_plans([plan]), model, train, cluster).items()}


def compose_step(
    measured_step_s: float,
    target: tuple[ParallelPlan, ModelSpec, TrainSpec],
    replica: tuple[ParallelPlan, ModelSpec, TrainSpec],
    cluster: ClusterSpec,
    measured_optimizer_s: float | None = None,
    measured_dp_comm_s: float | None = None,
    measured_host_s: float | None = None,
    measured_tp_comm_s: float | None = None,
) -> Composed:
    """The target's step time composed from the replica's measured step, and of it the optimizer step's and the
    sharded data-parallel collectives' seconds when the replica measured them apart (module docstring)."""
    tplan, tmodel, ttrain = target
    rplan, rmodel, rtrain = replica
    full = _terms(tplan, tmodel, ttrain, cluster)
    rep = _terms(rplan, rmodel, rtrain, cluster)
    meas, model = measured_step_s, rep["step_s"]  # what k divides: the step less the parts measured apart
    opt = None
    t_o = measured_optimizer_s
    if t_o is not None and 0.0 < t_o < meas and 0.0 < rep["optimizer_s"] < model:
        meas, model = meas - t_o, model - rep["optimizer_s"]
        opt = t_o * full["optimizer_s"] / rep["optimizer_s"]
    t_d = measured_dp_comm_s
    dp_apart = t_d is not None and 0.0 < t_d < meas and 0.0 < rep["dp_comm_s"] < model
    if dp_apart:
        meas, model = meas - t_d, model - rep["dp_comm_s"]
    m, rm = tplan.grad_accum_steps, rplan.grad_accum_steps
    # host (dispatch) seconds: the same code on the same layer count dispatches the same operations per micro-batch,
    # whatever tp is; the step model has no term for them, so they leave the measured side only
    host_mb = 0.0
    if measured_host_s is not None and 0.0 < measured_host_s < meas:
        meas, host_mb = meas - measured_host_s, measured_host_s / rm
    # the tensor-parallel collectives' own CPU C (measured in situ on the replica's collective threads): out of k with
    # R.tp, onto the target by the model's own tp ratio per micro-batch (ring steps and bytes at the target's tp)
    t_c = measured_tp_comm_s
    tp_apart = t_c is not None and 0.0 < t_c < meas and 0.0 < rep["tp_comm_s"] < model and full["tp_comm_s"] > 0.0
    tp_mb = 0.0
    if tp_apart:
        meas, model = meas - t_c, model - rep["tp_comm_s"]
        tp_mb = (t_c / rm) * (full["tp_comm_s"] / m) / (rep["tp_comm_s"] / rm)
    k = meas / model
    if opt is None:
        opt = k * full["optimizer_s"]
    measured_parts, modelled_parts = ["compute", "optimizer"], ["bubble"]
    if host_mb:
        measured_parts.append("host")
    measured_mb, priced_mb = full["compute_s"] / m, host_mb + tp_mb
    for axis, term in AXIS_TERMS.items():
        if getattr(tplan, axis) == 1 or full[term] == 0.0:
            continue
        whole = getattr(rplan, axis) == getattr(tplan, axis)
        (measured_parts if whole else modelled_parts).append(axis)
        if axis == "tp" and tp_apart:
            continue
        if whole:
            measured_mb += full[term] / m
        else:
            priced_mb += full[term] / m
    stage_mb = k * measured_mb + priced_mb
    bubble = float(bubble_microbatches(tplan.pp, tplan.vpp)) * stage_mb
    # the data-parallel traffic is measured when the replica ran the target's whole dp group (and ZeRO stage), else
    # priced at full dp; a partial dp group's measured traffic is inside k (R.step includes its modelled part). When
    # the replica timed its data-parallel collectives apart (T_d), they are out of k and reach the target by the
    # model's own dp ratio F.dp_comm / R.dp_comm (collective count, ring steps and bytes at full dp; a pipelined
    # target reduce-scatters once per step where the pp-1 replica did every micro-batch: perf.py fsdp_pipeline_held),
    # so the per-collective cost is the replica's measured one, not netbench's alpha-beta (docs/scale_down.md)
    dp_whole = (rplan.dp, rplan.zero_stage) == (tplan.dp, tplan.zero_stage)
    dp_s = k * full["dp_comm_s"] if dp_whole else full["dp_comm_s"]
    if dp_apart:
        dp_s = t_d * full["dp_comm_s"] / rep["dp_comm_s"]
    if tplan.dp * tplan.cp > 1 and full["dp_comm_s"] > 0:
        (measured_parts if dp_whole or dp_apart else modelled_parts).append("dp")
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

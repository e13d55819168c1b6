"""The tiny-moe world-4-from-world-1 check of benchmarks/scale_down_accuracy.py (issue 27): a part of that benchmark's
full run (`moe_ep_check` in its JSON), not a script of its own; docs/scale_down.md "Accuracy"."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path


def moe_ep_checks(
    workdir: str, steps: int, cpu_comm, reuse: bool = False, fsdp_comm=None, concurrency: int = 1
) -> dict:
    """The check under the trainer's learned router (what a sweep runs) and with balanced routing: a random-init
    router on the tiny model sends the busiest EP rank far more than the multinomial estimate the step model prices
    (autotune/predict/moe.py routing_imbalance), which a 1-rank replica holding its local experts cannot see; the
    balanced run takes that skew out, leaving the priced all-to-all and data-parallel traffic (docs/scale_down.md)."""
    out = moe_ep_check(workdir, steps, cpu_comm, reuse, fsdp_comm, concurrency)
    out["balanced_routing"] = moe_ep_check(workdir, steps, cpu_comm, reuse, fsdp_comm, concurrency, routing="balanced")
    return out


def moe_ep_check(
    workdir: str,
    steps: int,
    cpu_comm,
    reuse: bool = False,
    fsdp_comm=None,
    concurrency: int = 1,
    routing: str = "learned",
) -> dict:
    """tiny-moe dp4 ep4 measured on 4 ranks next to its composition from a 1-rank replica (ep 1: the replica's local
    permute and experts are measured, the dispatch/combine all-to-alls to the 3 missing peers and the dp traffic are
    priced with the CPU-time alpha-beta). Compared in the busiest rank's CPU seconds per step on both sides;
    `composed_preset_comm_step_s` prices them with the preset's transfer-time alpha-beta (the earlier composition).
    `concurrency` copies of the replica run at once (4 x 1 rank: the target's 4 ranks on the same cores), composed
    from their mean (scaledown.mean_replica_row)."""
    from autotune.predict.compose import compose_step
    from autotune.results.trialfile import make_spec
    from autotune.run.scaledown import (
        mean_replica_row,
        measured_ends,
        measured_parts,
        measured_step_s,
        replica_spec,
    )
    from autotune.spec.config import load_config
    from launchers.local import LocalLauncher

    cfg = load_config(["model=tiny-moe", "sweep.warmup_steps=1", f"train.moe_routing={routing}"])
    plan = dataclasses.replace(cfg.plan(4), dp=4, ep=4, grad_accum_steps=2)
    tid = "moe-ep4-w4" + ("" if routing == "learned" else f"-{routing}")
    target = make_spec(cfg, plan, sweep_id="scale-down-accuracy", trial_id=tid, timed_steps=steps)
    sd = replica_spec(target, 1)
    cache = Path(workdir) / ("moe_rows.json" if routing == "learned" else f"moe_rows_{routing}.json")
    cached = json.loads(cache.read_text()) if reuse and cache.exists() else []
    if len(cached) == 1 + concurrency:  # [target, replica copies...]
        full, *reps = cached
    else:
        launcher = LocalLauncher(workdir=workdir)
        copies = (
            [sd.replica]
            if concurrency == 1
            else [
                dataclasses.replace(sd.replica, trial_id=f"{sd.replica.trial_id}-c{concurrency}-{j}")
                for j in range(1, concurrency + 1)
            ]
        )
        try:
            full = launcher.submit(target).result()
            handles = [launcher.submit(c) for c in copies]  # all at once
            reps = [h.result() for h in handles]
        finally:
            launcher.close()
        cache.write_text(json.dumps([full, *reps]))
    rep = mean_replica_row(reps)
    out = {"target": {"dp": 4, "ep": 4, "world": 4, "num_experts": target.model.num_experts}, "routing": routing}
    out["replica"] = {"world": 1, "ep": sd.replica.plan.ep, "num_experts": sd.replica.model.num_experts}
    out.update(replica_concurrency=concurrency, replica_cpu_step_runs_s=[r.get("step_cpu_time_mean_s") for r in reps])
    out.update(status_full=full["status"], status_replica=rep["status"])
    if full["status"] != "ok" or rep["status"] != "ok":
        return out
    r = sd.replica
    tgt, rpl = (target.plan, target.model, target.train), (r.plan, r.model, r.train)
    parts = measured_parts(sd.replica, rep, "cpu")
    ends, fsdp_comm = measured_ends(rep, "cpu"), fsdp_comm or {}
    c = compose_step(
        measured_step_s(rep, "cpu"),
        tgt,
        rpl,
        cpu_comm,
        *parts,
        fsdp_cluster=fsdp_comm.get(1),
        ends=ends,
        ep_cluster=fsdp_comm.get("all_to_all"),
    )
    bare = compose_step(
        measured_step_s(rep, "cpu"), tgt, rpl, cpu_comm, *parts, fsdp_cluster=fsdp_comm.get(1), ends=ends
    )
    old = compose_step(measured_step_s(rep, "cpu"), tgt, rpl, cfg.cluster, *parts, ends=ends)
    measured = measured_step_s(full, "cpu")
    out.update(
        measured_cpu_step_s=measured,
        replica_cpu_step_s=measured_step_s(rep, "cpu"),
        composed_step_s=c.step_s,
        rel_err=c.step_s / measured - 1.0,
        composed_pooled_links_step_s=bare.step_s,  # the all-to-all at the pooled bare collectives' fit
        rel_err_pooled_links=bare.step_s / measured - 1.0,
        composed_minus_pooled_s=c.step_s - bare.step_s,
        composed_preset_comm_step_s=old.step_s,
        rel_err_preset_comm=old.step_s / measured - 1.0,
        modelled_parts=list(c.modelled_parts),
        measured_parts=list(c.measured_parts),
    )
    return out

"""Scale-down accuracy: every layout of the measured world-8 landscape composed from scale-down trials on
--available-gpus ranks (autotune/run/scaledown.py), compared with its world-8 measurement, in CPU seconds per rank.

    PYTHONPATH=. .venv/bin/python benchmarks/scale_down_accuracy.py                 # all 40, replicas on 2 ranks
    PYTHONPATH=. .venv/bin/python benchmarks/scale_down_accuracy.py --smoke         # 3 layouts, 1 replica (CI)
    PYTHONPATH=. .venv/bin/python benchmarks/scale_down_accuracy.py --reuse         # recompose from WORKDIR's cache
                                                                                  # (replicas, netbench, MoE rows)

The target: each layout's median over three world-8 measurements of the same 40 layouts of the tiny model on 8 gloo
ranks (default --landscape: landscape_tiny_w8_cpu.parquet, _rerun and _r3, benchmarks/data/README.md; one run of
this host's world-8 landscape differs from another by ~7% per layout, so one run is a noisy target); each records the
layout's busiest rank's CPU seconds per step (time.process_time, one intra-op thread per rank), and so does every
replica: the comparison basis does not depend on how many processes share the cores (docs/scale_down.md "Fair on a
shared CPU"). Each distinct replica runs --replica-repeats times (default 2) and is composed from the mean of its
runs (scaledown.mean_replica_row). --replica-concurrency C runs C copies of each run at once (each its own torchrun;
0 = landscape world / available GPUs = 8 / 2 = 4: the host then runs the landscape's 8 ranks whatever else loads it;
repeats default 1 then); tried 2026-11-29 and not the default: it composed the tp 1 layouts 10-17% too slow (docs/
scale_down.md "Fair on a shared CPU"). The host's load average over the replica phase is in the JSON. The composed step is in the same basis:
  - calibration step: `autotune netbench` on the landscape's world (8 ranks, this host) records each collective's CPU
    seconds per rank and fits a CPU-time alpha-beta (autotune/fitting/netbench.py cpu_fits); the collectives the
    replica did not run (ZeRO/DDP traffic at full dp, pipeline p2p, a shrunk tp or ep group's part) are priced with
    it (cpu_time_cluster: nothing hidden, a collective's CPU is spent whether or not it overlaps compute); the same
    netbench also times FSDP2's own all-gathers / reduce-scatters (autotune/fitting/netbench_fsdp.py, fsdp_cpu_fits),
    which price a ZeRO-2/3 target's FSDP2 traffic where the replica holds no data-parallel rank;
  - the pipeline bubble is left out (a rank waiting in it, blocked in a gloo receive, burns no CPU).
Replicas that are the same trial (same per-rank shapes) are run once (times the repeats). Last line: ONE JSON object with median_abs_err
(of tok/s/GPU in CPU seconds), spearman (composed vs measured ranking), best_ratio (measured tok/s of the composed best /
measured best), `per_landscape` (the same three against each landscape alone), `landscape_noise`, the per-layout table, `wall_basis` (the same three figures the old way: the `cpu` preset's transfer-time
alpha-beta, the host mapping max(step, W/C (step - bubble)) against the landscape's wall clock), `cpu_basis_preset_comm`
(CPU basis, collectives priced with the preset), `cpu_basis_bare_dp_links` (CPU basis, FSDP2 traffic of no-dp-rank
replicas priced with the bare collectives' fit instead of FSDP2's), the cost against the landscape's own GPU-seconds, and the tiny-moe
dp4 ep4 world-4-from-world-1 check (`moe_ep_check`). Results and their reading: docs/scale_down.md "Accuracy".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LANDSCAPE_HOST_CORES = 2  # the 2-core host benchmarks/data/README.md says the landscape was measured on
TARGETS = {"median_abs_err": 0.10, "spearman": 0.9, "best_ratio": 0.95}  # issue 27
# the finalists of the robust pick: layouts composed within this fraction of the composed best, i.e. within the
# accuracy issue 27 asks of a composition (median |error| <= 10%): closer than that, the ranking is not resolved
CONFIRM_BAND = TARGETS["median_abs_err"]


def _target_spec(cfg, rec: dict, steps: int):
    from autotune.core.types import PLAN_FIELDS, ParallelPlan
    from autotune.results.trialfile import make_spec

    fields = {f: rec[f] for f in PLAN_FIELDS if f in rec and rec[f] is not None and rec[f] == rec[f]}
    plan = ParallelPlan(**{k: (v.item() if hasattr(v, "item") else v) for k, v in fields.items()})
    return make_spec(cfg, plan, sweep_id="scale-down-accuracy", trial_id=str(rec["candidate_id"]), timed_steps=steps)


def _replica_key(spec) -> str:
    return json.dumps([spec.plan.to_dict(), spec.model.num_layers, spec.train.global_batch_size], sort_keys=True)


def default_concurrency(landscape_world: int, available_gpus: int) -> int:
    """Copies of a replica run at once so the host runs as many ranks as the landscape did: ceil(W / A) (8 / 2 = 4:
    four 2-rank copies are the landscape's 8 ranks on the same cores; docs/scale_down.md "Fair on a shared CPU")."""
    if landscape_world < 1 or available_gpus < 1:
        raise ValueError(f"landscape_world={landscape_world}, available_gpus={available_gpus}: both must be >= 1")
    return -(-landscape_world // available_gpus)


def _copies(key: str, replica, trial_id: str, concurrency: int) -> list[tuple[str, object]]:
    """(cache key, TrialSpec) of the `concurrency` copies of one run that go at once: KEY alone when 1 (the cache of
    sequential runs), else KEY#cC.j with trial id -cC-j (its own run directory, rendezvous port and cache entry: a
    row measured among C copies is not reused as a sequential one, nor for another C)."""
    if concurrency == 1:
        return [(key, replica if trial_id == replica.trial_id else dataclasses.replace(replica, trial_id=trial_id))]
    return [
        (f"{key}#c{concurrency}.{j}", dataclasses.replace(replica, trial_id=f"{trial_id}-c{concurrency}-{j}"))
        for j in range(1, concurrency + 1)
    ]


def _repeat_specs(key: str, replica, repeats: int, concurrency: int = 1) -> list[tuple[str, object]]:
    """(cache key, TrialSpec) of each run of one replica, `repeats` waves of `concurrency` copies (_copies) in order:
    the first wave as KEY, the others as KEY#rI with trial id suffix -rI (another run directory)."""
    runs = []
    for i in range(1, repeats + 1):
        k, tid = (key, replica.trial_id) if i == 1 else (f"{key}#r{i}", f"{replica.trial_id}-r{i}")
        runs.extend(_copies(k, replica, tid, concurrency))
    return runs


def run_waves(launcher, runs: list[tuple[str, object]], concurrency: int, rows: dict, loads: list, cache=None) -> None:
    """Run the runs not in `rows` yet, `concurrency` at a time (each its own torchrun, all submitted before any is
    awaited); the host's 1-minute load average before each wave goes to `loads`, each row to `rows` (and `cache`)."""
    todo = [(k, s) for k, s in runs if k not in rows]
    for i in range(0, len(todo), concurrency):
        wave = todo[i : i + concurrency]
        loads.append(os.getloadavg()[0])
        handles = [(k, launcher.submit(s)) for k, s in wave]
        for k, h in handles:
            rows[k] = h.result()
            print(f"replica {k}: {rows[k]['status']} (load {loads[-1]:.1f})", file=sys.stderr, flush=True)
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(rows))


def _rank(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    for r, i in enumerate(order):
        ranks[i] = float(r)
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    ra, rb = _rank(a), _rank(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    return cov / math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))


def summary(ok: list[dict], meas_key: str, comp_key: str) -> dict:
    """median |error|, Spearman and best ratio of the composed column against the measured one."""
    meas, comp = [x[meas_key] for x in ok], [x[comp_key] for x in ok]
    errs = [c / m - 1.0 for c, m in zip(comp, meas)]
    best = max(range(len(ok)), key=lambda i: comp[i]) if ok else None
    return {
        "median_abs_err": statistics.median(abs(e) for e in errs) if ok else None,
        "median_signed_err": statistics.median(errs) if ok else None,
        "spearman": spearman(comp, meas) if len(ok) > 2 else None,
        "best_ratio": meas[best] / max(meas) if ok else None,
    }


def _against(layouts: list[dict], frame) -> dict:
    """summary() of the composed rows against one landscape's own step_cpu_time_mean_s (instead of the median)."""
    cpu = frame.set_index("candidate_id")["step_cpu_time_mean_s"]
    ok = [x for x in layouts if x["status"] == "ok"]
    rows = [{**x, "one": x["measured_tok_s_gpu"] * x["measured_cpu_step_s"] / cpu[x["candidate_id"]]} for x in ok]
    return summary(rows, "one", "composed_tok_s_gpu")


def _layout(rec: dict, sd, rrow: dict, row: dict, clusters: dict) -> dict:
    """One layout's row: measured and composed tok/s/GPU in CPU seconds per rank (the benchmark's basis), and the
    old wall-clock comparison (preset alpha-beta, host mapping) for the record."""
    from autotune.predict.compose import compose_step
    from autotune.run.scaledown import measured_ends, measured_parts, measured_step_s

    t, r = sd.target, sd.replica
    world, tokens = t.plan.world_size, t.train.global_batch_tokens
    tgt, rpl, step = (t.plan, t.model, t.train), (r.plan, r.model, r.train), measured_step_s(rrow, "cpu")
    parts = measured_parts(r, rrow, "cpu")
    t_dp = parts[1]
    ends, fsdp = measured_ends(rrow, "cpu"), clusters["fsdp"].get(t.plan.tp)
    cpu = compose_step(step, tgt, rpl, clusters["cpu"], *parts, fsdp_cluster=fsdp, ends=ends)
    no_ends = compose_step(step, tgt, rpl, clusters["cpu"], *parts, fsdp_cluster=fsdp)  # the ends inside k
    bare = compose_step(step, tgt, rpl, clusters["cpu"], *parts, ends=ends)  # FSDP2 traffic at the bare links
    pre = compose_step(step, tgt, rpl, t.cluster, *parts, ends=ends)
    host_step = max(pre.step_s, world / LANDSCAPE_HOST_CORES * (pre.step_s - pre.bubble_s))
    busy, measured = cpu.step_s - cpu.bubble_s, float(rec["step_cpu_time_mean_s"])
    return {
        "candidate_id": rec["candidate_id"],
        "layout": {k: int(rec[k]) for k in ("dp", "tp", "pp", "zero_stage", "micro_batch_size")},
        "replica": {k: row[f"replica_{k}"] for k in ("num_gpus", "tp", "num_layers", "grad_accum_steps")},
        "status": "ok",
        "measured_cpu_step_s": measured,
        "measured_cpu_step_runs_s": rec.get("step_cpu_time_runs"),  # each landscape's; measured = their median
        "composed_cpu_step_s": busy,
        "composed_priced_comm_s": cpu.dp_comm_s + cpu.pp_comm_s,
        "composed_dp_comm_s": cpu.dp_comm_s,
        "composed_bare_dp_tok_s_gpu": tokens / (bare.step_s - bare.bubble_s) / world,
        "composed_no_ends_tok_s_gpu": tokens / (no_ends.step_s - no_ends.bubble_s) / world,
        "replica_ends_cpu_s": None if ends is None else dataclasses.asdict(ends),
        "measured_tok_s_gpu": tokens / measured / world,
        "composed_tok_s_gpu": tokens / busy / world,
        "rel_err": measured / busy - 1.0,
        "composed_preset_comm_tok_s_gpu": tokens / (pre.step_s - pre.bubble_s) / world,
        "measured_wall_tok_s_gpu": float(rec["tokens_per_s_per_gpu"]),
        "composed_host_tok_s_gpu": tokens / host_step / world,
        "replica_dp_comm_cpu_s": t_dp,
        "replica_host_cpu_s": parts[2],
        "replica_tp_comm_cpu_s": parts[3],
        "replica_tp_comm_ops": rrow.get("comm_ops_per_step"),
        "replica_tp_comm_op_cpu_s": rrow.get("comm_op_cpu_s"),
        "measured_parts": row["measured_parts"],
        "modelled_parts": row["modelled_parts"],
    }


def confirm_best(
    ok: list[dict], finals: dict, replica_rows: dict, launcher, clusters: dict, repeats: int = 1, concurrency: int = 1
) -> dict:
    """The robust pick: every layout composed within CONFIRM_BAND of the composed best is a finalist; each finalist's
    replica runs once more (another trial id; cached as KEY#confirm; `concurrency` copies at once), its rows (the --replica-repeats runs and this
    one) are averaged (scaledown.mean_replica_row) and recomposed, and the best of the finalists by that is the pick. A single replica's noise on this shared host
    moved the pick from 0.95 to 0.82 of the measured best between two full runs of the same code (docs/scale_down.md)."""
    from autotune.run.scaledown import compose_row, mean_replica_row

    top = max(x["composed_tok_s_gpu"] for x in ok)
    picks = [x for x in ok if x["composed_tok_s_gpu"] >= (1.0 - CONFIRM_BAND) * top]
    best_meas, rows = max(x["measured_tok_s_gpu"] for x in ok), []
    for x in picks:
        rec, sd, key = finals[x["candidate_id"]]
        again = _copies(f"{key}#confirm", sd.replica, f"{sd.replica.trial_id}-confirm", concurrency)
        run_waves(launcher, again, concurrency, replica_rows, [])
        runs = _repeat_specs(key, sd.replica, repeats, concurrency) + again
        merged = mean_replica_row([replica_rows[k] for k, _ in runs])
        row = compose_row(sd, merged)
        if row["status"] == "ok":
            rows.append(_layout(rec, sd, merged, row, clusters))
    best = max(rows, key=lambda y: y["composed_tok_s_gpu"]) if rows else None
    return {
        "band": CONFIRM_BAND,
        "finalists": [x["candidate_id"] for x in picks],
        "composed_confirmed_tok_s_gpu": {y["candidate_id"]: y["composed_tok_s_gpu"] for y in rows},
        "pick": None if best is None else best["candidate_id"],
        "best_ratio": None if best is None else best["measured_tok_s_gpu"] / best_meas,
    }


def main(argv: list[str] | None = None) -> int:
    # three world-8 measurements of the same 40 layouts (benchmarks/data/README.md): the target is their median
    from benchmarks.data.measure_landscape import CPU_REPEATS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--available-gpus", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per replica")
    ap.add_argument("--smoke", action="store_true", help="3 layouts from 1 replica, 1 timed step, no MoE check (CI)")
    ap.add_argument("--workdir", default=str(ROOT / "results" / "_scale_down_accuracy"))
    ap.add_argument(
        "--landscape",
        nargs="+",
        default=[str(p) for p in CPU_REPEATS],
        help="landscape Parquet(s) with step_cpu_time_mean_s: the target is each layout's median over them",
    )
    ap.add_argument(
        "--replica-concurrency",
        type=int,
        default=1,
        help="copies of each replica run at once (default 1: one at a time; 0 = landscape world / --available-gpus,"
        " rounded up: 4, the landscape's ranks on the host; tried, not the default: docs/scale_down.md); 1 with --smoke",
    )
    ap.add_argument(
        "--replica-repeats",
        type=int,
        help="waves of --replica-concurrency copies of each distinct replica, all composed from their mean"
        " (scaledown.mean_replica_row); default 2 when the concurrency is 1, else 1; 1 with --smoke",
    )
    ap.add_argument(
        "--reuse", action="store_true", help="reuse the replica rows and netbench cached in WORKDIR (recompose only)"
    )
    ap.add_argument(
        "--query", help="only the landscape rows matching this pandas query (e.g. 'tp == 1'), to iterate on a group"
    )
    ap.add_argument("--no-moe", action="store_true", help="skip the tiny-moe world-4-from-world-1 check")
    args = ap.parse_args(argv)
    import pandas as pd

    from autotune.run.scaledown import compose_row, mean_replica_row, replica_spec
    from autotune.spec.config import load_config
    from benchmarks.data.measure_landscape import NUM_GPUS, OVERRIDES, landscape_noise, median_landscape
    from launchers.local import LocalLauncher

    conc = (
        args.replica_concurrency
        if args.replica_concurrency != 0
        else default_concurrency(NUM_GPUS, args.available_gpus)
    )
    steps, conc = (1, 1) if args.smoke else (args.steps, conc)
    repeats = 1 if args.smoke else args.replica_repeats or (2 if conc == 1 else 1)
    if repeats < 1 or conc < 1:
        ap.error(f"--replica-repeats={repeats}, --replica-concurrency={conc}: both must be >= 1")
    cfg = load_config([*OVERRIDES, "sweep.warmup_steps=1"])
    frames = [pd.read_parquet(p) for p in args.landscape]
    land = median_landscape(frames)
    land = land[land["step_cpu_time_mean_s"].notna()]
    land = land.sort_values("candidate_id").reset_index(drop=True)
    if args.query:
        land = land.query(args.query).reset_index(drop=True)
    if args.smoke:
        # dp4 tp2 z0/z2/z3 mbs1: three layouts that share one 2-rank replica (tp 2 fills it: dp 1, ZeRO differs only
        # in priced traffic)
        land = land[(land["tp"] == 2) & (land["pp"] == 1) & (land["dp"] == 4) & (land["micro_batch_size"] == 1)]
        land = land.head(3)
    from benchmarks.scale_down_calibration import calibrate_cpu_comm

    cpu_comm, fsdp_comm, calib = calibrate_cpu_comm(
        cfg.cluster, args.workdir, 2 if args.smoke else NUM_GPUS, args.smoke, args.reuse
    )
    clusters = {"cpu": cpu_comm, "fsdp": fsdp_comm}
    launcher = LocalLauncher(workdir=args.workdir)
    cache = Path(args.workdir) / "replicas.json"
    replica_rows: dict[str, dict] = json.loads(cache.read_text()) if args.reuse and cache.exists() else {}
    layouts, finals, loads = [], {}, []
    load_start = os.getloadavg()[0]
    try:
        for rec in land.to_dict("records"):
            sd = replica_spec(_target_spec(cfg, rec, steps), args.available_gpus)
            key = _replica_key(sd.replica)
            finals[rec["candidate_id"]] = (rec, sd, key)
            runs = _repeat_specs(key, sd.replica, repeats, conc)
            run_waves(launcher, runs, conc, replica_rows, loads, cache)
            rrow = mean_replica_row([replica_rows[k] for k, _ in runs])
            row = compose_row(sd, rrow)
            if row["status"] != "ok":
                layouts.append({"candidate_id": rec["candidate_id"], "status": row["status"]})
                continue
            layouts.append(_layout(rec, sd, rrow, row, clusters))
            layouts[-1]["replica_cpu_step_runs_s"] = [replica_rows[k].get("step_cpu_time_mean_s") for k, _ in runs]
        ok = [x for x in layouts if x["status"] == "ok"]
        confirmed = None
        if not args.smoke and ok:
            confirmed = confirm_best(ok, finals, replica_rows, launcher, clusters, repeats, conc)
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(replica_rows))
    finally:
        launcher.close()
    load_end = os.getloadavg()[0]
    out = {
        "available_gpus": args.available_gpus,
        "landscape": [Path(p).name for p in args.landscape],
        "landscape_target": "per layout, the median of the landscapes' step_cpu_time_mean_s",
        "landscape_noise": landscape_noise(frames),
        # each landscape alone as the target (the same composed rows)
        "per_landscape": {Path(p).name: _against(layouts, f) for p, f in zip(args.landscape, frames)},
        "replica_repeats": repeats,
        "replica_concurrency": conc,  # copies of each replica run at once (default_concurrency)
        # the host's 1-minute load average (os.getloadavg) at the start and end of the replica phase, and before each
        # wave of copies this invocation ran (empty with --reuse: nothing ran)
        "replica_phase_load_1m": {
            "start": load_start,
            "end": load_end,
            "waves": len(loads),
            "wave_min": min(loads, default=None),
            "wave_median": statistics.median(loads) if loads else None,
            "wave_max": max(loads, default=None),
        },
        "landscape_world": NUM_GPUS,
        "basis": "busiest rank's CPU seconds per step (process_time), both sides",
        "cpu_comm_calibration": calib,
        "n_layouts": len(layouts),
        "n_composed": len(ok),
        "n_replicas_run": len({k.split("#")[0] for k in replica_rows}),  # distinct replicas
        "n_replica_runs": len(replica_rows),  # with the repeats and the robust pick's re-runs
        **summary(ok, "measured_tok_s_gpu", "composed_tok_s_gpu"),
        "cpu_basis_preset_comm": summary(ok, "measured_tok_s_gpu", "composed_preset_comm_tok_s_gpu"),
        # the same composition with a no-dp-rank replica's FSDP2 traffic priced at netbench's bare-collective links
        "cpu_basis_bare_dp_links": summary(ok, "measured_tok_s_gpu", "composed_bare_dp_tok_s_gpu"),
        # the same composition with the replica's embedding and head + loss inside k (the code before `E`)
        "cpu_basis_ends_in_k": summary(ok, "measured_tok_s_gpu", "composed_no_ends_tok_s_gpu"),
        "wall_basis": summary(ok, "measured_wall_tok_s_gpu", "composed_host_tok_s_gpu"),
        "replica_gpu_seconds": sum(float(r.get("gpu_seconds") or 0.0) for r in replica_rows.values()),
        "landscape_gpu_seconds": float(land["gpu_seconds"].sum()),  # one landscape (the first file's)
        "targets": TARGETS,
        "confirmed_best": confirmed,  # the robust pick (confirm_best)
        "layouts": layouts,
    }
    out["targets_met"] = {
        "median_abs_err": out["median_abs_err"] is not None and out["median_abs_err"] <= TARGETS["median_abs_err"],
        "spearman": out["spearman"] is not None and out["spearman"] >= TARGETS["spearman"],
        "best_ratio": out["best_ratio"] is not None and out["best_ratio"] >= TARGETS["best_ratio"],
        "confirmed_best_ratio": bool(
            confirmed and confirmed["best_ratio"] and confirmed["best_ratio"] >= TARGETS["best_ratio"]
        ),
    }
    from benchmarks.scale_down_moe import moe_ep_checks

    out["moe_ep_check"] = (
        None
        if args.smoke or args.no_moe
        # the MoE target runs 4 ranks: 4 / 1 copies of its 1-rank replica at once when the layouts' replicas run so
        else moe_ep_checks(
            args.workdir, steps, cpu_comm, args.reuse, fsdp_comm, default_concurrency(4, 1) if conc > 1 else 1
        )
    )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

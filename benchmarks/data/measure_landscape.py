"""Measure the search-efficiency landscape once: every runnable layout of the tiny model on 8 gloo ranks, run with the
real trainer through the local launcher, one row each, then cached as `landscape_tiny_w8.parquet` (see README.md).

    .venv/bin/python benchmarks/data/measure_landscape.py            # resumable: skips layouts that have a row
    .venv/bin/python benchmarks/data/measure_landscape.py --collect  # only (re)write the Parquet fixture
    nice -n 15 .venv/bin/python benchmarks/data/measure_landscape.py --cpu   # the CPU-seconds landscape (issue 27):
                                     # results/landscape-tiny-w8-cpu -> landscape_tiny_w8_cpu.parquet; --limit K for a
                                     # duration estimate on the first K layouts

Every row carries the wall-clock step (`step_time_mean_s`, the slowest rank) and the busiest rank's CPU seconds per
timed step (`step_cpu_time_mean_s`, time.process_time over every thread of the rank, warm-up excluded;
bench_model/trainer.py), with one intra-op thread per rank (OMP_NUM_THREADS=1, set by launchers.local). The first
fixture (`landscape_tiny_w8.parquet`) predates the CPU column: it is wall clock only.

Layouts run in a fixed shuffled order (seed 0; tp = 1 layouts first), so slow drift of the shared machine's load
does not line up with the predicted ranking. Crashed layouts are retried when the script is run again.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

OVERRIDES = [
    "experiment=demo",
    "space.tp=[1,2,4]",
    "space.pp=[1,2,4]",
    "space.cp=[1]",
    "space.vpp=[1]",
    "space.zero_stage=[0,2,3]",
    "space.micro_batch_size=[1,2]",
    "space.recompute=[none]",
    "space.sequence_parallel=[true]",
    "sweep.warmup_steps=1",
    "sweep.timed_steps=3",
    "sweep.timeout_s=400",
]
NUM_GPUS = 8
WORK = ROOT / "results" / "landscape-tiny-w8"
FIXTURE = Path(__file__).resolve().parent / "landscape_tiny_w8.parquet"
CPU_WORK = ROOT / "results" / "landscape-tiny-w8-cpu"
CPU_FIXTURE = Path(__file__).resolve().parent / "landscape_tiny_w8_cpu.parquet"
# the CPU landscape measured three times (the first, a re-run, a third run: README.md): the scale-down benchmark's
# target is each layout's median over them (median_landscape), which lowers the per-row noise of one world-8 run
CPU_REPEATS = tuple(
    Path(__file__).resolve().parent / f"landscape_tiny_w8_cpu{s}.parquet" for s in ("", "_rerun", "_r3")
)
MEDIAN_COLUMNS = ("step_cpu_time_mean_s", "tokens_per_s_per_gpu", "step_time_mean_s")  # measured, per layout


def measure(work: Path = WORK, limit: int | None = None) -> None:
    from autotune.layouts.candidate import Candidate
    from autotune.layouts.planner import enumerate_candidates
    from autotune.results.store import SweepStore
    from autotune.run.rows import candidate_spec
    from autotune.spec.config import load_config
    from launchers.local import LocalLauncher

    cfg = load_config(OVERRIDES)
    frame = enumerate_candidates(cfg, NUM_GPUS)
    runnable = frame[frame["rank"].notna()].sample(frac=1.0, random_state=0)
    runnable = runnable.sort_values("tp", kind="stable")  # tp = 1 first (the tp > 1 trainer paths were fixed later)
    if limit is not None:
        runnable = runnable.head(limit)
    store = SweepStore(work)
    if not store.exists():
        store.create(cfg.resolved_yaml, {"gpus": NUM_GPUS, "overrides": OVERRIDES, "argv": sys.argv})
    prev = store.read()
    done = set(prev.loc[prev["status"].isin(["ok", "oom"]), "candidate_id"])  # crashes are retried on a re-run
    launcher = LocalLauncher(workdir=store.work_dir, log_dir=store.logs_dir)
    for i, (_, cand) in enumerate(runnable.iterrows()):
        if cand["candidate_id"] in done:
            continue
        spec = candidate_spec(cfg, Candidate.from_row(cand), sweep_id=store.sweep_id, backend="local")
        t0 = time.time()
        row = launcher.submit(spec).result()
        store.write_row(row)
        print(
            f"[{i + 1}/{len(runnable)}] {cand['candidate_id']} dp{cand.dp} tp{cand.tp} pp{cand.pp} cp{cand.cp} "
            f"z{cand.zero_stage} mbs{cand.micro_batch_size}: {row['status']} "
            f"{row['tokens_per_s_per_gpu']} tok/s/gpu, {row.get('step_cpu_time_mean_s')} cpu-s/step "
            f"({time.time() - t0:.0f} s)",
            flush=True,
        )


def collect(work: Path = WORK, fixture: Path = FIXTURE) -> None:
    from autotune.results.store import read_results

    df = read_results(work)
    df.to_parquet(fixture, index=False)
    print(f"wrote {fixture}: {len(df)} rows, {int((df['status'] == 'ok').sum())} ok")


def median_landscape(frames: list):
    """One landscape from repeated measurements of the same layouts: the layouts ok in every frame, each measured
    column (MEDIAN_COLUMNS) the median over the frames, the rest from the first; `step_cpu_time_runs` keeps each
    run's CPU seconds. A layout missing from one frame, or a frame of other layouts, is an error, not a silent drop."""
    import pandas as pd

    if not frames:
        raise ValueError("median_landscape: frames=[]: needs at least one landscape")
    ok = [f[f["status"] == "ok"].set_index("candidate_id") for f in frames]
    ids = sorted(ok[0].index)
    for i, f in enumerate(ok[1:], 1):
        if sorted(f.index) != ids:
            raise ValueError(f"median_landscape: frame {i} has layouts {sorted(set(f.index) ^ set(ids))} not shared")
    out = ok[0].loc[ids].copy()
    for col in MEDIAN_COLUMNS:
        out[col] = pd.concat([f.loc[ids, col] for f in ok], axis=1).median(axis=1)
    out["step_cpu_time_runs"] = [[float(f.loc[c, "step_cpu_time_mean_s"]) for f in ok] for c in ids]
    return out.reset_index()


def landscape_noise(frames: list) -> dict:
    """How much repeated landscapes disagree, per layout, in step_cpu_time_mean_s: the median |relative difference|
    over every pair of runs (the noise floor of one run as a target), and of one run against the median of all (that
    of the median target: what a perfect composition would still show against it)."""
    import itertools
    import statistics

    med = median_landscape(frames).set_index("candidate_id")["step_cpu_time_runs"]
    pairs = [abs(r[j] / r[i] - 1.0) for r in med for i, j in itertools.combinations(range(len(r)), 2)]
    to_median = [abs(x / statistics.median(r) - 1.0) for r in med for x in r]
    return {
        "runs": len(frames),
        "pairwise_median_abs_diff": statistics.median(pairs) if pairs else 0.0,
        "run_vs_median_median_abs_diff": statistics.median(to_median),
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--collect", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="the CPU-seconds landscape (new work dir and fixture)")
    ap.add_argument("--limit", type=int, default=None, help="only the first K layouts (a duration estimate)")
    ap.add_argument(
        "--repeat",
        help="with --cpu: measure again into results/landscape-tiny-w8-cpu-REPEAT and write "
        "landscape_tiny_w8_cpu_REPEAT.parquet (e.g. r3: the third run of CPU_REPEATS)",
    )
    a = ap.parse_args()
    work, fixture = (CPU_WORK, CPU_FIXTURE) if a.cpu else (WORK, FIXTURE)
    if a.cpu and a.repeat:
        work = CPU_WORK.with_name(f"{CPU_WORK.name}-{a.repeat}")
        fixture = CPU_FIXTURE.with_name(f"landscape_tiny_w8_cpu_{a.repeat}.parquet")
    if not a.collect:
        measure(work, a.limit)
    if a.limit is None:
        collect(work, fixture)

"""Search efficiency on a real measured landscape: how close each strategy gets to the exhaustive best for a share of
the exhaustive trial time. Prints a JSON list, one object per strategy:
    {strategy, best_ratio_at_20pct, curve: [[share, mean ratio], ...], min_ratio_at_20pct, seeds, ...}

    .venv/bin/python benchmarks/search_efficiency.py [--seeds 10] [--fixture benchmarks/data/landscape_tiny_w8.parquet]
    .venv/bin/python benchmarks/search_efficiency.py --calibration   # Spearman before/after calibration, JSON object

Replay (no trainer runs here): the landscape is benchmarks/data/landscape_tiny_w8.parquet (see its README: every
runnable layout of the tiny model on 8 gloo ranks, measured once). Strategies run through their real ask/tell code
over the planner's candidate frame restricted to the measured (status ok) layouts; `tell` gets the measured row.
- Cost of a trial: its measured gpu_seconds. A halving rung with s timed steps costs the trial's overhead
  (gpu_seconds - 8 x (warmup + timed) x step time) plus 8 x (warmup + s) x step time.
- A rung's observed throughput replays measurement noise: step time drawn from N(mean, std / sqrt(s)) with the
  trial's measured mean and std (seeded); full-fidelity trials report the measured value.
- Best found at a time share = the measured throughput of the layout the strategy has observed to be best so far,
  divided by the landscape's best. topk runs with online calibration, as in a sweep (sweep.calibrate=true);
  `topk_uncalibrated` is the same without it, for comparison.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "data"))

FIXTURE = ROOT / "benchmarks" / "data" / "landscape_tiny_w8.parquet"
SHARES = [round(0.05 * i, 2) for i in range(1, 21)]
STRATEGIES = ("grid", "random", "topk", "optuna", "halving", "topk_uncalibrated")
DETERMINISTIC = ("grid", "topk")


def load_landscape(path: Path):
    """(cfg, candidates restricted to measured layouts, ok rows by candidate id)."""
    import pandas as pd
    from measure_landscape import NUM_GPUS, OVERRIDES

    from autotune.layouts.planner import enumerate_candidates
    from autotune.spec.config import load_config

    rows = pd.read_parquet(path)
    ok = rows[rows["status"] == "ok"].drop_duplicates("candidate_id", keep="last").set_index("candidate_id")
    cfg = load_config(OVERRIDES)
    frame = enumerate_candidates(cfg, NUM_GPUS)
    cands = frame[frame["rank"].notna() & frame["candidate_id"].isin(ok.index)].sort_values("rank", kind="stable")
    return cfg, cands.reset_index(drop=True), ok


def _observe(meas, rung_steps: int | None, warmup: int, rng) -> tuple[float, float]:
    """(observed tokens/s/GPU, cost GPU-s) of running one measured layout at `rung_steps` timed steps."""
    step, std = float(meas["step_time_mean_s"]), float(meas["step_time_std_s"] or 0.0)
    n_gpus, timed = float(meas["num_gpus"]), int(meas["timed_steps"])
    cost = float(meas["gpu_seconds"])
    if rung_steps is None or rung_steps == timed:
        return float(meas["tokens_per_s_per_gpu"]), cost
    overhead = max(0.0, cost - n_gpus * (warmup + timed) * step)
    sampled = max(step * 0.05, rng.normal(step, std / math.sqrt(rung_steps)))
    return float(meas["tokens_per_s_per_gpu"]) * step / sampled, overhead + n_gpus * (warmup + rung_steps) * step


def replay(name: str, cfg, cands, ok, seed: int, calibrate: bool = True) -> list[tuple[float, float]]:
    """[(cumulative GPU-s, measured throughput of the best-observed layout)] after each trial."""
    from autotune.search.calibrate import OnlineCalibrator
    from autotune.search.strategies import get_strategy

    opts = {"halving": {"halving_pool": 9}, "optuna": {}}.get(name, {})
    strategy = get_strategy(name, cands, None, seed, **opts)
    calibrator = OnlineCalibrator(cfg, strategy.candidates) if calibrate else None
    rng = np.random.default_rng(seed)
    spent, best_obs, best_true, trace = 0.0, -1.0, 0.0, []
    while (ask := strategy.ask()) is not None:
        meas = ok.loc[ask.candidate_id]
        observed, cost = _observe(meas, ask.timed_steps, cfg.sweep.warmup_steps, rng)
        row = {
            **{k: (None if v != v else v) for k, v in meas.to_dict().items() if not isinstance(v, np.ndarray)},
            "candidate_id": ask.candidate_id,
            "tokens_per_s_per_gpu": observed,
            "trial_id": f"c{ask.candidate_id}" + (f"-r{ask.rung}" if ask.rung else ""),
        }
        strategy.tell(ask, row)
        if calibrator is not None and name == "topk":
            calibrator.after_row(row, strategy)
        spent += cost
        if observed > best_obs:
            best_obs, best_true = observed, float(meas["tokens_per_s_per_gpu"])
        trace.append((spent, best_true))
    return trace


def curve(trace, total_s: float, best: float) -> list[float]:
    out = []
    for share in SHARES:
        found = [b for s, b in trace if s <= share * total_s + 1e-9]
        out.append(max(found) / best if found else 0.0)
    return out


def run(path: Path, seeds: int) -> list[dict]:
    cfg, cands, ok = load_landscape(path)
    total_s = float(ok.loc[cands["candidate_id"], "gpu_seconds"].sum())
    best = float(ok.loc[cands["candidate_id"], "tokens_per_s_per_gpu"].max())
    results = []
    for name in STRATEGIES:
        base, calibrated = name.split("_")[0], not name.endswith("_uncalibrated")
        n_seeds = 1 if base in DETERMINISTIC else seeds  # their order depends on no seed
        curves = np.array([curve(replay(base, cfg, cands, ok, s, calibrated), total_s, best) for s in range(n_seeds)])
        i20 = SHARES.index(0.2)
        results.append(
            {
                "strategy": name,
                "best_ratio_at_20pct": round(float(curves[:, i20].mean()), 4),
                "min_ratio_at_20pct": round(float(curves[:, i20].min()), 4),
                "curve": [[s, round(float(v), 4)] for s, v in zip(SHARES, curves.mean(axis=0))],
                "seeds": n_seeds,
                "num_layouts": len(cands),
                "exhaustive_gpu_s": round(total_s, 1),
                "default": name == cfg.sweep.strategy,
            }
        )
    return results


def calibration_figures(path: Path, seeds: int, cluster_yaml: Path | None = None) -> dict:
    """Spearman(predicted, measured tokens/s/GPU) with the preset vs after calibration: in-sample on every layout, and
    out-of-sample (fit on a random half, score the other half; mean over seeds)."""
    import dataclasses

    from autotune.search.calibrate import calibrate, predict_tokens_per_s_per_gpu, spearman

    cfg, cands, ok = load_landscape(path)
    if cluster_yaml is not None:  # e.g. the preset `autotune netbench` wrote: measured links as the starting point
        import yaml

        from autotune.core.types import ClusterSpec

        cfg = dataclasses.replace(cfg, cluster=ClusterSpec(**yaml.safe_load(cluster_yaml.read_text())))
    rows = ok.loc[cands["candidate_id"]].reset_index()
    cal = calibrate(rows, cfg.model, cfg.train, cfg.cluster)
    before_oos, after_oos = [], []
    rng = np.random.default_rng(0)
    for _ in range(seeds):
        idx = rng.permutation(len(rows))
        fit, test = rows.iloc[idx[: len(rows) // 2]], rows.iloc[idx[len(rows) // 2 :]]
        fitted = calibrate(fit, cfg.model, cfg.train, cfg.cluster).cluster
        meas = test["tokens_per_s_per_gpu"].to_numpy(float)
        before_oos.append(spearman(predict_tokens_per_s_per_gpu(test, cfg.model, cfg.train, cfg.cluster), meas))
        after_oos.append(spearman(predict_tokens_per_s_per_gpu(test, cfg.model, cfg.train, fitted), meas))
    return {
        "num_layouts": len(rows),
        "spearman_before": cal.spearman_before,
        "spearman_after": cal.spearman_after,
        "spearman_before_out_of_sample": float(np.mean(before_oos)),
        "spearman_after_out_of_sample": float(np.mean(after_oos)),
        "rms_log_error_before": cal.perf_rms_log_error_before,
        "rms_log_error_after": cal.perf_rms_log_error_after,
        "changes": [{"name": n, "before": a, "after": b} for n, a, b in cal.changes],
        "fitted": {
            k: getattr(cal.cluster, k)
            for k in (
                "matmul_efficiency",
                "comm_efficiency",
                "dp_overlap",
                "runtime_overhead_bytes",
                "allocator_fragmentation",
            )
        },
        "preset": cfg.cluster.name,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixture", type=Path, default=FIXTURE)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--calibration", action="store_true", help="print the calibration Spearman figures instead")
    ap.add_argument("--cluster-yaml", type=Path, help="--calibration: start from this preset (e.g. netbench's)")
    args = ap.parse_args()
    import logging
    import warnings

    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    out = (
        calibration_figures(args.fixture, args.seeds, args.cluster_yaml)
        if args.calibration
        else run(args.fixture, args.seeds)
    )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

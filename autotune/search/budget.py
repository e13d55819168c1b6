"""GPU-hour budgets: the controller starts no trial once `sweep.budget_gpu_hours` are spent, and the report states what
was spent and what the exhaustive grid would have cost.

GPU-seconds of a trial are the launcher's `gpu_seconds` (num_gpus x wall seconds, start-up included), falling back to
num_gpus x wall_s. The exhaustive grid's cost is estimated per runnable candidate as
    overhead + num_gpus x (warmup + timed steps) x step time
with overhead the median over measured trials of (gpu_seconds - num_gpus x steps x step_time_mean_s), less their
compile time, plus num_gpus x the candidate's compile time when it compiles (autotune/predict/perf_terms.py compile_time_s;
given the cluster), and
step time the candidate's own measurement when it has one, else its predicted step time scaled by the median
measured/predicted ratio (a one-number calibration: the models' absolute scale is the least reliable part).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.core.errors import UsageError

SPENDING = ("ok", "oom", "crash", "timeout")  # statuses that ran (pruned / simulated / invalid rows cost nothing)


def trial_gpu_seconds(row: Any) -> float:
    g = row.get("gpu_seconds")
    if g is not None and g == g:
        return float(g)
    wall, n = row.get("wall_s"), row.get("num_gpus")
    return float(wall) * float(n) if wall is not None and wall == wall and n is not None else 0.0


def _full_size_gpu_seconds(row: Any) -> float:
    """What the trial cost, or for a composed row (docs/scale_down.md) what its full-size trial would have cost."""
    full = row.get("full_size_gpu_seconds")
    return float(full) if row.get("scaled_from") and full is not None and full == full else trial_gpu_seconds(row)


def spent_gpu_seconds(rows: Any) -> float:
    """Sum over the rows (a DataFrame) that ran."""
    if rows is None or len(rows) == 0:
        return 0.0
    ran = rows[rows["status"].isin(SPENDING)]
    return float(sum(trial_gpu_seconds(r) for r in ran.to_dict("records")))


class GpuBudget:
    """`sweep.budget_gpu_hours` (None = no limit) against the rows written so far (resume counts them)."""

    def __init__(self, budget_gpu_hours: float | None, previous_rows: Any = None) -> None:
        if budget_gpu_hours is not None and (
            isinstance(budget_gpu_hours, bool) or not budget_gpu_hours > 0 or math.isinf(budget_gpu_hours)
        ):
            raise UsageError(f"--budget-gpu-hours={budget_gpu_hours!r} must be a number > 0")
        self.limit_s = None if budget_gpu_hours is None else float(budget_gpu_hours) * 3600.0
        self.spent_s = spent_gpu_seconds(previous_rows)
        self.announced = False

    def add(self, row: dict[str, Any]) -> None:
        if row.get("status") in SPENDING:
            self.spent_s += trial_gpu_seconds(row)

    def exhausted(self) -> bool:
        return self.limit_s is not None and self.spent_s >= self.limit_s

    def announce(self, console: Any) -> None:
        """Say once that the budget stops the sweep."""
        if not self.announced:
            self.announced = True
            console.print(
                f"GPU-hour budget spent ({self.spent_s / 3600:.3g} of {self.limit_s / 3600:.3g} GPU-h): "
                "starting no more trials",
                highlight=False,
            )


@dataclass(frozen=True)
class CostSummary:
    spent_gpu_hours: float
    num_trials: int
    exhaustive_gpu_hours: float | None
    num_runnable: int

    def lines(self) -> list[str]:
        out = [f"GPU-hours spent: {self.spent_gpu_hours:.3g} ({self.num_trials} trials)"]
        if self.exhaustive_gpu_hours:
            share = 100.0 * self.spent_gpu_hours / self.exhaustive_gpu_hours
            out.append(
                f"exhaustive grid ({self.num_runnable} runnable layouts) would cost ~"
                f"{self.exhaustive_gpu_hours:.3g} GPU-hours; this sweep spent {share:.0f}% of that"
            )
        return out


def _compile_gpu_s(rec: dict[str, Any], cluster: Any) -> float:
    """GPU-seconds a trial spends compiling (every rank compiles at once): num_gpus x compile_time_s."""
    if cluster is None or not bool(rec.get("compile") or False):
        return 0.0
    from autotune.predict.perf_terms import compile_time_s

    return float(rec["num_gpus"]) * float(compile_time_s([True], cluster)[0])


def exhaustive_gpu_seconds(
    candidates: Any, rows: Any, warmup_steps: int, timed_steps: int, cluster: Any = None
) -> float | None:
    """Estimated GPU-seconds to run every candidate of `candidates` (the runnable planner rows) once."""
    ok = rows[(rows["status"] == "ok") & rows["step_time_mean_s"].notna()]
    if ok.empty or len(candidates) == 0:
        return None
    recs = ok.to_dict("records")
    steps = [float(r.get("timed_steps") or timed_steps) + warmup_steps for r in recs]
    # per-trial overhead in GPU-seconds: what the trial cost beyond its steps (process start, imports, model build)
    overhead = float(
        np.median(
            [
                max(
                    0.0,
                    _full_size_gpu_seconds(r)
                    - float(r["num_gpus"]) * n * float(r["step_time_mean_s"])
                    - _compile_gpu_s(r, cluster),
                )
                for r, n in zip(recs, steps)
            ]
        )
    )
    measured = {r["candidate_id"]: float(r["step_time_mean_s"]) for r in recs}
    scale = 1.0
    if "pred_step_s" in candidates:
        pred = dict(zip(candidates["candidate_id"], candidates["pred_step_s"].astype(float)))
        ratios = [measured[c] / pred[c] for c in measured if c in pred and pred[c] > 0]
        scale = float(np.median(ratios)) if ratios else 1.0
    total = 0.0
    for cand in candidates.to_dict("records"):
        step = measured.get(cand["candidate_id"])
        if step is None:
            step = float(cand.get("pred_step_s") or 0.0) * scale
        total += (
            overhead + float(cand["num_gpus"]) * (warmup_steps + timed_steps) * step + _compile_gpu_s(cand, cluster)
        )
    return total


def cost_summary(candidates: Any, rows: Any, warmup_steps: int, timed_steps: int, cluster: Any = None) -> CostSummary:
    ran = rows[rows["status"].isin(SPENDING)]
    exhaustive = exhaustive_gpu_seconds(candidates, rows, warmup_steps, timed_steps, cluster)
    return CostSummary(
        spent_gpu_seconds(rows) / 3600.0, len(ran), None if exhaustive is None else exhaustive / 3600.0, len(candidates)
    )


def sweep_cost_lines(sweep_dir: Any, rows: Any = None) -> list[str]:
    """What `autotune report` prints about cost: spent GPU-hours and the exhaustive grid's estimate (re-planned from
    the sweep's saved config; without a readable sweep.yaml only the spent part)."""
    from autotune.layouts.planner import enumerate_candidates
    from autotune.results.store import SweepStore

    store = SweepStore(sweep_dir)
    rows = store.read() if rows is None else rows
    try:
        cfg = store.config()
    except (ValueError, OSError):
        return cost_summary(rows.iloc[0:0], rows, 0, 0).lines()
    frame = enumerate_candidates(cfg, int(store.read_meta()["args"]["gpus"]))
    runnable = frame[frame["rank"].notna()]
    lines = cost_summary(runnable, rows, cfg.sweep.warmup_steps, cfg.sweep.timed_steps, cfg.cluster).lines()
    return lines + scale_down_cost_lines(rows)


def scale_down_cost_lines(rows: Any) -> list[str]:
    """Scale-down trials (docs/scale_down.md): what their replicas were charged next to what running the same layouts
    at full size would have cost (each row's `full_size_gpu_seconds`)."""
    if "scaled_from" not in rows:
        return []
    scaled = rows[rows["scaled_from"].notna() & rows["status"].isin(SPENDING)]
    if scaled.empty:
        return []
    spent = spent_gpu_seconds(scaled) / 3600.0
    full = float(scaled["full_size_gpu_seconds"].fillna(0.0).sum()) / 3600.0
    gpus = sorted({int(x) for x in scaled["replica_num_gpus"].dropna()})
    line = f"scale-down: {len(scaled)} trials on {'/'.join(map(str, gpus))} GPU(s) charged {spent:.3g} GPU-hours"
    if full > 0:
        line += (
            f"; the same layouts at full size would have cost ~{full:.3g} GPU-hours ({full / max(spent, 1e-12):.1f}x)"
        )
    return [line]

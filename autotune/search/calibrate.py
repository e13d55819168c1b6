"""Calibration: measured rows refit the models' free coefficients, so the ranking improves as a sweep runs.

Performance model (autotune.predict.perf): `matmul_efficiency`, `comm_efficiency`, `dp_overlap` are fitted by bounded least
squares on log(predicted tokens/s/GPU) - log(measured) over the rows with status ok (log residuals: a 2x error counts
the same for a fast and a slow layout). Memory model (autotune.predict.memory): reserved = allocated·(1 + fragmentation) +
overhead is linear in its two terms, fitted on measured peak vs predicted allocated bytes (relative residuals).

Bounds keep every coefficient physical (efficiencies in (0, 1], fragmentation in [0, 1], overhead in [0, device
memory]). A weak prior (weight PRIOR_WEIGHT on the coefficient's distance from its preset value, in bound-normalised
units) keeps coefficients the data cannot see — `dp_overlap` when no row has dp > 1 — where the preset put them,
instead of letting them drift along a flat direction. Solver: scipy.optimize.least_squares, trust-region reflective
with box bounds (Branch, Coleman & Li 1999). Rank agreement: scipy.stats.spearmanr.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_frame
from autotune.core.types import PLAN_DEFAULTS, PLAN_FIELDS, ClusterSpec, TrainSpec

PERF_BOUNDS: dict[str, tuple[float, float]] = {
    "matmul_efficiency": (0.01, 1.0),
    "comm_efficiency": (0.01, 1.0),
    "dp_overlap": (0.0, 1.0),
}
PRIOR_WEIGHT = 1e-6
MIN_ROWS = 3


def bounded_least_squares(
    residual: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> np.ndarray:
    """argmin ||residual(x)||² subject to lower <= x <= upper (finite bounds); x0 is moved into the box's interior
    first (1e-3 of the range from each bound): the trust-region-reflective method's scaling is the distance to the
    bound, so a start on a bound (a preset fragmentation of 0) takes no step (scipy.optimize.least_squares, "trf")."""
    from scipy.optimize import least_squares

    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    margin = 1e-3 * (upper - lower)
    x = np.clip(np.asarray(x0, float), lower + margin, upper - margin)
    return least_squares(residual, x, bounds=(lower, upper), method="trf").x


def spearman(a: Any, b: Any) -> float | None:
    """Spearman rank correlation (scipy.stats.spearmanr: ties share their mean rank). None below 3 points or when
    either side is constant (the coefficient is undefined there)."""
    import pandas as pd
    from scipy.stats import spearmanr

    a, b = pd.Series(np.asarray(a, float)), pd.Series(np.asarray(b, float))
    if len(a) < 3 or a.nunique() < 2 or b.nunique() < 2:
        return None
    return float(spearmanr(a, b).statistic)


def predict_tokens_per_s_per_gpu(rows: Any, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec) -> np.ndarray:
    from autotune.predict.perf import perf_arrays

    return perf_arrays(arrays_from_frame(rows), model, train, cluster)["tokens_per_s_per_gpu"]


def predict_allocated_bytes(rows: Any, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec) -> np.ndarray:
    from autotune.predict.memory import memory_arrays

    return memory_arrays(arrays_from_frame(rows), model, train, cluster)["allocated"]


def measured_rows(rows: Any) -> Any:
    """Rows with a usable measurement: status ok and a positive throughput."""
    ok = (rows["status"] == "ok") & (rows["tokens_per_s_per_gpu"].fillna(0) > 0)
    return rows[ok.to_numpy()]


def fit_perf(
    rows: Any, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, names: tuple[str, ...] = tuple(PERF_BOUNDS)
) -> dict[str, float]:
    """Refitted perf coefficients (see module docstring) from measured rows."""
    from autotune.predict.perf import perf_arrays

    measured = np.log(rows["tokens_per_s_per_gpu"].to_numpy(float))
    arr = arrays_from_frame(rows)  # once: the residual runs the vectorised model hundreds of times
    lo = np.array([PERF_BOUNDS[n][0] for n in names])
    hi = np.array([PERF_BOUNDS[n][1] for n in names])
    u0 = (np.array([getattr(cluster, n) for n in names], float) - lo) / (hi - lo)

    def residual(u: np.ndarray) -> np.ndarray:
        c = dataclasses.replace(cluster, **dict(zip(names, (lo + u * (hi - lo)).tolist())))
        pred = np.log(np.maximum(perf_arrays(arr, model, train, c)["tokens_per_s_per_gpu"], 1e-300))
        return np.concatenate([pred - measured, np.sqrt(PRIOR_WEIGHT) * (u - u0)])

    u = bounded_least_squares(residual, u0, np.zeros_like(u0), np.ones_like(u0))
    return dict(zip(names, (lo + u * (hi - lo)).tolist()))


def fit_memory(rows: Any, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec) -> dict[str, float]:
    """Refitted (allocator_fragmentation, runtime_overhead_bytes) from measured peaks (reserved, else allocated).
    What the peak measures decides what can be fitted (TrialSpec.pred_peak_mem_reserved_bytes): on CPU ranks the
    process's ru_maxrss, which includes the runtime, so both; on CUDA torch.cuda.max_memory_reserved, the caching
    allocator's segments only, which holds none of the CUDA context or NCCL's buffers (docs/memory_model.md "Two
    peaks"): the fragmentation alone, runtime_overhead_bytes kept as the preset has it."""
    if "peak_mem_reserved_bytes" not in rows or "peak_mem_allocated_bytes" not in rows:
        return {}
    peak = rows["peak_mem_reserved_bytes"].astype(float).fillna(rows["peak_mem_allocated_bytes"].astype(float))
    peak = peak.to_numpy(float)
    keep = np.isfinite(peak) & (peak > 0)
    if keep.sum() < 2:
        return {}
    # the caching-allocator model without the residual factor (autotune/predict/reserved.py): the fit refines only that residual
    from autotune.predict.memory import memory_arrays

    base = dataclasses.replace(cluster, allocator_fragmentation=0.0)
    alloc = memory_arrays(arrays_from_frame(rows), model, train, base)["allocator_reserved"][keep]
    peak = peak[keep]
    scale = float(cluster.device_memory_bytes)
    u0 = np.array([cluster.allocator_fragmentation, cluster.runtime_overhead_bytes / scale])
    # CUDA: the measured peak holds no runtime overhead, so it stays at the preset's (not a fitted parameter)
    n = 1 if cluster.device_type == "cuda" else 2

    def residual(u: np.ndarray) -> np.ndarray:
        overhead = u[1] * scale if n == 2 else 0.0
        pred = alloc * (1.0 + u[0]) + overhead
        return np.concatenate([(pred - peak) / peak, np.sqrt(PRIOR_WEIGHT) * (u - u0[:n])])

    u = bounded_least_squares(residual, u0[:n], np.zeros(n), np.ones(n))
    if n == 1:
        return {"allocator_fragmentation": float(u[0])}
    return {"allocator_fragmentation": float(u[0]), "runtime_overhead_bytes": int(round(u[1] * scale))}


@dataclass(frozen=True)
class Calibration:
    cluster: ClusterSpec
    changes: tuple[tuple[str, float, float], ...]  # (coefficient, before, after)
    num_rows: int
    perf_rms_log_error_before: float | None
    perf_rms_log_error_after: float | None
    spearman_before: float | None
    spearman_after: float | None

    def describe(self) -> list[str]:
        # a fit that lands on its bound comes back as round-off (allocator_fragmentation 0 -> 1.8e-13): say unchanged
        lines = [
            f"{n}: {a:.4g} (unchanged)" if abs(b - a) <= 1e-9 * max(1.0, abs(a)) else f"{n}: {a:.4g} -> {b:.4g}"
            for n, a, b in self.changes
        ]
        if self.spearman_before is not None and self.spearman_after is not None:
            lines.append(
                f"predicted-vs-measured Spearman over {self.num_rows} rows: "
                f"{self.spearman_before:.3f} -> {self.spearman_after:.3f}"
            )
        else:
            lines.append(
                f"predicted-vs-measured Spearman: undefined (too few rows: {self.num_rows}, or predictions or "
                "measurements all equal; needs 3 rows that differ)"
            )
        return lines


def _rms_log(rows: Any, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec) -> tuple[float, float | None]:
    pred = predict_tokens_per_s_per_gpu(rows, model, train, cluster)
    meas = rows["tokens_per_s_per_gpu"].to_numpy(float)
    return float(np.sqrt(np.mean((np.log(pred) - np.log(meas)) ** 2))), spearman(pred, meas)


def calibrate(
    rows: Any, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, min_rows: int = MIN_ROWS
) -> Calibration:
    """Refit perf coefficients and memory terms from `rows` (a results DataFrame of this model/train shape). Fewer
    than `min_rows` measured rows: the cluster comes back unchanged."""
    ok = measured_rows(rows)
    if len(ok) < min_rows:
        return Calibration(cluster, (), len(ok), None, None, None, None)
    err_before, rho_before = _rms_log(ok, model, train, cluster)
    new = {**fit_perf(ok, model, train, cluster), **fit_memory(ok, model, train, cluster)}
    fitted = dataclasses.replace(cluster, **new)
    err_after, rho_after = _rms_log(ok, model, train, fitted)
    changes = tuple(
        (n, float(getattr(cluster, n)), float(v))
        for n, v in new.items()
        if not np.isclose(float(getattr(cluster, n)), float(v), rtol=1e-4, atol=0)
    )
    return Calibration(fitted, changes, len(ok), err_before, err_after, rho_before, rho_after)


def rerank(candidates: Any, cfg: Any, cluster: ClusterSpec) -> Any:
    """The planner's candidate frame re-scored with a calibrated `cluster` (autotune.layouts.planner.score_arrays: memory
    reasons, fits, pred_* and rank all recomputed), row order and any `status` column kept."""
    from autotune.layouts.planner import score_arrays

    num_gpus = int(candidates["num_gpus"].iloc[0]) if len(candidates) else 1
    scored = score_arrays(arrays_from_frame(candidates), dataclasses.replace(cfg, cluster=cluster), num_gpus)
    scored.index = candidates.index
    for col in candidates.columns:
        if col not in scored.columns:
            scored[col] = candidates[col]
    return scored


def sweep_specs(
    sweep_dir: Any, overrides: list[str] | tuple[str, ...] = ()
) -> tuple[ModelSpec, TrainSpec, ClusterSpec]:
    """(model, train, cluster) a sweep ran with: its sweep.yaml's resolved config (autotune.results.store.SweepStore.config)
    with `overrides` on top, or the config tree with `overrides` when the folder has no sweep.yaml."""
    from autotune.results.store import SweepStore
    from autotune.spec.config import load_config

    store = SweepStore(sweep_dir)
    cfg = store.config(list(overrides)) if store.exists() else load_config(list(overrides))
    return cfg.model, cfg.train, cfg.cluster


def _or_default(field: str, value: Any) -> Any:
    """`value` of plan field `field`, or the field's default where the row has none (missing, None, NaN or pd.NA)."""
    import pandas as pd

    return PLAN_DEFAULTS[field] if value is None or (pd.api.types.is_scalar(value) and pd.isna(value)) else value


class OnlineCalibrator:
    """The controller's hook: after each measured row, refit (`calibrate`) on every ok row so far, re-score the
    runnable candidates with the refitted cluster (`rerank`) and hand the new order to the strategy
    (`strategy.update_ranking(frame)`: topk re-orders what it has not asked yet, the others keep their order)."""

    def __init__(self, cfg: Any, candidates: Any, min_rows: int = MIN_ROWS) -> None:
        import pandas as pd

        self.cfg, self.candidates, self.min_rows = cfg, candidates, min_rows
        self.cluster = cfg.cluster
        self.rows = pd.DataFrame()
        self.last: Calibration | None = None

    def observe(self, row: dict[str, Any]) -> Calibration | None:
        """Add one finished row; return the new Calibration when it changed the coefficients, else None."""
        import pandas as pd

        if row.get("status") != "ok" or not row.get("tokens_per_s_per_gpu"):
            return None
        # A row from before a plan field existed (an old results file, the search-efficiency fixture) lacks it or
        # holds null: that layout ran at the field's default, and a None would break arrays_from_frame's int cast.
        keep = {k: _or_default(k, row.get(k)) for k in PLAN_FIELDS}
        keep.update(
            (k, row.get(k))
            for k in (
                "status",
                "tokens_per_s_per_gpu",
                "peak_mem_reserved_bytes",
                "peak_mem_allocated_bytes",
                "candidate_id",
            )
        )
        self.rows = pd.concat([self.rows, pd.DataFrame([keep])], ignore_index=True)
        if len(self.rows) < self.min_rows:
            return None
        cal = calibrate(self.rows, self.cfg.model, self.cfg.train, self.cfg.cluster, self.min_rows)
        if not cal.changes or (self.last is not None and cal.cluster == self.last.cluster):
            return None
        self.last, self.cluster = cal, cal.cluster
        return cal

    def after_row(self, row: dict[str, Any], strategy: Any, log: Callable[[str], Any] | None = None) -> None:
        cal = self.observe(row)
        if cal is None:
            return
        frame = rerank(self.candidates, self.cfg, cal.cluster)
        strategy.update_ranking(frame[frame["rank"].notna()].sort_values("rank", kind="stable"))
        if log is not None:
            log("calibrated: " + "; ".join(cal.describe()))

"""Fit the step-time model's free coefficients per GPU family on public measured runs (autotune.fitting.reference_runs).

The free coefficients are the table in autotune/fitting/coefficients.py (each a fraction of a datasheet peak or a
physical ratio, bounded to its cited range), fitted jointly on all rows: the "family" ones per GPU family (Hopper =
H100 SXM + H200, Ampere = A100 80GB + 40GB, Blackwell: same SMs and kernels within a family, each preset keeps its own
peak and bandwidths), the "shared" ones once for all (few coefficients: the held-out sources are scored with them).
Everything else (peaks, HBM and link bandwidths, latencies, the per-boundary pipeline overhead) is the presets'
datasheet values. Residual: log(predicted / measured tok/s/GPU) (scipy.optimize.least_squares, soft_l1 loss so a
few rows from a different software stack cannot drag the rest).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ClusterSpec
from autotune.fitting.coefficients import BY_NAME, PER_FAMILY, PRIORS, SHARED
from autotune.fitting.reference_runs import ReferenceRun
from autotune.predict.perf import perf_arrays

CLUSTERS = Path(__file__).resolve().parents[2] / "search_spaces" / "cluster"
# the coefficient table (names, scopes, priors, physical ranges, sources): autotune/fitting/coefficients.py
PRIOR_WEIGHT = 1.0
FAMILIES = {
    "hopper": ("h100-sxm-80gb", "h200-141gb", "h100-hbm2e-96gb"),
    "ampere": ("a100-80gb", "a100-40gb"),
    "blackwell": ("b200", "gb200-nvl72", "b300", "gb300-nvl72"),
}
FAMILY_OF = {p: fam for fam, presets in FAMILIES.items() for p in presets}


def load_preset(name: str, folder: Path = CLUSTERS) -> ClusterSpec:
    from omegaconf import (
        OmegaConf,  # YAML 1.2 floats ("3.35e12"), as Hydra reads the presets
    )

    raw = OmegaConf.to_container(OmegaConf.load(folder / f"{name}.yaml"))
    return ClusterSpec(**raw)


def predict(runs: Iterable[ReferenceRun], clusters: dict[str, ClusterSpec]) -> np.ndarray:
    """Predicted tok/s/GPU of each run under `clusters` (preset name -> spec); runs sharing model, train and preset
    are scored in one vectorised call."""
    runs = list(runs)
    out = np.empty(len(runs))
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(runs):
        groups.setdefault((r.model, r.train, r.cluster), []).append(i)
    for (model, train, cluster), idx in groups.items():
        arr = arrays_from_plans([runs[i].plan for i in idx])
        out[idx] = perf_arrays(arr, model, train, clusters[cluster])["tokens_per_s_per_gpu"]
    return out


def with_coefficients(
    clusters: dict[str, ClusterSpec], family: str, values: dict[str, float]
) -> dict[str, ClusterSpec]:
    new = dict(clusters)
    for name in FAMILIES[family]:
        if name in new:
            new[name] = dataclasses.replace(new[name], **{k: float(v) for k, v in values.items()})
    return new


def _unpack(x: np.ndarray) -> dict[str, dict[str, float]]:
    """x = [per-family coefficients, family by family] + [shared coefficients]."""
    n = len(PER_FAMILY) * len(FAMILIES)
    shared = {k: float(v) for k, v in zip(SHARED, x[n:])}
    return {
        fam: {**{k: float(x[i * len(PER_FAMILY) + j]) for j, k in enumerate(PER_FAMILY)}, **shared}
        for i, fam in enumerate(FAMILIES)
    }


def fit_all(runs: list[ReferenceRun], clusters: dict[str, ClusterSpec]) -> dict[str, dict[str, float]]:
    """Least-squares coefficients {family: {coefficient: value}} from `runs`, starting from the presets' values (a
    family without runs keeps its preset's matmul_efficiency: its column of the Jacobian is zero). Rows with a
    `fit_excluded` reason (hardware the preset does not describe) are left out of the fit, not out of the scoring."""
    from scipy.optimize import least_squares

    runs = [r for r in runs if not r.fit_excluded]

    first = {fam: clusters[presets[0]] for fam, presets in FAMILIES.items()}
    x0 = np.array(  # a coefficient the preset lacks starts at its prior
        [getattr(first[f], k) or PRIORS[k] for f in FAMILIES for k in PER_FAMILY]
        + [getattr(first["hopper"], k) or PRIORS[k] for k in SHARED]
    )
    names = [k for _ in FAMILIES for k in PER_FAMILY] + list(SHARED)
    prior = np.array([PRIORS[k] for k in names])
    bounds = (np.array([BY_NAME[k].low for k in names]), np.array([BY_NAME[k].high for k in names]))
    measured = np.log([r.measured_tokens_per_s_per_gpu for r in runs])

    def residual(x: np.ndarray) -> np.ndarray:
        rows = np.log(predict(runs, apply_fit(clusters, _unpack(x)))) - measured
        return np.concatenate([rows, PRIOR_WEIGHT * np.log(x / prior)])

    res = least_squares(
        residual,
        np.clip(x0, bounds[0] + 1e-6, bounds[1] - 1e-6),
        bounds=bounds,
        loss="soft_l1",
        f_scale=0.1,
        diff_step=1e-3,
        xtol=1e-3,
        ftol=1e-3,
        x_scale=prior,  # each coefficient in units of its prior (host_op_s is ~1e-5 s, the fractions ~0.5)
    )
    return _unpack(res.x)


def apply_fit(clusters: dict[str, ClusterSpec], fit: dict[str, dict[str, float]]) -> dict[str, ClusterSpec]:
    for fam, coeffs in fit.items():
        clusters = with_coefficients(clusters, fam, coeffs)
    return clusters


# torch.compile: fraction of the eager elementwise time left after Inductor fusion (autotune/predict/perf_terms.py). Prior:
# the fused/eager byte ratio of bench_model's block counted kernel by kernel (~0.36, perf_terms module doc).
COMPILE_FACTOR = "compile_memory_traffic_factor"
COMPILE_PRIOR = 0.36


def fit_compile_factor(runs: list[ReferenceRun], clusters: dict[str, ClusterSpec]) -> float:
    """compile_memory_traffic_factor fitted on the compiled runs (plan.compile) with every other coefficient at the
    presets' values: least squares on log(predicted / measured tok/s/GPU), bounded to [0, 1], plus the weak prior
    above (one row's worth, as the other coefficients). The eager runs do not depend on it."""
    from scipy.optimize import least_squares

    compiled = [r for r in runs if r.plan.compile]
    if not compiled:
        raise ValueError("no compiled runs to fit compile_memory_traffic_factor on")
    measured = np.log([r.measured_tokens_per_s_per_gpu for r in compiled])

    def residual(x: np.ndarray) -> np.ndarray:
        cl = {k: dataclasses.replace(c, **{COMPILE_FACTOR: float(x[0])}) for k, c in clusters.items()}
        rows = np.log(predict(compiled, cl)) - measured
        return np.append(rows, PRIOR_WEIGHT * np.log(max(x[0], 1e-3) / COMPILE_PRIOR))

    return float(least_squares(residual, [COMPILE_PRIOR], bounds=(0.0, 1.0), diff_step=1e-3).x[0])

"""Fit the step-time model's free coefficients per GPU family on public measured runs (autotune.reference_runs).

Free coefficients (all fractions of a datasheet peak, bounded to [0.05, 1]): matmul_efficiency, attention_efficiency,
memory_efficiency, comm_efficiency, dp_overlap. Everything else (peaks, HBM and link bandwidths, latencies, the
per-boundary pipeline overhead) comes from the presets' datasheet values. One fit per family: the coefficients are
properties of the chip generation (same SMs and kernels), the peaks/bandwidths of each preset stay its own:
Hopper = H100 SXM + H200, Ampere = A100 80GB + 40GB. Residual: log(predicted / measured tok/s/GPU)
(scipy.optimize.least_squares, soft_l1 loss so one mis-transcribed row cannot drag a family).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterable

import numpy as np

from autotune.perf import perf_arrays
from autotune.plan_arrays import arrays_from_plans
from autotune.reference_runs import ReferenceRun
from autotune.types import ClusterSpec

CLUSTERS = Path(__file__).resolve().parent.parent / "search_spaces" / "cluster"
FREE = ("matmul_efficiency", "attention_efficiency", "memory_efficiency", "comm_efficiency", "dp_overlap")
BOUNDS = (0.05, 1.0)
FAMILIES = {"hopper": ("h100-sxm-80gb", "h200-141gb"), "ampere": ("a100-80gb", "a100-40gb")}
FAMILY_OF = {p: fam for fam, presets in FAMILIES.items() for p in presets}


def load_preset(name: str, folder: Path = CLUSTERS) -> ClusterSpec:
    from omegaconf import OmegaConf  # YAML 1.2 floats ("3.35e12"), as Hydra reads the presets

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


def with_coefficients(clusters: dict[str, ClusterSpec], family: str, x: np.ndarray) -> dict[str, ClusterSpec]:
    new = dict(clusters)
    for name in FAMILIES[family]:
        if name in new:
            new[name] = dataclasses.replace(new[name], **{k: float(v) for k, v in zip(FREE, x)})
    return new


def fit_family(runs: list[ReferenceRun], clusters: dict[str, ClusterSpec], family: str) -> dict[str, float]:
    """Least-squares coefficients of one family from its runs (the preset's current values where it has none)."""
    from scipy.optimize import least_squares

    mine = [r for r in runs if FAMILY_OF.get(r.cluster) == family]
    x0 = np.array([getattr(clusters[FAMILIES[family][0]], k) for k in FREE], dtype=float)
    if not mine:
        return dict(zip(FREE, x0))
    measured = np.log([r.measured_tokens_per_s_per_gpu for r in mine])

    def residual(x: np.ndarray) -> np.ndarray:
        return np.log(predict(mine, with_coefficients(clusters, family, x))) - measured

    res = least_squares(residual, np.clip(x0, *BOUNDS), bounds=BOUNDS, loss="soft_l1", f_scale=0.1, diff_step=1e-3,
                        xtol=1e-4, ftol=1e-4)
    return dict(zip(FREE, res.x))


def fit_all(runs: list[ReferenceRun], clusters: dict[str, ClusterSpec]) -> dict[str, dict[str, float]]:
    return {fam: fit_family(runs, clusters, fam) for fam in FAMILIES}


def apply_fit(clusters: dict[str, ClusterSpec], fit: dict[str, dict[str, float]]) -> dict[str, ClusterSpec]:
    for fam, coeffs in fit.items():
        clusters = with_coefficients(clusters, fam, np.array([coeffs[k] for k in FREE]))
    return clusters

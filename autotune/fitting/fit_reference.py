"""Fit the step-time model's free coefficients per GPU family on public measured runs (autotune.fitting.reference_runs).

Six free coefficients, all fractions of a datasheet peak bounded to [0.05, 1], fitted jointly on all rows:
matmul_efficiency per GPU family (Hopper = H100 SXM + H200, Ampere = A100 80GB + 40GB: same SMs and kernels within
a family, each preset keeps its own peak and bandwidths), and attention_efficiency, memory_efficiency,
comm_efficiency, dp_overlap shared by all families (few coefficients: the held-out sources are scored with them).
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
from autotune.fitting.reference_runs import ReferenceRun
from autotune.predict.perf import perf_arrays

CLUSTERS = Path(__file__).resolve().parents[2] / "search_spaces" / "cluster"
PER_FAMILY = ("matmul_efficiency", "attention_efficiency")
SHARED = (
    "memory_efficiency",
    "comm_efficiency",
    "dp_overlap",
    "lowp_gemm_efficiency",
    "compile_memory_traffic_factor",
)
FREE = (*PER_FAMILY, *SHARED)
# Weak priors (the fit starts here and pays PRIOR_WEIGHT * log(x / prior) per coefficient, one row's worth): they
# keep a coefficient the remaining rows cannot see (leave-one-source-out) near its physical value.
PRIORS = {
    "matmul_efficiency": 0.7,  # cuBLAS bf16 GEMMs of LLM shapes: ~70-80% of dense peak (NVIDIA H100/A100 GEMM tables)
    "attention_efficiency": 0.4,  # FlashAttention-2: 50-73% fwd / 35-45% fwd+bwd of A100 peak (Dao 2023 Sec 4.1);
    # ~35% of H100 peak (Shah et al. 2024 "FlashAttention-3", Sec 1)
    "memory_efficiency": 0.8,  # elementwise kernels on large tensors: ~80-90% of HBM bandwidth (roofline practice)
    "comm_efficiency": 0.8,  # nccl-tests all_reduce busbw ~360 of 450 GB/s NVLink 4 per direction
    "dp_overlap": 0.5,  # no information: half of the overlapped traffic hidden
    "lowp_gemm_efficiency": 0.8,  # FP8 GEMMs ~1.6x BF16 rather than 2x (perf_terms.linear_efficiency_factor)
    "compile_memory_traffic_factor": 0.36,  # fused/eager bytes of bench_model's block counted per kernel (perf_terms)
}
PRIOR_WEIGHT = 1.0
BOUNDS = (0.05, 1.0)
FAMILIES = {
    "hopper": ("h100-sxm-80gb", "h200-141gb"),
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
    family without runs keeps its preset's matmul_efficiency: its column of the Jacobian is zero)."""
    from scipy.optimize import least_squares

    first = {fam: clusters[presets[0]] for fam, presets in FAMILIES.items()}
    x0 = np.array(  # a coefficient the preset lacks starts at its prior
        [getattr(first[f], k) or PRIORS[k] for f in FAMILIES for k in PER_FAMILY]
        + [getattr(first["hopper"], k) or PRIORS[k] for k in SHARED]
    )
    prior = np.array([PRIORS[k] for _ in FAMILIES for k in PER_FAMILY] + [PRIORS[k] for k in SHARED])
    measured = np.log([r.measured_tokens_per_s_per_gpu for r in runs])

    def residual(x: np.ndarray) -> np.ndarray:
        rows = np.log(predict(runs, apply_fit(clusters, _unpack(x)))) - measured
        return np.concatenate([rows, PRIOR_WEIGHT * np.log(x / prior)])

    res = least_squares(
        residual, np.clip(x0, *BOUNDS), bounds=BOUNDS, loss="soft_l1", f_scale=0.1, diff_step=1e-3, xtol=1e-3, ftol=1e-3
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

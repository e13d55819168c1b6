"""The GEMM shape term of the step-time model (autotune/predict/perf.py "GEMM"): eff = matmul_efficiency * m/(m +
GEMM_M0) * n/(n + GEMM_N0) for a GEMM of m rows (tokens) and width n (h/tp, or an expert's F/etp): tile quantisation
and the memory-bound tails of narrow GEMMs halve the efficiency at m = GEMM_M0 and n = GEMM_N0. Used by the dense
layer's linears (perf.py), the routed experts' grouped GEMMs (perf_moe.py) and devbench's measured ratios."""

from __future__ import annotations

from typing import Any

import numpy as np

GEMM_M0 = 256.0  # tokens per GEMM at which efficiency is halved by this term
GEMM_N0 = 128.0  # GEMM width (h/tp) at which efficiency is halved by this term


def gemm_efficiency(base: float, m_dim: Any, n_dim: Any) -> np.ndarray:
    return base * m_dim / (m_dim + GEMM_M0) * n_dim / (n_dim + GEMM_N0)

"""Memory margin of a candidate and the ranking that prefers layouts whose fit survives the model's error
(docs/memory_model.md "Memory margin and ranking").

margin = usable device memory - predicted reserved peak, usable = device_memory_bytes * (1 - space.memory_headroom).
Its size in units of the reserved model's validated error: sigma = margin / (RESERVED_SIGMA_REL * reserved), with
RESERVED_SIGMA_REL (autotune/predict/reserved.py) the relative rms error of the reserved prediction on the measured H200 runs.
Treating the relative error as normal, P(fits) = Phi(sigma). The default ranking orders valid candidates by expected
throughput, predicted tok/s x P(fits), so a layout 1 sigma from the limit (P = 0.84) must be 19% faster to rank above
one with room to spare; candidates below space.min_margin_sigma rank after every candidate that clears it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autotune.predict.reserved import RESERVED_SIGMA_REL

_ERF = np.frompyfunc(math.erf, 1, 1)


def memory_margin(
    reserved: Any, device_bytes: float, headroom: float, sigma_rel: float = RESERVED_SIGMA_REL
) -> tuple[np.ndarray, np.ndarray]:
    """(margin bytes, margin in sigmas) of predicted reserved peaks against the usable device memory."""
    r = np.asarray(reserved, dtype=np.float64)
    margin = device_bytes * (1.0 - headroom) - r
    return margin, margin / (sigma_rel * np.maximum(r, 1.0))


def fit_probability(margin_sigma: Any) -> np.ndarray:
    """Phi(sigma), the standard normal CDF: the chance the real reserved peak stays under the usable memory."""
    x = np.asarray(margin_sigma, dtype=np.float64)
    return 0.5 * (1.0 + _ERF(x / math.sqrt(2.0)).astype(np.float64))


def rank_order(tokens_per_s: Any, reserved: Any, margin_sigma: Any, valid: Any, min_sigma: float) -> np.ndarray:
    """Indices of the valid candidates, best first: those with margin_sigma >= min_sigma before the others, then by
    expected throughput tokens_per_s * Phi(margin_sigma) (highest first), then by reserved memory (least first)."""
    sigma = np.asarray(margin_sigma, dtype=np.float64)
    expected = np.asarray(tokens_per_s, dtype=np.float64) * fit_probability(sigma)
    order = np.lexsort((np.asarray(reserved, dtype=np.float64), -expected, sigma < min_sigma))
    return order[np.asarray(valid, dtype=bool)[order]]

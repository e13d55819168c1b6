"""Two shape terms of the attention roofline (perf_terms.attention_s): sliding-window layers and the head dimension.

Sliding window (`window_time_share`). A layer with a window of W keys before each query (model.sliding_window;
Megatron / TE window_size (W, 0): keys [i - W, i], W' = W + 1 of them) runs the same fused kernel, which skips the
key tiles outside the band and computes the ones it touches whole (cuDNN supports the (left, 0) band on the causal
mask since 9.2: TransformerEngine transformer_engine/common/fused_attn/fused_attn.cpp @ v2.9, "9.2: SWA (left, 0) +
top-left diagonal"; FlashAttention-2 skips blocks outside the mask, Dao 2023 Sec 3.1.1). A query block of Bc rows
needs keys [q0 - W, q0 + Bc - 1]: K_w = (ceil((W' - 1)/Bc) + 1) * Bc keys streamed per query against the causal
layer's (s + Bc)/2 on average. Each query block's fixed costs (perf_terms.attention_shape_factor, the half-point S0
of the published sequence curve) are amortised over K_w keys instead of s: a windowed layer takes
(K_w + S0) / ((s + Bc)/2 * (s + S0)/s) of a full layer's time. GPT-OSS-120B at s = 4096, W = 128, FA3/cuDNN
(S0 = 207): K_w = 256, (256 + 207) / (2112 * 4303/4096) = 0.2087; 18 of 36 layers windowed: 0.604 of the full-causal
time the model priced before (it priced every layer full causal).

Head dimension (`head_dim_factor`). The softmax's exponentials, max and rescale cost the same per score whatever d, while
the two matmuls' FLOPs per score scale with d, so a small head reaches a lower fraction of peak. Published forward rates,
BF16, H100 SXM5, at 16k (Shah et al. 2024 "FlashAttention-3", Fig. 4, head dim 64 and 128 panels), d = 64 against
d = 128: cuDNN 413 / 595 = 0.694, FlashAttention-2 324 / 370 = 0.876, Triton 403 / 395 (no loss: 1.0); FA3 497 / 648
= 0.767. The "fa3" kernel class takes cuDNN's ratio: the d = 64 rows here run cuDNN (Megatron-Core / TE picks cuDNN
fused attention; learned sinks disable flash-attn there, TE attention/dot_product_attention/utils.py @ v2.9 "Disabling
FlashAttention for softmax_type"; torch SDPA prefers cuDNN on sm90 / sm100). From 128 up no term (FA3 at d = 256:
642, flat). Between 64 and 128 the per-score fixed cost c of the form d / (d + c), normalised to 1 at 128, through
the d = 64 point: f(d) = d (128 + c) / (128 (d + c)) with c = 64 * 128 (1 - r) / (128 r - 64), r the d = 64 ratio.
Measured on H100; on Blackwell, whose tensor cores outgrow its exponential units further, the same ratio is an
extrapolation (likely a lower bound on the loss).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec

# d = 64 over d = 128 forward rate at 16k per kernel class (module doc; Shah et al. 2024 Fig. 4)
HEAD_DIM_64_RATIO = {"fa3": 413.0 / 595.0, "fa2": 324.0 / 370.0, "triton": 1.0}
HEAD_DIM_FLAT_FROM = 128


def head_dim_factor(head_dim: int, kernel: str = "fa3") -> float:
    """Fraction of the head-dim-128 attention rate a kernel reaches at `head_dim` (module doc): 1 from 128 up."""
    if head_dim >= HEAD_DIM_FLAT_FROM:
        return 1.0
    r = HEAD_DIM_64_RATIO.get(kernel, HEAD_DIM_64_RATIO["fa3"])
    if r >= 1.0:
        return 1.0
    c = 64.0 * HEAD_DIM_FLAT_FROM * (1.0 - r) / (HEAD_DIM_FLAT_FROM * r - 64.0)
    return head_dim * (HEAD_DIM_FLAT_FROM + c) / (HEAD_DIM_FLAT_FROM * (head_dim + c))


def window_time_share(model: ModelSpec, seq_len: Any, half: float, block: float) -> np.ndarray:
    """The layers' mean attention time over a full-causal layer's at `seq_len` keys (module doc): 1 without a
    window; `half` the kernel's sequence half-point S0, `block` its key block Bc."""
    s = np.asarray(seq_len, dtype=np.float64)
    if model.sliding_window_layers == 0:
        return np.ones_like(s)
    k_w = (math.ceil(model.sliding_window / block) + 1) * block  # W' - 1 = W keys before the diagonal block
    share = np.minimum((k_w + half) / ((s + block) / 2.0 * (s + half) / s), 1.0)
    n_win = model.sliding_window_layers
    return ((model.num_layers - n_win) + n_win * share) / model.num_layers

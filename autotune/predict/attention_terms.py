"""Attention's own roofline (`attention_s`, re-exported by perf_terms): a causal FlashAttention pass at the family's
fitted attention_efficiency times its sequence curve, its kernel class (FA3 / cuDNN, FA2, Triton), the softmax
exponentials where a preset states their rate (Blackwell), and two shape terms: sliding-window layers and the head
dimension. Sources of the first three at their constants below.

Sliding window (`window_time_share`). A layer with a window of W keys before each query (model.sliding_window;
Megatron / TE window_size (W, 0): keys [i - W, i], W' = W + 1 of them) runs the same fused kernel, which skips the
key tiles outside the band and computes the ones it touches whole (cuDNN supports the (left, 0) band on the causal
mask since 9.2: TransformerEngine transformer_engine/common/fused_attn/fused_attn.cpp @ v2.9, "9.2: SWA (left, 0) +
top-left diagonal"; FlashAttention-2 skips blocks outside the mask, Dao 2023 Sec 3.1.1). A query block of Bc rows
needs keys [q0 - W, q0 + Bc - 1]: K_w = (ceil((W' - 1)/Bc) + 1) * Bc keys streamed per query against the causal
layer's (s + Bc)/2 on average. Each query block's fixed costs (attention_shape_factor, the half-point S0
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
Measured on H100, where the d = 64 rate is the exponential's bound; where a preset prices the exponentials itself
(softmax_exp_s, Blackwell) attention_s leaves this factor out.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.types import ClusterSpec

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


# Attention's own roofline (FlashAttention): the fraction of the family's asymptotic attention rate
# (cluster.attention_efficiency, fitted per GPU family) a causal kernel reaches at sequence length s.
# - Sequence: per query block the kernel streams the s keys; fixed costs per block (the softmax rescale, the output
#   write, the launch and the tail wave) weigh more at short s. FlashAttention-3 on H100, head dim 128, BF16 forward
#   (Shah et al. 2024 Fig. 4, the same figure the FA3 README shows): 467 TFLOP/s at s = 512, 648 at 16k; the saturating
#   form s/(s + S0) through both points gives S0 = 207 (it then predicts 596 at 2k against the published 625).
#   FlashAttention-2 on the same GPU (same figure): 309 -> 370, S0 = 105.
# - Causal mask: the kernel computes the whole diagonal tile of each query block (Dao 2023 "FlashAttention-2"
#   Sec 3.1.1: blocks above the diagonal are skipped, the diagonal one is computed and masked), so a causal pass does
#   s/2 + Bc/2 of work per query for s/2 useful: factor s/(s + Bc), Bc = 128 (FA2/FA3 key block for head dim 128).
# - Head dim: FA3 forward at 16k reaches 648 (d = 128) and 642 (d = 256) TFLOP/s (Shah et al. 2024 Fig. 4): flat
#   from 128 up; below 128 the same figure's d = 64 panel (attention_terms.head_dim_factor).
ATTN_SEQ_HALF = 207.0
ATTN_CAUSAL_BLOCK = 128.0
# FlashAttention-2-class kernels on Hopper (torch SDPA's flash backend, the flash-attn 2 package: Ampere-style mma.sync,
# no wgmma/TMA): FA2 on H100, head dim 128, BF16 forward reaches 309 TFLOP/s at 512 and 370 at 16k against FA3's 467 and
# 648 (Shah et al. 2024 Fig. 4): an asymptotic 370/648 = 0.571 of the FA3/cuDNN rate and its own half-point
# s/(s + 105). cluster.fa2_attention_ratio carries the 0.571 on the Hopper presets; on Ampere FA2 is the best kernel
# (no ratio) and on Blackwell no FA2-vs-best figure is published here (no ratio: not modelled).
ATTN_SEQ_HALF_FA2 = 105.0
# FLOPs of one FlashAttention pass in forward-equivalents: the backward recomputes the scores (QK^T) and runs 4 more
# matmuls (dV, dP, dQ, dK), 5 against the forward's 2: 2.5x the forward (Dao 2023 "FlashAttention-2" Sec 4.1, the
# fwd+bwd = 3.5x fwd count of flash-attention's benchmarks/benchmark_flash_attention.py). The published TFLOP/s that
# bound attention_efficiency count it so; a full-recompute forward adds 1 more.
ATTN_BWD_FWD_RATIO = 2.5
# FlashAttention in Triton (flash_attn_triton.py: the kernel llm-foundry's attn_impl=triton runs, its
# llmfoundry/models/layers/flash_attn_triton.py @ v0.3.0 copied from HazyResearch/flash-attention @ eff9fe6; the MPT
# benchmark tables ran it, scripts/train/benchmarking/submit_benchmarks.py @ b2a43a147 `--attn_impl` default 'triton').
# FlashAttention-2 is 1.3-1.5x faster than it in the forward pass and ~2x in the backward (Dao 2023 "FlashAttention-2"
# Sec 4.1, A100, Figs. 4-6; 1.4 taken), while FA2 itself reaches 73% of peak forward and 63% backward (Sec 1). Time
# against FA2 for f forward passes and the backward's 2.5 forward-equivalents (triton_attention_factor):
# (1.4 f / 0.73 + 2 * 2.5 / 0.63) / (f / 0.73 + 2.5 / 0.63) = 1.85 at f = 1, 1.76 with full recompute (f = 2).
TRITON_FWD_SLOWDOWN = 1.4
TRITON_BWD_SLOWDOWN = 2.0
FA2_FWD_PEAK_FRACTION = 0.73
FA2_BWD_PEAK_FRACTION = 0.63


def attention_shape_factor(seq_len: Any, half: float = ATTN_SEQ_HALF) -> np.ndarray:
    """Fraction of the asymptotic attention rate a causal FlashAttention pass reaches at `seq_len` (see above);
    `half`: the kernel's sequence half-point (ATTN_SEQ_HALF for FA3 / cuDNN, ATTN_SEQ_HALF_FA2 for FA2)."""
    s = np.asarray(seq_len, dtype=np.float64)
    return s / (s + half) * s / (s + ATTN_CAUSAL_BLOCK)


def attention_passes(passes: Any) -> np.ndarray:
    """Forward-equivalents of attention for a layer run `passes` times (3 = fwd + bwd, 4 with full recompute): the
    backward is ATTN_BWD_FWD_RATIO forwards, not 2, so 3.5 (4.5)."""
    return np.asarray(passes, dtype=np.float64) + (ATTN_BWD_FWD_RATIO - 2.0)


def triton_attention_factor(passes: Any) -> np.ndarray:
    """Time of the Triton FlashAttention kernel over FlashAttention-2's for a layer run `passes` times (see
    TRITON_FWD_SLOWDOWN): the forward passes and the backward weighted by FA2's own forward / backward rates."""
    fwd = (attention_passes(passes) - ATTN_BWD_FWD_RATIO) / FA2_FWD_PEAK_FRACTION
    bwd = ATTN_BWD_FWD_RATIO / FA2_BWD_PEAK_FRACTION
    return (TRITON_FWD_SLOWDOWN * fwd + TRITON_BWD_SLOWDOWN * bwd) / (fwd + bwd)


def attention_s(
    tokens: Any,
    seq_len: int,
    model: ModelSpec,
    tp: Any,
    passes: Any,
    cluster: ClusterSpec,
    peak: float,
    chunk: Any = None,
    kernel: str = "fa3",
) -> np.ndarray:
    """Causal attention score and value matmuls of one layer for `tokens` local tokens: 2 matmuls * 2 FLOPs *
    s * d_attn per token forward, halved for the causal mask (PaLM, Chowdhery et al. 2022 App. B), heads split by TP;
    attention_passes(`passes`) forward-equivalents (backward = 2.5 forwards), at attention_efficiency of peak
    times the CUDA kernel's sequence-length factor (attention_shape_factor) at `chunk` keys per call (seq_len;
    seq_len/cp under ring attention, each step a chunk against a chunk). `kernel` (FrameworkProfile.attention_kernel):
    "fa3" (FlashAttention-3 / cuDNN, the family's best) or "fa2", which runs at cluster.fa2_attention_ratio of it
    with its own sequence curve where the preset states a ratio (Hopper), or "triton" (FlashAttention in Triton,
    llm-foundry's attn_impl=triton): the FA2 time times triton_attention_factor (measured on A100; on Hopper the same
    factor over FA2, both Ampere-style mma.sync kernels: an extrapolation, no H100 figure of it is used)."""
    flops = np.asarray(tokens, dtype=np.float64) * 2.0 * seq_len * model.num_heads * model.head_dim / tp
    flops = flops * attention_passes(passes)
    ratio = cluster.fa2_attention_ratio if kernel in ("fa2", "triton") else None
    half = ATTN_SEQ_HALF if ratio is None else ATTN_SEQ_HALF_FA2
    # the sequence curve is the CUDA FlashAttention kernels' (FA2/FA3 figures); a CPU preset keeps its flat fraction
    s = seq_len if chunk is None else chunk
    shape = attention_shape_factor(s, half) if cluster.device_type == "cuda" else 1.0
    slower = triton_attention_factor(passes) if kernel == "triton" else 1.0
    # sliding-window layers and small heads (attention_terms.py); MLA's heads are d_qk = nope + rope wide. Where the
    # preset prices the softmax exponentials (softmax_exp_s) the head-dim factor is left out: it is read off H100
    # kernels whose d = 64 rate is the exponential's bound (FlashAttention-3 Sec 3.1: 3.9 T exp/s vs 989 TFLOP/s, 4d =
    # 256 FLOPs per score), which softmax_exp_s counts itself (one exponential per score, heads x keys)
    d = model.head_dim if model.attention == "gqa" else model.qk_nope_head_dim + model.qk_rope_head_dim
    window = window_time_share(model, s, half, ATTN_CAUSAL_BLOCK)
    small_heads = 1.0 if cluster.softmax_exp_per_s is not None else head_dim_factor(d, kernel)
    slower = slower * window / small_heads
    mma = flops * slower / (peak * cluster.attention_efficiency * (1.0 if ratio is None else ratio) * shape)
    # a windowed layer computes the scores of the tiles in its band: at S0 = 0 the share is that count's ratio
    scores = window_time_share(model, seq_len, 0.0, ATTN_CAUSAL_BLOCK)
    return mma + scores * softmax_exp_s(tokens, seq_len, model, tp, passes, cluster)


def softmax_exps(tokens: Any, seq_len: int, model: ModelSpec, tp: Any, passes: Any) -> np.ndarray:
    """Softmax exponentials of one layer's causal attention for `tokens` local tokens: one per (query, key) score
    of the local heads, s/2 keys per query under the causal mask plus half the diagonal tile the kernel computes and
    masks (Dao 2023 Sec 3.1.1, ATTN_CAUSAL_BLOCK); once per forward and once more in the backward, which recomputes P
    from the saved row statistics (Dao 2023 Alg. 2): `passes` - 1 times (2, 3 with full recompute)."""
    keys = seq_len / 2.0 + ATTN_CAUSAL_BLOCK / 2.0
    heads = model.num_heads / np.asarray(tp, dtype=np.float64)
    return np.asarray(tokens, dtype=np.float64) * heads * keys * (np.asarray(passes, dtype=np.float64) - 1.0)


def softmax_exp_s(tokens: Any, seq_len: int, model: ModelSpec, tp: Any, passes: Any, cluster: ClusterSpec) -> Any:
    """Time of the softmax exponentials on the special-function units, serial with the attention matmuls, where
    the preset states their rate (`softmax_exp_per_s`; else 0: they hide behind the matmuls). Blackwell doubled the
    tensor cores over Hopper but kept MUFU at 16 exponentials / clock / SM, so its attention forward is bound by the
    exponential, not the MMA (Zadouri et al. 2026, FlashAttention-4, Sec 1 / 3 "feeds and speeds" on B200); in the
    GB200 trace of NVIDIA's "Making Softmax More Efficient with NVIDIA Blackwell Ultra" (developer blog, 2026) the
    second matmul waits for the softmax (BMM1 -> MUFU.EX2 -> BMM2). Blackwell Ultra doubles MUFU.EX2: 10.7 vs 5
    TeraExponentials/s (per-GPU table, verda.com "NVIDIA GB300 NVL72: GPU Architecture & Performance"). On Hopper
    FlashAttention-3 overlaps the softmax of one warpgroup with the other's GEMMs (Shah et al. 2024 Sec 3.1), so the
    Hopper presets state no rate."""
    rate = cluster.softmax_exp_per_s
    if rate is None or cluster.device_type != "cuda":
        return 0.0
    return softmax_exps(tokens, seq_len, model, tp, passes) / rate

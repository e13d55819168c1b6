"""torch's ring attention (context parallelism of torchtitan): what a rank pays per layer beyond the causal FlashAttention
FLOPs / cp that attention_terms.attention_s already prices. Pure, vectorised over candidates.

Source: pytorch torch/distributed/tensor/experimental/_attention.py @ f2127dbdb01fc9319ce42b92d60344d19cbd0137 (the
same loop at 0123248a484ffe531edb5098b986c1bac08cd296). torchtitan @ 9dec370 (the Dec 2024 CP rows, torch 1963fc8 of
2024-12-23, whose text of this file was not readable here) calls it through `context_parallel` with
`set_rotate_method("allgather")` (torchtitan/utils.py create_context_parallel_ctx, config_manager.py default) and
restricts SDPA to the flash / efficient backends (utils.py get_train_context).

- Load-balanced steps (`_templated_ring_attention`, `_is_causal_behavior`): step 0 is the local causal block, every
  step i >= 1 a non-causal block of s/cp queries x s/(2cp) keys or s/(2cp) queries x s/cp keys: every step does the
  causal share, so the FLOPs are attention_s's; the kernel sees chunks of s/cp (attention_s's `chunk`).
- Forward merge (`_SDPAMerger.step` / `_merge_one`, convert_to_f32 = True): each step i >= 1 casts the block output to
  fp32 (c read, 4 written per element) and runs three eager fp32 elementwise ops over the output
  `out - sigmoid(block_lse - lse) * (out - block_out)`: the difference (read 8, write 4), the broadcast product (read
  4, write 4), the update (read 8, write 4): 32 bytes; the logsumexp terms are 1/head_dim of that (not counted).
  `results()` casts the merged output back (4 read, c written). The last cp rank (rank cp-1) merges every step on
  the whole block (i <= rank: `partial` False), the busiest rank, whose pace the next collective waits for.
- Backward (`_templated_ring_attention_backward`): grad_query / grad_key / grad_value = zeros_like(dtype=float32)
  (4 written per element); every step grad_query += the step's compute-dtype dQ (read 4 + c, write 4); at step 0
  grad_key/value += dK/dV the same; at steps i >= 1 the received fp32 dK/dV take the step's on their first half
  (`_partial_update(..., add=True)`: (8 + c) / 2) and torch.cat rebuilds the whole (read 4, write 4); every step sends
  torch.cat([grad_key.flatten(), grad_value.flatten()]) (read 4, write 4) through `_AllToAllRotater`; at the end
  grad_query and the received dK/dV are cast back (read 4, write c).
- Communication: K/V by one all_gather_tensor of cat(K, V) per ring loop (forward, and again in the backward's own
  rotater), dK/dV in fp32 by one ft_c.permute_tensor per step. Functional collectives are asynchronous (the
  AsyncCollectiveTensor is waited in `next_buffer`): the forward all-gather is issued before step 0's SDPA and waited
  before step 1 (hidden behind one step); in the backward the all-gather the same, each dK/dV send issued after step
  i and waited after step i + 1's SDPA backward (hidden behind one step), the last one waited after the loop
  (exposed). The two backward collectives' contention on the link is not modelled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.predict.collectives import ring_s
from autotune.predict.perf_terms import ATTN_BWD_FWD_RATIO

FP32 = 4.0  # convert_to_f32: merged output and gradient accumulators in float32
# bytes per element of the three fp32 merge ops (sub, broadcast mul, sub: 12 + 8 + 12), see the module docstring
MERGE_FP32_BYTES = 32.0


def ring_forward_merge_bytes(q_elems: Any, cp: Any, c: int) -> np.ndarray:
    """HBM bytes of one ring forward's output merges on the busiest rank: (cp - 1) steps of (cast c + 4, three fp32
    ops 32) per element of the local output (`q_elems` = local tokens x q_dim / tp), plus the final cast (4 + c)."""
    n = np.asarray(cp, dtype=np.float64)
    q = np.asarray(q_elems, dtype=np.float64)
    return np.where(n > 1, q * ((n - 1) * (c + FP32 + MERGE_FP32_BYTES) + FP32 + c), 0.0)


def ring_backward_accum_bytes(q_elems: Any, kv_elems: Any, cp: Any, c: int) -> np.ndarray:
    """HBM bytes of one ring backward's fp32 gradient accumulation on rank cp - 1 (module docstring): dQ
    (zeros, cp accumulations, final cast) and dK, dV each of `kv_elems` (local tokens x the K/V width SDPA sees / tp:
    zeros, step 0's accumulation, (cp - 1) half accumulations + cat, cp send cats, final cast)."""
    n = np.asarray(cp, dtype=np.float64)
    q, kv = np.asarray(q_elems, dtype=np.float64), np.asarray(kv_elems, dtype=np.float64)
    acc = 2 * FP32 + c  # fp32 += compute dtype: read 4 + c, write 4
    copy = 2 * FP32  # torch.cat of fp32: read 4, write 4
    dq = q * (FP32 + n * acc + FP32 + c)
    dkv = 2 * kv * (FP32 + acc + (n - 1) * (acc / 2 + copy) + n * copy + FP32 + c)
    return np.where(n > 1, dq + dkv, 0.0)


def ring_comm_exposed_s(
    kv_elems: Any, cp: Any, c: int, bw: Any, lat: Any, attn_fwd_s: Any, fwd_passes: Any
) -> np.ndarray:
    """Exposed seconds of one layer's ring collectives (module docstring): per forward pass (`fwd_passes`: 1, 2 with
    full recompute) the all-gather of cat(K, V) (cp chunks of 2 kv_elems c bytes) beyond step 0's SDPA
    (`attn_fwd_s` / cp); in the backward the same all-gather beyond one backward step (2.5 forwards: perf_terms
    ATTN_BWD_FWD_RATIO), the cp - 1 fp32 dK/dV sends beyond one backward step each, and the last send whole."""
    n = np.asarray(cp, dtype=np.float64)
    kv = np.asarray(kv_elems, dtype=np.float64)
    gather = ring_s("all_gather", n, n * 2 * kv * c, bw, lat)
    send = 2 * kv * FP32 / bw + lat  # one permute: each rank sends its buffer to the next
    fwd_step = np.asarray(attn_fwd_s, dtype=np.float64) / np.maximum(n, 1)
    bwd_step = ATTN_BWD_FWD_RATIO * fwd_step
    hidden = np.maximum(gather - fwd_step, 0.0) * fwd_passes + np.maximum(gather - bwd_step, 0.0)
    exposed = hidden + (n - 1) * np.maximum(send - bwd_step, 0.0) + send
    return np.where(n > 1, exposed, 0.0)


# bench_model's CP (bench_model/parallel/context_parallel.py @ 589f8f65, "allgather_mask"): `_AllGatherSeq` all-gathers
# K and V (one all_gather_into_tensor each, async_op=False: the SDPA waits for it) and its backward reduce-scatters dK
# and dV the same way; K/V are gathered at the KV heads (SDPA's enable_gqa, or repeat_interleave after the gather).
# The one SDPA call takes an explicit boolean mask on global positions (`ContextParallelAttention.mask`): a kernel
# given an arbitrary mask computes every tile of the s/cp x s block (no causal tile skipping, Dao 2023 Sec 3.1.1 skips
# only under is_causal), twice the causal FLOPs. The mask's own reads are not priced.
ALLGATHER_MASK_FLOPS_FACTOR = 2.0


def allgather_mask_comm_s(kv_elems: Any, cp: Any, c: int, bw: Any, lat: Any, fwd_passes: Any) -> np.ndarray:
    """Exposed seconds of one layer's bench_model CP collectives: per forward pass two all-gathers (K, V) of cp chunks
    of `kv_elems` c bytes, in the backward two reduce-scatters of the same size, all on the critical path."""
    n = np.asarray(cp, dtype=np.float64)
    nbytes = n * np.asarray(kv_elems, dtype=np.float64) * c
    gather, scatter = ring_s("all_gather", n, nbytes, bw, lat), ring_s("reduce_scatter", n, nbytes, bw, lat)
    return np.where(n > 1, 2 * gather * fwd_passes + 2 * scatter, 0.0)

"""The unfused RoPE Megatron-Core runs for a YaRN model (GPT-OSS): the HBM bytes it moves beyond the fused kernel.

Why it is unfused. Megatron-Bridge's performance launcher turns RoPE fusion on for every recipe
(NVIDIA-NeMo/Megatron-Bridge scripts/performance/utils/overrides.py `_set_common_perf_overrides` @ v0.3.0:
`recipe.model.apply_rope_fusion = True`), but Megatron-Core's `apply_rotary_pos_emb` falls back to the unfused
implementation when the attention factor (`mscale`) is not 1, which Transformer Engine's fused RoPE does not take
(NVIDIA/Megatron-LM megatron/core/models/common/embeddings/rope_utils.py, "mscale=... is not supported by TE's fused
RoPE. Using unfused implementation.", added by 987395813b "Fixes for gpt-oss" 2025-11-22, first in core_v0.16.0). The
attention passes YaRN's concentration factor as mscale on the query and on the key (megatron/core/transformer/
attention.py @ core_v0.16.0: `mscale=_yarn_get_concentration_factor_from_config(self.config)`), which is
0.1 ln(32) + 1 = 1.3466 for GPT-OSS (`GPTOSSProvider`: position_embedding_type "yarn", yarn_rotary_scaling_factor 32,
yarn_mscale None -> `_yarn_get_mscale(32)`; Megatron-Bridge src/megatron/bridge/models/gpt_oss/gpt_oss_provider.py
@ v0.3.0). Containers: NeMo 26.02 ships Megatron-Core 0.16 (docs/releases/software-versions.md @ 067f987d); 25.11's
"dev:0.15.0" may predate the fallback (then its fused RoPE ignored the factor): priced unfused too, an assumption.

What it moves (`_apply_rotary_pos_emb_bshd` @ core_v0.16.0, per element of q or k, c bytes each; the cos/sin tables
are [s, 1, 1, d], negligible):
  forward  t * cos (read + write: 2c); _rotate_half = -x2 (half read + half write: c) and cat((-x2, x1)) (2c);
           * sin (2c); + (read 2, write 1: 3c); cat((t, t_pass)) with an empty t_pass, a copy (2c)       = 12c
  backward autograd of the same: grad * sin (2c), neg (c), the chunk's backward cat (2c), grad * cos (2c), and the
           sum of the two branches' gradients into t's (3c); the cats' and the add's backward are views     = 10c
against TE's fused kernel, one read and one write each way (2c + 2c). Extra: 10c forward, 8c backward, per element,
over the q and k heads of the rank (num_heads + num_kv_heads) * head_dim / tp; a full-recompute forward re-runs the
forward. Not counted in `perf_terms.elementwise_bytes_per_token` (which prices the fused RoPE) nor scaled by the
compile factor (these kernels are the unfused ones).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec

UNFUSED_ROPE_FWD_EXTRA = 10.0  # element accesses beyond the fused kernel's read + write, forward (module doc)
UNFUSED_ROPE_BWD_EXTRA = 8.0  # the same, backward (module doc)


def unfused_rope_extra_bytes(model: ModelSpec, c: int, tp: Any, full: Any = 0.0) -> np.ndarray:
    """HBM bytes per token per layer the unfused RoPE moves beyond the fused one, forward + backward (+ the forward
    again on the `full`-recompute share of layers): 0 for a model without a YaRN attention factor."""
    full = np.asarray(full, dtype=np.float64)
    if model.attention != "gqa" or model.rope_attention_factor == 1.0:
        return np.zeros_like(full)
    elems = (model.num_heads + model.num_kv_heads) * model.head_dim / np.asarray(tp, dtype=np.float64)
    return elems * c * (UNFUSED_ROPE_FWD_EXTRA * (1.0 + full) + UNFUSED_ROPE_BWD_EXTRA)

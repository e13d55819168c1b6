"""The clamp Megatron-Core runs outside its fused gated activation (GPT-OSS): the HBM bytes it moves per routed copy.

Where. GPT-OSS clamps the gate half at +7 and the linear half at [-7, 7] before its quick-GeGLU (openai/gpt-oss-120b
config.json swiglu_limit 7.0; Megatron-Bridge gpt_oss_bridge.py: `activation_func_clamp_value = 7.0`, quick_gelu,
glu_linear_offset 1.0, bias_activation_fusion True). Megatron's experts call `weighted_bias_quick_geglu_impl`
(megatron/core/transformer/moe/experts.py TEGroupedMLP), which fuses bias, GeGLU and the router weights into one
compiled kernel but applies the clamp before it in eager PyTorch (megatron/core/fusions/fused_bias_geglu.py @ d98e8a6,
the same since 2e29a5e1e3 "Add quick geglu activation for gpt-oss", 2025-09-09, so in every container here):
    x_glu, x_linear = input.chunk(2, -1)
    input = torch.cat((x_glu.clamp(min=None, max=clamp_value), x_linear.clamp(min=-clamp_value, max=clamp_value)), -1)

What it moves, per routed copy, in elements of width F (the expert width, /etp) at c bytes each:
  forward   two clamps (read F, write F each: 4F) and the cat (read 2F, write 2F: 4F)                     = 8F
  backward  each clamp's backward, grad where the input was inside the bounds (read the input F, read the
            grad F, write F: 6F for both; the 1-byte masks not counted), and the chunk's backward, which
            assembles the two halves' gradients into fc1's [copies, 2F] output gradient (read 2F, write 2F: 4F)  = 10F
A forward re-run (Megatron's moe_act recompute, full recompute) runs the forward again. Transformer Engine's fused
grouped MLP (train.fused_grouped_mlp) applies the clamp in the grouped GEMM's epilogue (TE ops/fused/grouped_mlp.py,
glu_clamp_max / glu_clamp_min of the cuDNN GeGLU kernels): none of these bytes there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec

CLAMP_FWD_ELEMS = 8.0  # F-wide element accesses of the forward's two clamps and cat (module doc)
CLAMP_BWD_ELEMS = 10.0  # the same of the backward: two clamp backwards and the chunk's backward (module doc)


def unfused_clamp_bytes(model: ModelSpec, routed: Any, etp: Any, c: int, reruns: Any = 0.0) -> np.ndarray:
    """HBM bytes of one MoE layer's eager clamp for `routed` copies on the rank (the busiest rank's load), forward +
    backward, + `reruns` forwards again (recompute): 0 for a model without model.glu_clamp."""
    reruns = np.asarray(reruns, dtype=np.float64)
    if model.glu_clamp is None or not model.is_moe:
        return np.zeros_like(reruns)
    width = model.moe_ffn_hidden_size / np.asarray(etp, dtype=np.float64)
    elems = np.asarray(routed, dtype=np.float64) * width
    return elems * c * (CLAMP_FWD_ELEMS * (1.0 + reruns) + CLAMP_BWD_ELEMS)

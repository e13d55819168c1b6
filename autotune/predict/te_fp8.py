"""What Transformer Engine's low-precision recipes change outside the GEMMs (frameworks whose
`FrameworkProfile.fp8_casts()` is "te": Megatron-Core, DeepSpeed through TE). Pure, vectorised over candidates.

Sources (NVIDIA/TransformerEngine @ d0067d0, Aug 2026):
- Operand layouts. A Hopper FP8 GEMM takes TN operands only, so each FP8 tensor the forward and the backward both use is
  written twice, rowwise and transposed. On Blackwell data-centre parts (compute capability 10.x; 11.x and >= 13 too)
  FP8 GEMMs take any layout: `transformer_engine/pytorch/utils.py is_non_tn_fp8_gemm_supported`, and the tensorwise
  quantizers then write the rowwise data only (`csrc/quantizer.cpp` Float8Quantizer / Float8CurrentScalingQuantizer
  `create_tensor`: with_transpose = columnwise_usage && !is_non_tn_fp8_gemm_supported). Block-scaled recipes keep two
  copies everywhere: MXFP8's 1x32 scales and NVFP4's 1x16 scales run along K, which differs between the forward GEMM
  and the backward ones (MXFP8Quantizer / NVFP4Quantizer rowwise + columnwise data). The preset says which GPUs:
  `cluster.fp8_non_tn_gemm`.
- Sequence-parallel all-gathers. With sequence parallelism TE quantizes before it gathers: the column-parallel linear's
  input in forward (`module/linear.py` / `layernorm_linear.py`: input_quantizer, then
  `distributed.gather_along_first_dim(..., quantizer=...)`, NCCL or Userbuffers alike; re-gathered the same way for
  wgrad) and the row-parallel linear's grad_output in backward (`module/base.py grad_output_preprocess`), each moving
  the recipe's bytes: `_all_gather_fp8` the 1-byte data only (the scale is shared), `_all_gather_mxfp8` data + E8M0
  scales, `_all_gather_nvfp4` packed 4-bit data + E4M3 scales. The reduce-scatters (row-parallel output, column-parallel
  dgrad) stay in the compute dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.types import FP8_RECIPES, ClusterSpec
from autotune.predict.perf_terms import CAST_FUSED_EXTRA_BYTES

# HBM / wire bytes per element of one low-precision copy, scales included (a 1-byte E8M0 scale per 32 for MXFP8, a
# 1-byte E4M3 scale per 16 for NVFP4; tensorwise carries one scalar): the same table as a fused cast's write
LOWP_BYTES: dict[str, float] = CAST_FUSED_EXTRA_BYTES


def lowp_bytes(recipe_codes: Any) -> np.ndarray:
    """Bytes per element of one low-precision copy under each row's recipe (LOWP_BYTES; 0 for none)."""
    codes = np.asarray(recipe_codes)
    return np.select([codes == i for i in range(len(FP8_RECIPES))], [LOWP_BYTES[r] for r in FP8_RECIPES], 0.0)


def te_cast_layouts(recipe_codes: Any, cluster: ClusterSpec) -> np.ndarray:
    """Low-precision copies TE writes per cast (module doc): 1 for tensorwise FP8 where the GPU's FP8 GEMMs take any
    layout (cluster.fp8_non_tn_gemm), else 2 (rowwise + transposed / columnwise)."""
    codes = np.asarray(recipe_codes)
    one = bool(getattr(cluster, "fp8_non_tn_gemm", False)) & (codes == FP8_RECIPES.index("tensorwise"))
    return np.where(one, 1.0, 2.0)


def te_tp_gather_bytes(recipe_codes: Any, c: int, sequence_parallel: Any) -> np.ndarray:
    """Bytes per element of a tensor-parallel all-gather under TE (module doc): the recipe's low-precision bytes where
    a recipe runs with sequence parallelism, else the compute dtype's `c`."""
    codes = np.asarray(recipe_codes)
    quantized = (codes != 0) & np.asarray(sequence_parallel, dtype=bool)
    return np.where(quantized, lowp_bytes(codes), float(c))


# The routed experts under a TE recipe (Megatron-Core TEGroupedMLP -> TE GroupedLinear, NVIDIA/TransformerEngine
# transformer_engine/pytorch/module/grouped_linear.py `_GroupedLinear`): the forward quantizes the permuted input of
# every expert split, `tex.split_quantize(inp_view, m_splits, input_quantizers)`, the backward the permuted
# grad_output, `tex.split_quantize(grad_output_view, ctx.m_splits, ctx.grad_output_quantizers)`: every routed copy's
# fc1 input (h) and fc2 grad_output (h) is cast, k per token, and fc2's input (F) and fc1's grad_output (2F) per copy;
# the dense count (te_fp8_cast_bytes) casts one token's fc1 input and fc2 grad_output at width ffn_hidden_size. The
# expert weights are cast once per step (`update_workspace = is_first_microbatch is None or is_first_microbatch`),
# all E/ep experts of the rank, not the dense count's 3hf/tp.
def te_expert_cast_extra_bytes(
    model: Any,
    c: int,
    tokens: Any,
    copies: Any,
    recipe: Any,
    layouts: Any,
    micro_batches: Any,
    tp: Any,
    ep: Any,
    etp: Any,
    sp: Any,
    fused_mlp: Any = False,
) -> np.ndarray:
    """HBM bytes of one MoE layer's casts per micro-batch beyond te_fp8_cast_bytes' dense MLP count (above): the
    busiest rank's `copies` routed copies (fc1 input h, fc2 input F/etp, fc1 grad_output 2F/etp, fc2 grad_output h)
    and the shared expert's tokens (its own fc1 input, 3S/tp, h) where it has one, minus the dense MLP's (fc1 input
    h/tp under sequence parallelism, else h; 3f/tp; h); weights: the rank's E/(ep etp) experts' 3hF plus the shared
    3hS/tp minus the dense 3hf/tp, once per step (/ micro_batches). Each element read at c, written `layouts` times at
    the recipe's bytes; 0 where no recipe runs. Zero-sum for a dense-equivalent split: Qwen3-30B-A3B (f = kF) at tp 1
    keeps only the (k - 1) extra copies of h twice. Under TE's fused grouped MLP (`fused_mlp`, train.fused_grouped_mlp)
    the fc1 GEMM's epilogue writes fc2's quantized input and the fc2 dgrad GEMM's epilogue fc1's quantized
    grad_output (transformer_engine/pytorch/ops/fused/grouped_mlp.py: the grouped GEMM + GLU kernel's row / column
    quantized D outputs, the dGLU kernel's quantized dC): those two casts (F and 2F per copy) are no separate kernel."""
    codes = np.asarray(recipe)
    h, f, big_f = model.hidden_size, model.ffn_hidden_size, model.moe_ffn_hidden_size
    s_w = model.moe_shared_expert_ffn_hidden_size
    tp, etp = np.asarray(tp, dtype=np.float64), np.asarray(etp, dtype=np.float64)
    cast = c + np.asarray(layouts, dtype=np.float64) * lowp_bytes(codes)
    tokens = np.asarray(tokens, dtype=np.float64)
    shared = 1.0 if s_w > 0 else 0.0
    dense_in = h / np.where(np.asarray(sp, dtype=bool), tp, 1.0)
    inner = np.where(np.asarray(fused_mlp, dtype=bool), 0.0, 3.0 * big_f / etp)  # fc2 input F, fc1 grad_output 2F
    routed = np.asarray(copies, dtype=np.float64) * (2.0 * h + inner)
    acts = routed + tokens * (shared * (dense_in + 3.0 * s_w / tp + h) - (dense_in + 3.0 * f / tp + h))
    weights = 3.0 * h * (big_f * model.num_experts / (np.asarray(ep) * etp) + (s_w - f) / tp)
    return np.where(codes == 0, 0.0, (acts + weights / np.asarray(micro_batches, dtype=np.float64)) * cast)

"""FP8 terms of the step-time model (autotune.predict.perf uses them; re-exported by perf_terms): which linears run on
the low-precision peak, at what efficiency, and the bytes their casts move.

- FP8 linears (plan.fp8, torchao 0.18 `torchao/float8/float8_linear.py` `matmul_with_hp_or_float8_args`): the block
  linears' GEMMs run on the FP8 tensor-core peak; each linear casts six tensors per step with dynamic scaling
  (forward: input, weight; backward: grad_output twice (dim0 for grad_input, dim1 for grad_weight), weight for
  grad_input, input for grad_weight), each cast an amax pass (read c bytes) plus the scaled cast (read c, write 1
  byte): `fp8_cast_bytes`, priced at HBM bandwidth like the other memory-bound kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.types import FP8_RECIPES, ClusterSpec

# torchao 0.18 float8_linear.py: 6 dynamic casts per linear per step, 2 of each activation-sized operand
# (input, grad_output) and 2 of the weight; a cast = amax read (c) + cast read (c) + fp8 write (1 byte) per element.
FP8_CASTS_PER_OPERAND = 2


def fp8_linear_elements(model: ModelSpec, tp: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input elements per token, output elements per token, weight elements) summed over one block's linears on one
    TP rank. Column-parallel linears (wq, wk, wv, w1, w3 / GPT qkv, fc1) see the full input and 1/tp of the output;
    row-parallel ones (wo, w2 / proj, fc2) 1/tp of the input and the full output (Megatron, Shoeybi et al. 2019 Sec 3).
    torchao casts each linear's input itself, so wq, wk and wv each cast the same normed x. The query / attention
    output width is q_dim = heads x head_dim, which Qwen3 and GPT-OSS decouple from h (Qwen3-235B: 64 x 128 = 8192 on
    h 4096; HF config.json head_dim): wq writes and wo reads q_dim, not h (MLA's projections are not modelled here)."""
    h, f, k, q = model.hidden_size, model.ffn_hidden_size, model.kv_dim, model.q_dim
    tp = np.asarray(tp, dtype=np.float64)
    if model.block == "gpt":  # qkv h->q+2k, fc1 h->f (column); proj q->h, fc2 f->h (row); multi-head: q = k = h
        col_in, col_out, row_in, row_out = 2 * h, q + 2 * k + f, q + f, 2 * h
        weights = 2 * h * (q + k) + 2 * h * f
    else:  # wq h->q, wk/wv h->k, w1/w3 h->f (column); wo q->h, w2 f->h (row)
        col_in, col_out, row_in, row_out = 5 * h, q + 2 * k + 2 * f, q + f, 2 * h
        weights = 2 * h * q + 2 * h * k + 3 * h * f
    return col_in + row_in / tp, col_out / tp + row_out, weights / tp


# HBM bytes per element of one cast, beyond the c-byte read of the source, by recipe code (FP8_RECIPES order):
# tensorwise / rowwise (torchao): a separate amax pass reads the source again (c) and the cast writes 1 byte;
# mxfp8: the block's amax is taken inside the cast kernel (a 32-element block is in registers: Transformer Engine's
# and torchao's MX quantize kernels read once), 1 byte + one E8M0 scale per 32; nvfp4: half a byte + one E4M3 scale
# per 16, plus the per-tensor amax pass (c) that sets its fp32 global scale (NVIDIA's NVFP4 recipe).
CAST_EXTRA_BYTES: dict[str, Any] = {
    "none": lambda c: 0.0,
    "tensorwise": lambda c: c + 1.0,
    "rowwise": lambda c: c + 1.0,
    "mxfp8": lambda c: 1.0 + 1.0 / 32,
    "nvfp4": lambda c: c + 0.5 + 1.0 / 16,
}


# the ClusterSpec peak each recipe's GEMMs run at (None on a preset = the recipe is rejected, rule fp8_needs_peak)
RECIPE_PEAK_FIELD: dict[str, str] = {
    "tensorwise": "peak_flops_fp8",
    "rowwise": "peak_flops_fp8",
    "mxfp8": "peak_flops_mxfp8",
    "nvfp4": "peak_flops_nvfp4",
}


def linear_efficiency_factor(recipe_codes: Any, cluster: ClusterSpec) -> np.ndarray:
    """Multiplier on matmul_efficiency for the block linears: cluster.lowp_gemm_efficiency where a low-precision
    recipe runs, 1 for none (and for a preset that does not state it). Why below 1: an FP8/FP4 GEMM does the same
    tile work in fewer cycles, so the fixed costs per tile (the epilogue writing the BF16 output, loading scales,
    the wave-quantisation tail) are a larger share; cuBLAS FP8 GEMMs of LLM shapes on H100 reach ~1.3-1.6x the BF16
    rate rather than the 2x of the peaks (NVIDIA Transformer Engine FP8 primer; Micikevicius et al. 2022 "FP8 Formats
    for Deep Learning" Sec 5 report 1.3-1.5x end to end). Fitted on the FP8/MXFP8/NVFP4 rows (fit_reference).
    Rowwise scaling (torchao's rowwise recipe) also pays cluster.rowwise_gemm_efficiency: its GEMMs scale every
    output element by a row and a column scale in the epilogue (torch._scaled_mm's rowwise path, a CUTLASS kernel
    on Hopper rather than cuBLAS's per-tensor one), so they run slower than tensorwise ones: torchtitan's Llama-3-8B
    on 8 H100 (pytorch/torchtitan commit 7a04053, Jan 2025) ran 5,760 tok/s bf16, 6,424 rowwise, 7,186 tensorwise."""
    codes = np.asarray(recipe_codes)
    f = cluster.lowp_gemm_efficiency
    row = cluster.rowwise_gemm_efficiency
    base = np.where(codes == 0, 1.0, 1.0 if f is None else float(f))
    return base * np.where(codes == FP8_RECIPES.index("rowwise"), 1.0 if row is None else float(row), 1.0)


def linear_peak_flops(recipe_codes: Any, cluster: ClusterSpec, peak: float) -> np.ndarray:
    """FLOP/s of the block linears per row: the recipe's tensor-core peak; `peak` (the compute dtype's) for none and
    for a preset without that recipe's peak (such rows are rejected by the rule fp8_needs_peak)."""
    codes = np.asarray(recipe_codes)
    peaks = [peak] + [getattr(cluster, RECIPE_PEAK_FIELD[r]) or peak for r in FP8_RECIPES[1:]]
    return np.select([codes == i for i in range(len(FP8_RECIPES))], peaks, peak).astype(np.float64)


# Fused casts (plan.compile: Inductor fuses torchao's amax and scaled cast into the kernel that produces the tensor;
# Megatron-Core + Transformer Engine do the same by hand: LayerNormLinear's fused norm+cast, the fused SwiGLU+cast
# and cast-transpose kernels): the separate amax pass disappears, the source read and the low-precision write remain.
CAST_FUSED_EXTRA_BYTES: dict[str, float] = {
    "none": 0.0,
    "tensorwise": 1.0,
    "rowwise": 1.0,
    "mxfp8": 1.0 + 1.0 / 32,
    "nvfp4": 0.5 + 1.0 / 16,
}


def recipe_cast_bytes(recipe_codes: Any, c: int, casts: Any, fused: Any = False) -> np.ndarray:
    """Bytes of `casts` element casts under each row's recipe: the source read (c) plus CAST_EXTRA_BYTES, or plus
    CAST_FUSED_EXTRA_BYTES where `fused` (compiled / hand-fused kernels)."""
    codes = np.asarray(recipe_codes)
    conds = [codes == i for i in range(len(FP8_RECIPES))]
    eager = np.select(conds, [c + CAST_EXTRA_BYTES[r](c) for r in FP8_RECIPES], 0.0)
    fused_b = np.select(conds, [c + CAST_FUSED_EXTRA_BYTES[r] for r in FP8_RECIPES], 0.0)
    per = np.where(np.asarray(fused, dtype=bool), fused_b, eager)
    return np.where(codes == 0, 0.0, per * np.asarray(casts, dtype=np.float64))


def fp8_cast_bytes(
    model: ModelSpec, c: int, tp: Any, tokens: Any, full_recompute: Any, recipe: Any = 1, fused: Any = False
) -> np.ndarray:
    """HBM bytes of one block's low-precision casts for one micro-batch of `tokens` tokens: 2 casts each of input,
    grad_output and weight (forward + backward), + 1 more of input and weight when full recompute re-runs the forward;
    bytes per element by recipe (`recipe_cast_bytes`; code 1 = tensorwise)."""
    x, y, w = fp8_linear_elements(model, tp)
    extra = np.asarray(full_recompute, dtype=np.float64)  # the share of layers re-run (recompute_share.py)
    tokens = np.asarray(tokens, dtype=np.float64)
    casts = (
        tokens * ((FP8_CASTS_PER_OPERAND + extra) * x + FP8_CASTS_PER_OPERAND * y) + (FP8_CASTS_PER_OPERAND + extra) * w
    )
    return recipe_cast_bytes(recipe, c, casts, fused)


# Transformer Engine's casts (Megatron-Core, FrameworkProfile.fp8_casts() == "te"): one kernel writes every operand
# layout a tensor's GEMMs need (TE's cast_transpose / quantize with rowwise + columnwise usage), so each activation is
# read once and written `layouts` times in low precision (autotune/predict/te_fp8.py te_cast_layouts: 2 on Hopper and
# for block-scaled recipes, 1 for tensorwise FP8 on Blackwell), not cast twice as torchao does. The fused QKV
# (linear_qkv) and fc1 (w1|w3) are LayerNormLinear modules: under the current-scaling, MXFP8 and NVFP4 quantizers the
# norm kernel writes its compute-dtype output (and the amax) and a quantize kernel reads it back (TE
# csrc/extensions/normalization.cpp, Impl::FUSED_NORM_AMAX_FP8 / UNFUSED / FUSED_NORM_AMAX_NVFP4: "compute norm and
# amax in high precision, then quantize"; only delayed scaling writes FP8 from the norm kernel itself, and
# Megatron-Bridge's perf recipes run current scaling, scripts/performance/utils/precision.py), so those inputs read c
# like the others; with sequence parallelism the norm and its quantize run on the local 1/tp of the tokens before the
# all-gather (TE layernorm_linear.py). Weights are cast once per optimizer step and reused by the other micro-batches
# (Megatron-Core sets TE's is_first_microbatch from the schedule: megatron/core/transformer/module.py).
# Not modelled: Hopper's transpose of the gathered FP8 input under sequence parallelism (TE distributed.py
# _all_gather_fp8 makes the columnwise copy after the gather).
def te_fp8_cast_bytes(
    model: ModelSpec,
    c: int,
    tp: Any,
    tokens: Any,
    full_recompute: Any,
    recipe: Any,
    micro_batches: Any,
    layouts: Any = 2.0,
    sp: Any = False,
) -> np.ndarray:
    """HBM bytes of one block's Transformer Engine casts for one micro-batch (see above): every operand cast reads c
    and writes `layouts` x the recipe's bytes: the norm-fused inputs of linear_qkv and linear_fc1 (2h per token, /tp
    under sequence parallelism `sp`), the row-parallel inputs ((q_dim + f)/tp), every grad_output (fp8_linear_elements'
    output count), and the weights 1/micro_batches of that; full recompute casts the inputs once more. Bytes per
    written element: CAST_FUSED_EXTRA_BYTES (scales included)."""
    h, f = model.hidden_size, model.ffn_hidden_size
    row = model.q_dim  # wo's input width (fp8_linear_elements)
    _, y, w = fp8_linear_elements(model, tp)
    codes = np.asarray(recipe)
    low = np.select([codes == i for i in range(len(FP8_RECIPES))], [CAST_FUSED_EXTRA_BYTES[r] for r in FP8_RECIPES])
    tp = np.asarray(tp, dtype=np.float64)
    cast = c + np.asarray(layouts, dtype=np.float64) * low  # bytes per element cast: read c, write the copies
    norm_in = 2 * h / np.where(np.asarray(sp, dtype=bool), tp, 1.0)
    inputs = (1.0 + np.asarray(full_recompute, dtype=np.float64)) * (norm_in + (row + f) / tp) * cast
    per_mb = np.asarray(tokens, dtype=np.float64) * (inputs + y * cast) + w * cast / micro_batches
    return np.where(codes == 0, 0.0, per_mb)

"""bench_model's activation bytes per layer and token (the terms autotune/predict/frameworks/bench_model.py's profile
hooks return; that module's docstring derives each one): a Llama / GPT / MLA layer's saved tensors with and without
recompute, what torch.compile's partitioner and FP8 linears do not keep. Other profiles delegate to these where their
trainer saves the same (torchtitan, DeepSpeed).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import RECOMPUTE_CODE

_NONE, _SEL = RECOMPUTE_CODE["none"], RECOMPUTE_CODE["selective"]  # anything else is full recompute


def compiled_savings_per_token(model: ModelSpec, tp: Any, sp: Any, act_bytes: int) -> np.ndarray:
    """Bytes per token one Llama layer (no recompute) does NOT keep when the block runs under torch.compile: AOTAutograd's
    min-cut partitioner (Ansel et al. 2024, "PyTorch 2", ASPLOS, Sec 4.2: recompute cheap pointwise ops in the backward
    instead of saving their outputs) rebuilds each RMSNorm's fp32 copy and normalised output from the norm's input,
    which it keeps instead ((4 + c)h - ch = 4h per norm; at c = 4 the copy is the input itself and the output 4h
    goes: 4h too), and SwiGLU's silu output from w1's (cf/t). Measured with saved_tensors_hooks on one bench_model
    block, bf16, CPU Inductor, torch 2.13 (h 256, f 2h and 4h, kv h/2 and h): eager 54.66h, compiled 36.41h per token
    at f = 4h; difference 2c h + 8h + cf + 0.25h (the first norm's input is the block's input, kept in a stack by the
    previous layer's count: 2ch; RoPE casts 0.25h, not modelled). On Llama-3.2-1B (f = 4h) that is 16h per token and
    layer, the 2 GiB per 4,096-token sequence over 16 layers the H200 runs show (63 vs 71 GiB at mbs 4)."""
    t = np.asarray(tp, dtype=np.float64)
    if model.block != "llama":
        return np.zeros(np.shape(t))  # Korthikanti's GPT block: not measured under compile
    return 2 * 4.0 * model.hidden_size / np.where(sp, t, 1.0) + act_bytes * model.ffn_hidden_size / t


def fp8_compiled_saving_per_token(model: ModelSpec, tp: Any, sp: Any, act_bytes: int) -> np.ndarray:
    """Bytes per token one Llama layer (no recompute, plan.compile) does NOT keep when its linears are torchao float8
    (tensorwise or rowwise; bench_model/parallel/float8.py). torchao 0.18's Float8Linear saves its high-precision input
    and uses it in backward only through its fp8 cast (torchao/float8/float8_linear.py
    `matmul_with_hp_or_float8_args`); under torch.compile AOTAutograd's min-cut partitioner then rebuilds, in the
    backward, the inputs a cheap op makes from tensors it keeps anyway, cast included, instead of saving them: the two
    RMSNorm outputs (wq/wk/wv's and w1/w3's input, from the norm input and rsqrt: 2ch) and SwiGLU's product (w2's
    input, from the w1 and w3 outputs: cf/t). Eager keeps all of them (saved bytes equal bf16's). Measured with
    saved_tensors_hooks on one bench_model block, bf16, CPU Inductor, torch 2.13, torchao 0.18 (h 256, f 4h, 4
    heads, 2 KV heads, seq 128, mbs 2): compiled bf16 38.59h, compiled tensorwise 26.59h bytes per token, difference
    12.0h = 4h + 2f; the scales it keeps are 14 scalars. The H200 rows (h200_bench_model_2026-11-25.csv, compiled,
    recompute none) agree: Llama-3.2-1B mbs 4 41.6 -> 35.6 GiB (4h + 2f over 16 layers x 16,384 tokens = 6.0 GiB),
    3B mbs 2 75.69 -> 69.57 GiB (6.125 GiB predicted). With sequence parallelism the norm outputs are the all-gathered
    inputs, which a collective produces and the partitioner does not recompute: only w2's input goes. Not measured at
    tp > 1 nor with selective recompute (its regions already drop what they can): no saving assumed there."""
    t = np.asarray(tp, dtype=np.float64)
    if model.block != "llama":
        return np.zeros(np.shape(t))
    norms = np.where(np.asarray(sp, dtype=bool), 0.0, 2.0 * act_bytes * model.hidden_size)
    return norms + act_bytes * model.ffn_hidden_size / t


def layer_activation_bytes(
    model: ModelSpec, seq: Any, mbs: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int, compiled: Any = False
) -> dict[str, np.ndarray]:
    """Activation bytes one layer keeps per micro-batch (`saved`) and, for recompute, the extra bytes of the one layer
    being recomputed (`transient`). `seq` is tokens per rank (seq_len/cp); `recompute` is the integer code;
    `compiled` (plan.compile) removes what Inductor recomputes instead of saving (compiled_savings_per_token) from
    the no-recompute layer (and from full recompute's transient, which is that layer)."""
    s, b, t = (np.asarray(x, dtype=np.float64) for x in (seq, mbs, tp))
    sp, r = np.asarray(sp, dtype=bool), np.asarray(recompute)
    h, f, k, a = model.hidden_size, model.ffn_hidden_size, model.kv_dim, model.num_heads
    sbh = s * b * h
    if model.block == "gpt":  # Korthikanti et al. 2022 Table 2, 16-bit activations
        core = 5 * a * s / (h * t)
        kv = 4 * (1 - k / h)  # grouped K/V: the K and V tensors are 2k/h each instead of Table 2's 2 + 2
        none = sbh * np.where(sp, (34 - kv) / t, 10 + (24 - kv) / t) + sbh * core
        sel = none - sbh * core
        full = 2 * sbh / np.where(sp, t, 1)
        scale = act_bytes / 2
        none, sel, full = none * scale, sel * scale, full * scale
    else:  # Llama block, derived in the module docstring
        tok, c, q = (
            s * b,
            act_bytes,
            model.q_dim,
        )  # q: query and attention-output width (= h unless head_dim is decoupled)
        sp_div = np.where(sp, t, 1.0)
        attn = c * (2 * q + 2 * k) / t + 4.0 * a / t  # q, k, v, output; fp32 logsumexp per head
        rope = 4.0 * s * model.head_dim * c if c != 4 else 0.0  # cos/sin cast to bf16 for q and k, per call
        if model.attention == "mla":
            attn, rope = mla_attention_bytes(model, c, t), 4.0 * s * model.qk_rope_head_dim * c if c != 4 else 0.0
        none = tok * (2 * ((4 + c) * h + 4) / sp_div + 2 * c * h + attn + c * 4 * f / t) + rope
        sel = tok * (2 * c * h / sp_div + 2 * c * h + attn + c * 3 * f / t) + rope
        norm_internals = ((4 if c != 4 else 0) + c) * h + 4  # fp32 copy, output, rsqrt; bytes per token
        sel_transient = tok * np.maximum(norm_internals / sp_div, c * f / t)
        full = tok * c * h / sp_div
    none = none - np.where(compiled, s * b * compiled_savings_per_token(model, t, sp, act_bytes), 0.0)
    if model.block != "gpt":  # compiled selective: SwiGLU's product also recomputed (cf/t fewer than compiled none)
        sel = np.where(compiled, none - s * b * act_bytes * f / t, sel)
    saved = np.select([r == _NONE, r == _SEL], [none, sel], full)
    transient = np.select(
        [r == _NONE, r == _SEL],
        [np.zeros_like(none), sel_transient if model.block != "gpt" else np.maximum(none - sel, 0.0)],
        none,
    )
    return {"saved": saved, "transient": transient}


def mla_attention_bytes(model: ModelSpec, c: int, t: Any = 1) -> Any:
    """Bytes per token that bench_model's multi-head latent attention (bench_model/mla.py; DeepSeek-V2, arXiv
    2405.04434 Sec 2.1, Eqs. 9-14) keeps for backward beyond its input, in place of GQA's q, k, v, output and
    logsumexp. n heads (per-head tensors /t where a framework splits heads over tp; bench_model runs MLA at tp=1),
    dn/dr/dv the nope/rope/v head dims, qr/kr the q/kv LoRA ranks, c the compute dtype's bytes:
      query path   q_norm (fp32 input 4qr, rsqrt 4, output c qr) and its scaled output for wq_b (c qr), when
                   q_lora_rank > 0 (RoPE multiplies by constant tables: it keeps the tables, not q_pe or k_pe);
      latent       kv_norm's fp32 input (4kr; in fp32 that is the wkv_a output itself, latent and rope key,
                   4(kr+dr)), rsqrt 4, output c kr and scaled output c kr (wkv_b's input): the compressed KV c_kv
                   the paper caches at inference, kept here for backward;
      heads        wkv_b's output c n(dn+dv) (SDPA keeps v as a view of it), the concatenated q and k
                   (2 c n(dn+dr)), the attention output c n dv (wo's input) and the fp32 logsumexp 4n, as a flash
                   kernel keeps them (a GPU; CPU's math kernel keeps the s x s probabilities instead, see
                   tests/unit/test_memory_moe_measured.py).
    Per layer (the caller's `rope`): the cos/sin tables cast to the compute dtype per RoPE call, 4 s dr c."""
    n, dn, dr, dv = (
        model.num_heads / np.asarray(t, dtype=np.float64),
        *(float(x) for x in (model.qk_nope_head_dim, model.qk_rope_head_dim, model.v_head_dim)),
    )
    qr, kr = float(model.q_lora_rank), float(model.kv_lora_rank)
    query = (4.0 + 2 * c) * qr + 4.0 if qr else 0.0
    latent = (4.0 * (kr + dr) if c == 4 else 4.0 * kr) + 4.0 + 2 * c * kr
    heads = c * n * (dn + dv) + 2 * c * n * (dn + dr) + c * n * dv + 4.0 * n
    return query + latent + heads


def _sdpa_kv_widths(model: ModelSpec) -> tuple[float, float]:
    """Per-token widths of the K and V that bench_model's SDPA receives: GQA keeps num_kv_heads (enable_gqa=True,
    bench_model/model.py `causal_sdpa`), MLA its per-head nope + rope keys and v heads (bench_model/mla.py)."""
    if model.attention == "mla":
        n = float(model.num_heads)
        return n * (model.qk_nope_head_dim + model.qk_rope_head_dim), n * model.v_head_dim
    return float(model.kv_dim), float(model.kv_dim)


def context_parallel_saved_bytes(model: ModelSpec, seq: Any, mbs: Any, tp: Any, cp: Any, act_bytes: int) -> np.ndarray:
    """[CPMEM] Bytes one layer keeps for backward under bench_model's exact CP (bench_model/parallel/
    context_parallel.py `ContextParallelAttention.__call__`) beyond the cp = 1 count of `layer_activation_bytes`
    (which has K and V at the local seq = seq_len/cp tokens):
      gathered K/V  `_AllGatherSeq` hands SDPA K and V of all cp ranks, (B, heads_kv/t, cp*seq, D), a fresh tensor
                    (its `flatten(2, 3)` of the rank-major buffer copies); SDPA saves them, not the local ones: (cp - 1)
                    more K and V tokens, c (k_w + v_w)/t bytes each (K/V at the KV heads: enable_gqa);
      float mask    the (seq, cp*seq) bool mask is turned by every SDPA call into an additive mask in the query dtype
                    (aten/src/ATen/native/transformers/attention.cpp `convert_boolean_attn_mask`: at::where(mask, 0,
                    -inf) of that dtype), which the fused kernels save for their backward (CPU flash, CUDA
                    efficient and cuDNN attention take attn_mask/attn_bias; the CUDA ones accept GQA with a mask:
                    cuda/sdp_utils.cpp `can_use_cudnn_attention`, `can_use_mem_efficient_attention`): c seq (cp seq)
                    per layer, broadcast over batch and heads (not x mbs, not /t).
    Measured with saved_tensors_hooks on the tiny model (h 128, 4 of 8 KV heads, bf16, seq 1024, cp 2, fake process
    group, torch 2.13 CPU): layer 0 keeps 1,179,648 bytes more than half its cp = 1 bytes, = 131,072 (K/V) +
    1,048,576 (the (512, 1024) bf16 mask). Zero at cp = 1 (bench_model then calls causal SDPA without a mask).
    MLA under CP is counted the same way but not checked: on CPU its unequal q/k and v head dims send SDPA to the math
    path, which keeps the (seq, cp seq) probabilities per head (tiny model with MLA heads, cp 2: 34.9 MB more saved
    per layer than at cp 1, this term 4.8 MB); a GPU's fused kernels do not."""
    s, b, t, n = (np.asarray(x, dtype=np.float64) for x in (seq, mbs, tp, cp))
    k_w, v_w = _sdpa_kv_widths(model)
    gathered = (n - 1) * s * b * act_bytes * (k_w + v_w) / t
    mask = act_bytes * s * (n * s)
    return np.where(n > 1, gathered + mask, 0.0)


def context_parallel_transient_bytes(model: ModelSpec, tokens: Any, tp: Any, cp: Any, act_bytes: int) -> np.ndarray:
    """[CPMEM] Bytes one layer's CP attention holds for a moment beyond a plain SDPA (`tokens` = seq_len/cp x mbs;
    u_k, u_v = local K, V bytes, tokens c k_w/t): the SDPA backward (the layer's peak) returns dK and dV at the
    gathered length, (cp - 1)(u_k + u_v) more than plain SDPA, while its saved K/V and mask are still alive. The
    reductions after it (`_AllGatherSeq.backward`: the rank-major contiguous copy, cp u, and this rank's slice, u)
    run once autograd has freed the SDPA node's saved tensors, the mask among them (c seq cp seq, larger whenever
    (cp + 1) mbs k_w/t < cp seq): no higher. Measured with MemTracker on the tiny model's attention modules (fake
    process group, 1,024 local tokens, bf16, u = 131,072 bytes): backward peak over the module's pre-backward
    819,200 bytes at cp 1, 1,081,344 at cp 2 (+2u), 1,605,632 at cp 4 (+6u)."""
    tok, t, n = (np.asarray(x, dtype=np.float64) for x in (tokens, tp, cp))
    k_w, v_w = _sdpa_kv_widths(model)
    return np.where(n > 1, (n - 1) * tok * act_bytes * (k_w + v_w) / t, 0.0)


def context_parallel_mask_bytes(seq: Any, cp: Any) -> np.ndarray:
    """[CPMEM] The bool mask (seq, cp*seq) `ContextParallelAttention.mask` builds on the first call and caches for every
    layer and step: 1 byte per element, once per rank."""
    s, n = np.asarray(seq, dtype=np.float64), np.asarray(cp, dtype=np.float64)
    return np.where(n > 1, s * n * s, 0.0)

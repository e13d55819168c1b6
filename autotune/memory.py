"""Worst-rank memory model (DESIGN.md "Memory model"): bytes per component for one training step.

Every formula exists once, vectorised over candidate arrays (`memory_arrays`); `estimate_memory` is the scalar wrapper
that calls it with length-1 arrays. Notation: Psi = parameters on this rank after the TP/PP split, D = dp*cp (the
ZeRO/FSDP sharding group: context-parallel ranks hold identical parameters, torchtitan's "dp_shard_cp"),
t = tp, s = seq_len/cp (tokens per rank), b = micro-batch size, h = hidden, f = ffn hidden, a = heads, k = kv_dim.

Model states (per rank; p, c, g, o, m = bytes of param, compute, grad, one optimizer state, master):
  trainer (train.master_dtype null; FSDP2/DDP as bench_model applies them):
    stage 0 (DDP)             params Psi*p, grads Psi*g, optimizer 2*Psi*o
    stage 1                   optimizer /D (each rank updates its slice, then all-gathers params)
    stage 2 (FSDP2, no reshard after fwd) params and grads /D too, plus the unsharded compute copy Psi*c kept fwd->bwd
    stage 3 (FSDP2, reshard)  everything /D; 2 layers gathered in compute dtype (current + prefetch) -> buffers
    compute copy: when c != p, stages 0-1 also hold a full Psi*c copy during fwd/bwd (separate term, `compute_copy`).
  paper accounting (train.master_dtype set; Megatron/DeepSpeed/ZeRO): params are the working copy (full until stage 3),
    master + optimizer states sharded from stage 1, grads from stage 2. With bf16 params/grads and fp32 master + Adam
    this is Rajbhandari et al. 2020 Sec 5 / Table 1: (2+2+K)*Psi, K=12; stage 1: 4Psi + 12Psi/D; stage 2:
    2Psi + 14Psi/D; stage 3: 16Psi/D.

Activations of the Llama block as bench_model/model.py implements it (RMSNorm in fp32 then cast back, wq/wk/wv with
GQA, rotate-half RoPE, F.scaled_dot_product_attention(is_causal=True, enable_gqa=True) so K/V stay at num_kv_heads,
wo, SwiGLU w2(silu(w1 x) * w3 x)), derived by the method of Korthikanti et al. 2022 ("Reducing Activation
Recomputation", Sec 4.1 / Table 2): count what autograd saves, per token (bytes; c = compute dtype bytes):
  each RMSNorm: its fp32 input x.float() (4h, kept by pow), the rsqrt per token (4 bytes) and the normalised y cast
             back (c*h, kept by `* weight`). Two norms: 2((4 + c)h + 4).
  norm outputs: the shared input of wq/wk/wv and of w1/w3 (c*h each): 2ch.
  attention: SDPA keeps q after RoPE (h), k after RoPE (k), v (k), its output (h) and logsumexp (4a bytes, fp32);
             the output is laid out (B, S, heads, D), so wo's input (its transpose-reshape) is a view of the same
             storage. RoPE multiplies by constant cos/sin tables, so pre-RoPE q/k are not kept; the tables cast to
             the compute dtype are kept per call (4*s*head_dim*c per layer, none in fp32). No s^2 scores.
  MLP:       w1 out (f, for silu'), silu out and w3 out (2f, for the product), product = w2 input (f).
  total: 2((4 + c)h + 4) + 2ch + c(2h + 2k + 4f) + 4a per token (+ the RoPE tables); a GPT block gives 34h + 5as (Korthikanti Table 2).
  TP divides the attention and MLP tensors (2h + 2k + 4f, and the heads of the logsumexp) by t. Sequence parallel
  (DTensor) divides the two norms' tensors by t, but autograd saves the all-gathered input of the column-parallel
  linears at full sequence length, so the 2ch of norm outputs stays (unlike Megatron SP, where Korthikanti's 34/t
  applies to everything).
  selective (bench_model/parallel/recompute.py, torchtitan "op" SAC): outputs of mm, SDPA and reduce-scatter are
             kept: layer input (ch, /t with SP) + q, k, v (c(h + 2k)/t) + wo and w2 outputs (full-sequence partial
             sums, 2ch) + w1, w3 outputs (2cf/t) + SDPA output (ch/t) + logsumexp + with SP the two reduce-scatter
             outputs (2ch/t); plus, once, the recomputed rest of one layer during its backward.
  full:      layer input only (ch, /t with SP), plus, once, one whole layer's activations during its recompute.
  CP divides s by cp. GPT blocks use Korthikanti Table 2 literally: sbh(10 + 24/t + 5as/(ht)), SP: sbh(34/t + 5as/(ht)),
  selective drops 5as/(ht), full 2sbh (2sbh/t with SP); these are for 2-byte activations and are scaled by c/2.
Pipeline (Korthikanti Eq. 5 and its interleaving note; Narayanan et al. 2021 Sec 2.2): the first stage of 1F1B holds
  min(pp, m) micro-batches in flight, interleaved 1F1B pp*(1 + (pp-1)/(pp*vpp)); the last rank holds 1 (1F1B) or
  ((vpp-1)*pp + 1)/vpp (its warm-up forwards, Megatron's interleaved schedule); GPipe holds all m. The worst rank is
  the larger of the first stage (embedding, most micro-batches) and the last (head, final norm, logits).
Logits: fp32 logits of b*s*V/t (vocab-parallel loss) plus their gradient on the last stage: 2 * 4 bytes per element.
Buffers: DDP bucket (25 MiB, torch DDP bucket_cap_mb default) for stages 0-1; FSDP2 reduce-scatter input of one layer
  (stage 2) plus two all-gathered layers (stage 3), in compute dtype. Runtime overhead (CUDA context, NCCL, cuBLAS
  workspace) is cluster.runtime_overhead_bytes; reserved = allocated * (1 + cluster.allocator_fragmentation) + overhead.
Not modelled: CP ring K/V receive buffers, transient bf16 gradients of one layer, optimizer-step temporaries.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from autotune.types import DTYPE_BYTES, ClusterSpec, MemoryEstimate, ModelSpec, ParallelPlan, TrainSpec
from autotune.plan_arrays import RECOMPUTE_CODE, SCHEDULE_CODE, arrays_from_plans

DDP_BUCKET_BYTES = 25 * 2**20  # torch DistributedDataParallel bucket_cap_mb=25 default
_NONE, _SEL, _FULL = RECOMPUTE_CODE["none"], RECOMPUTE_CODE["selective"], RECOMPUTE_CODE["full"]


def _dtype_bytes(train: TrainSpec) -> dict[str, int]:
    return {"p": DTYPE_BYTES[train.param_dtype], "c": DTYPE_BYTES[train.compute_dtype],
            "g": DTYPE_BYTES[train.grad_dtype], "o": DTYPE_BYTES[train.optimizer_dtype] * train.optimizer_states,
            "m": DTYPE_BYTES[train.master_dtype] if train.master_dtype else 0}


def model_state_arrays(num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec) -> dict[str, np.ndarray]:
    """Bytes of params, compute copy, grads and optimizer (incl. master) for `num_params` parameters on a rank, ZeRO
    stage `zero_stage`, sharding group size `shard` (= dp*cp). Takes raw counts so published tables that give only a
    parameter count (ZeRO paper, accelerate) can be checked with the same code the planner uses."""
    psi = np.asarray(num_params, dtype=np.float64)
    z = np.asarray(zero_stage)
    d = np.asarray(shard, dtype=np.float64)
    b = _dtype_bytes(train)
    paper = train.master_dtype is not None
    params_shard_from = 3 if paper else 2
    params = psi * b["p"] / np.where(z >= params_shard_from, d, 1.0)
    grads = psi * b["g"] / np.where(z >= 2, d, 1.0)
    optimizer = psi * (b["o"] + b["m"]) / np.where(z >= 1, d, 1.0)
    if paper:
        copy = np.where((z < 3) & (b["c"] != b["p"]), psi * b["c"], 0.0)
    else:  # stage 2 keeps the gathered compute-dtype params from forward through backward
        copy = np.where(z == 2, psi * b["c"], np.where((z < 2) & (b["c"] != b["p"]), psi * b["c"], 0.0))
    return {"params": params, "compute_copy": copy, "grads": grads, "optimizer": optimizer}


def rank_params(model: ModelSpec, tp: Any, pp: Any, vpp: Any) -> dict[str, np.ndarray]:
    """Parameters held by the first and the last pipeline rank (worst-case ceil split), plus one layer's local size."""
    tp, pp, vpp = (np.asarray(x, dtype=np.int64) for x in (tp, pp, vpp))
    matmul = model.matmul_params() - model.vocab_size * model.hidden_size  # all blocks' weight matrices
    per_layer_matmul = matmul // model.num_layers
    per_layer_repl = model.layer_params() - per_layer_matmul  # norms (and GPT biases): replicated across TP
    layer_local = per_layer_matmul / tp + per_layer_repl
    layers = layers_on_rank(model.num_layers, pp, vpp)
    vh_local = model.vocab_size * model.hidden_size / tp  # vocab-parallel embedding / head
    final_norm = model.num_params() - model.embedding_params() - model.head_params() - model.num_layers * model.layer_params()
    head_last = np.where(pp > 1, vh_local, 0.0) if model.tie_embeddings else vh_local  # tied: a copy on the last stage
    single = pp == 1
    first = layers * layer_local + vh_local + np.where(single, head_last + final_norm, 0.0)
    last = np.where(single, first, layers * layer_local + head_last + final_norm)
    return {"first": first, "last": last, "layer": layer_local}


def layers_on_rank(num_layers: int, pp: Any, vpp: Any) -> np.ndarray:
    pp, vpp = np.asarray(pp), np.asarray(vpp)
    return -(-num_layers // (pp * vpp)) * vpp  # ceil per virtual stage; uneven splits give the worst rank the ceil


def layer_activation_bytes(model: ModelSpec, seq: Any, mbs: Any, tp: Any, sp: Any, recompute: Any,
                           act_bytes: int) -> dict[str, np.ndarray]:
    """Activation bytes one layer keeps per micro-batch (`saved`) and, for recompute, the extra bytes of the one layer
    being recomputed (`transient`). `seq` is tokens per rank (seq_len/cp); `recompute` is the integer code."""
    s, b, t = (np.asarray(x, dtype=np.float64) for x in (seq, mbs, tp))
    sp, r = np.asarray(sp, dtype=bool), np.asarray(recompute)
    h, f, k, a = model.hidden_size, model.ffn_hidden_size, model.kv_dim, model.num_heads
    sbh = s * b * h
    if model.block == "gpt":  # Korthikanti et al. 2022 Table 2, 16-bit activations
        core = 5 * a * s / (h * t)
        none = sbh * np.where(sp, 34 / t, 10 + 24 / t) + sbh * core
        sel = none - sbh * core
        full = 2 * sbh / np.where(sp, t, 1)
        scale = act_bytes / 2
        none, sel, full = none * scale, sel * scale, full * scale
    else:  # Llama block, derived in the module docstring
        tok, c = s * b, act_bytes
        sp_div = np.where(sp, t, 1.0)
        lse = 4.0 * a / t
        rope = 4.0 * s * model.head_dim * c if c != 4 else 0.0  # cos/sin cast to bf16 for q and k, per call
        none = tok * (2 * ((4 + c) * h + 4) / sp_div + 2 * c * h + c * (2 * h + 2 * k + 4 * f) / t + lse) + rope
        sel = tok * (c * h / sp_div + c * (h + 2 * k) / t + 2 * c * h + 2 * c * f / t + c * h / t + lse
                     + np.where(sp, 2 * c * h / t, 0.0))
        full = tok * c * h / sp_div
    saved = np.select([r == _NONE, r == _SEL], [none, sel], full)
    transient = np.select([r == _NONE, r == _SEL], [np.zeros_like(none), np.maximum(none - sel, 0.0)], none)
    return {"saved": saved, "transient": transient}


def inflight_microbatches(pp: Any, vpp: Any, m: Any, schedule: Any) -> dict[str, np.ndarray]:
    """Micro-batches whose activations the first / last pipeline rank holds at its peak (in units of its layers)."""
    pp, vpp, m, sch = (np.asarray(x, dtype=np.float64) for x in (pp, vpp, m, schedule))
    inter = sch == SCHEDULE_CODE["interleaved_1f1b"]
    gpipe = sch == SCHEDULE_CODE["gpipe"]
    first = np.where(inter, pp * (1 + (pp - 1) / (pp * vpp)), pp)
    last = np.where(inter, ((vpp - 1) * pp + 1) / vpp, 1.0)
    first, last = np.minimum(first, m), np.minimum(last, m)
    first, last = np.where(gpipe, m, first), np.where(gpipe, m, last)
    single = pp == 1
    return {"first": np.where(single, 1.0, first), "last": np.where(single, 1.0, last)}


def memory_arrays(arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec,
                  cluster: ClusterSpec) -> dict[str, np.ndarray]:
    """Vectorised worst-rank memory for plan arrays (see `autotune.plan_arrays`). Keys: params (incl. compute_copy),
    compute_copy, grads, optimizer, activations, logits, buffers, overhead, allocated, reserved (all bytes)."""
    tp, pp, cp, vpp, z = arr["tp"], arr["pp"], arr["cp"], arr["vpp"], arr["zero_stage"]
    mbs, sp, rc = arr["micro_batch_size"], arr["sequence_parallel"], arr["recompute"]
    c = DTYPE_BYTES[train.compute_dtype]
    shard = arr["dp"] * cp
    psi = rank_params(model, tp, pp, vpp)
    seq = train.seq_len / cp
    layer_act = layer_activation_bytes(model, seq, mbs, tp, sp, rc, c)
    layers = layers_on_rank(model.num_layers, pp, vpp)
    inflight = inflight_microbatches(pp, vpp, arr["grad_accum_steps"], arr["pp_schedule"])
    tok = seq * mbs
    # last stage: the final RMSNorm's tensors ((4 + c)h, /t with SP) and the head's gathered input (ch)
    head_act = tok * model.hidden_size * ((4.0 + c) / np.where(sp, tp, 1) + c)
    logits = 2.0 * 4.0 * tok * model.vocab_size / tp
    layer_bytes = psi["layer"] * c
    buffers = np.select([z >= 3, z == 2], [3 * layer_bytes, layer_bytes],
                        np.where(shard > 1, float(DDP_BUCKET_BYTES), 0.0))
    out: dict[str, dict[str, np.ndarray]] = {}
    for stage in ("first", "last"):
        ms = model_state_arrays(psi[stage], z, shard, train)
        act = layers * layer_act["saved"] * inflight[stage] + layer_act["transient"]
        is_last = (pp == 1) | (stage == "last")
        act = act + np.where(is_last, head_act, 0.0)
        lg = np.where(is_last, logits, 0.0)
        params = ms["params"] + ms["compute_copy"]
        alloc = params + ms["grads"] + ms["optimizer"] + act + lg + buffers
        out[stage] = {"params": params, "compute_copy": ms["compute_copy"], "grads": ms["grads"],
                      "optimizer": ms["optimizer"], "activations": act, "logits": lg, "allocated": alloc}
    last_worse = out["last"]["allocated"] > out["first"]["allocated"]
    res = {k: np.where(last_worse, out["last"][k], out["first"][k]) for k in out["first"]}
    res["buffers"] = buffers * np.ones_like(res["allocated"])
    res["allocated"] = res["allocated"] + 0.0
    res["overhead"] = np.full_like(res["allocated"], float(cluster.runtime_overhead_bytes))
    res["reserved"] = res["allocated"] * (1.0 + cluster.allocator_fragmentation) + res["overhead"]
    res["worst_stage_is_last"] = last_worse
    return res


def estimate_memory(plan: ParallelPlan, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec) -> MemoryEstimate:
    m = memory_arrays(arrays_from_plans([plan]), model, train, cluster)
    return MemoryEstimate(
        params_bytes=float(m["params"][0]), grads_bytes=float(m["grads"][0]),
        optimizer_bytes=float(m["optimizer"][0]), activations_bytes=float(m["activations"][0]),
        logits_bytes=float(m["logits"][0]), buffers_bytes=float(m["buffers"][0]),
        overhead_bytes=float(m["overhead"][0]), fragmentation=cluster.allocator_fragmentation)

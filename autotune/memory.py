"""Worst-rank memory model (docs/memory_model.md "Modelling assumptions"): bytes per component for one training step.

Every formula exists once, vectorised over candidate arrays (`memory_arrays`); `estimate_memory` is the scalar wrapper
that calls it with length-1 arrays. Notation: Psi = parameters on this rank after the TP/PP split, D = dp*cp (the
ZeRO/FSDP sharding group: context-parallel ranks hold identical parameters, torchtitan's "dp_shard_cp"; with HSDP
D = dp_shard*cp, `shard_group`),
t = tp, s = seq_len/cp (tokens per rank), b = micro-batch size, h = hidden, f = ffn hidden, a = heads, k = kv_dim.

Model states (per rank; p, c, g, o, m = bytes of param, compute, grad, one optimizer state, master), as
bench_model/parallel/data_parallel.py applies them (FSDP2 per block + a root unit, MixedPrecisionPolicy(param_dtype=c,
reduce_dtype=fp32)) when train.master_dtype is null:
    stage 0 (HSDP, shard=1)   params Psi*p, grads Psi*g, optimizer 2*Psi*o
    stage 1                   as 0, but AdamW state and an fp32 slice of the params it updates are /D (ZeRO1AdamW)
    stage 2 (reshard_after_forward=False) params and grads /D too
    stage 3 (reshard_after_forward=True)  the same; two gathered blocks (current + prefetch) -> buffers
  compute copy (`compute_copy`, a separate term so it can be reconciled with measured peaks): FSDP2's gathered/cast
    params of every block live from forward to backward in stages 0-2 (Psi*c; none with one rank and no cast: no
    wrapper); in stage 3 only the root unit (embedding, final norm, head) stays gathered all step.
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
  selective (bench_model/parallel/recompute.py: region checkpoints around the two RMSNorms and SwiGLU's gating):
             each norm keeps only its input (ch, /t with SP) instead of (4 + c)h + 4; SwiGLU keeps the w1 and w3
             outputs and drops the silu output (3cf/t instead of 4cf/t); everything else is as for none. Total
             2ch (/t with SP) + 2ch + c(2h + 2k + 3f)/t + 4a per token (+ the RoPE tables). Transient: the larger
             recomputed region of one layer during its backward, a norm's internals (fp32 copy unless c = 4,
             rsqrt, output) or the silu output (cf/t).
  full:      layer input only (ch, /t with SP), plus, once, one whole layer's activations during its recompute.
  CP divides s by cp. GPT blocks use Korthikanti Table 2 literally: sbh(10 + 24/t + 5as/(ht)), SP: sbh(34/t + 5as/(ht)),
  selective drops 5as/(ht), full 2sbh (2sbh/t with SP); these are for 2-byte activations and are scaled by c/2.
Pipeline (Korthikanti Eq. 5 and its interleaving note; Narayanan et al. 2021 Sec 2.2): rank r of 1F1B holds
  min(pp - r, m) micro-batches in flight, interleaved 1F1B ((pp-r-1)*2 + (vpp-1)*pp + 1)/vpp (rank 0:
  pp*(1 + (pp-1)/(pp*vpp))); GPipe holds all m. Layers per rank follow bench_model's split (`layers_of_rank`).
  The worst rank is the largest of ranks 0 (embedding, most micro-batches), 1 (gets uneven-split extra layers first)
  and pp-1 (head, final norm, logits).
Logits: bench_model computes the loss on logits.float(): the fp32 log-softmax kept for backward, its fp32 gradient and
  the compute-dtype gradient into the head, (8 + c) bytes per element of n*V/t (vocab-parallel loss), last stage.
  With pp=1 the loss is chunked (bench_model.trainer.chunked_cross_entropy): each chunk of LOSS_CHUNK_TOKENS tokens
  runs head + loss under checkpoint, so only one chunk's logits exist, in its backward: n = min(b*s, 1024). The
  pipeline's loss_fn sees the whole micro-batch's logits: n = b*s.
Buffers (when FSDP2 wraps the model): one block's unsharded gradient in compute dtype plus its fp32 reduce buffer;
  stage 3 adds two gathered blocks in compute dtype. Runtime overhead (CUDA context, NCCL, cuBLAS workspace) is
  cluster.runtime_overhead_bytes; reserved = the caching allocator's reserved peak (autotune/reserved.py: allocated plus
  the cached segments of large transient blocks, times 1 + cluster.allocator_fragmentation) + overhead.
CPU offload (plan.offload; `model_state_arrays`' `host`, the `mem_host_bytes` column): host bytes per GPU next to the
  device terms, which drop what moved. U = the parameters this rank updates (Psi/D from stage 1).
  optimizer (ZeRO-Offload, Ren et al. 2021 Sec 4.1: fp32 master + Adam states and fp32 gradients on the CPU, the
    step there): host U*(4 + o + 4) = 16U for Adam; device optimizer 0. bench_model keeps its fp32 params and grads
    on the device (they are the FSDP2 shards it computes with); paper accounting (DeepSpeed offload_optimizer) keeps
    only the working params there: DeepSpeed's estimate_zero2_model_states_mem_needs(cpu_offload=True) GPU = 2*Psi,
    estimate_zero3 (offload_optimizer only) = 4*largest layer + 2*Psi/N, CPU 16*Psi per node of N GPUs
    (docs/code-docs/source/memory.rst; tests/unit/test_offload.py checks the rows).
  params (FSDP2 CPUOffloadPolicy; DeepSpeed ZeRO-3 offload_param + offload_optimizer): sharded params, grads and
    optimizer state on the host, (p + g + o)*Psi/D = 16*Psi/D (paper accounting 2 + 4 + 12 = 18*Psi/D, DeepSpeed's
    `18 * total_params` per node); the device keeps the gathered blocks (buffers, compute copy), DeepSpeed's
    4*largest layer. Host temporaries of the CPU step and the fp32 shard copied to the device before each block's
    all-gather (p*Psi_layer/D) are not modelled; DeepSpeed's estimator also counts a full fp32 model per process at
    load time (max(4*gpus_per_node, 16|18)*Psi), which is a start-up peak, not the training step's.
Not modelled: CP ring K/V receive buffers, transient bf16 gradients of one layer, optimizer-step temporaries.
All of the above is bench_model's accounting; `memory_arrays` takes each term from the framework profile that
train.framework names (autotune/frameworks/, docs/frameworks.md), whose defaults are these functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.frameworks import get_profile
from autotune.plan_arrays import CODES, RECOMPUTE_CODE, SCHEDULE_CODE, arrays_from_plans
from autotune.reserved import allocator_reserved, step_temporaries, zero1_gather
from autotune.types import DTYPE_BYTES, ClusterSpec, MemoryEstimate, ModelSpec, ParallelPlan, TrainSpec

_NONE, _SEL = RECOMPUTE_CODE["none"], RECOMPUTE_CODE["selective"]  # anything else is full recompute
# bench_model.trainer.LOSS_CHUNK_TOKENS (tests/unit/test_memory.py checks they agree)
LOSS_CHUNK_TOKENS = 1024
POSITIONS = ("first", "second", "last")  # pipeline ranks 0, 1 and pp-1: the candidates for the worst rank
OFFLOAD_CODE: dict[str, int] = CODES["offload"]
_OFF_OPT, _OFF_PAR = OFFLOAD_CODE["optimizer"], OFFLOAD_CODE["params"]
HOST_MASTER_BYTES = 4  # the host optimizer's fp32 master copy (ZeRO-Offload, Ren et al. 2021 Sec 4.1)
HOST_GRAD_BYTES = 4  # fp32 gradients on the host, the CPU Adam's input (ibid.; DeepSpeed's 16 bytes/param on CPU)


def _dtype_bytes(train: TrainSpec) -> dict[str, int]:
    return {
        "p": DTYPE_BYTES[train.param_dtype],
        "c": DTYPE_BYTES[train.compute_dtype],
        "g": DTYPE_BYTES[train.grad_dtype],
        "o": DTYPE_BYTES[train.optimizer_dtype] * train.optimizer_states,
        "m": DTYPE_BYTES[train.master_dtype] if train.master_dtype else 0,
    }


def model_state_arrays(
    num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec, offload: Any = 0
) -> dict[str, np.ndarray]:
    """Bytes of params, compute copy, grads and optimizer (incl. master) on the device and the offloaded states on
    the host (`host`) for `num_params` parameters on a rank, ZeRO stage `zero_stage`, sharding group size `shard`
    (= dp*cp), `offload` the plan.offload code (0 none, 1 optimizer, 2 params; `OFFLOAD_CODE`). Takes raw counts so
    published tables that give only a parameter count (ZeRO paper, accelerate, DeepSpeed's estimators) can be checked
    with the same code the planner uses."""
    psi = np.asarray(num_params, dtype=np.float64)
    z = np.asarray(zero_stage)
    d = np.asarray(shard, dtype=np.float64)
    off = np.asarray(offload)
    opt_off, par_off = off >= _OFF_OPT, off >= _OFF_PAR
    b = _dtype_bytes(train)
    updated = psi / np.where(z >= 1, d, 1.0)  # the parameters this rank's optimizer updates
    if train.master_dtype is not None:  # paper accounting: working params full until stage 3, master with optimizer
        params = psi * b["p"] / np.where(z >= 3, d, 1.0)
        grads = psi * b["g"] / np.where(z >= 2, d, 1.0)
        optimizer = updated * (b["o"] + b["m"])
        copy = np.where((z < 3) & (b["c"] != b["p"]), psi * b["c"], 0.0)
        # DeepSpeed offload_optimizer: master + Adam states and the reduced gradient partition (fp32) on the host,
        # nothing of them on the device; offload_param (ZeRO-3) moves the param partition too (module docstring)
        host = np.where(opt_off, updated * (b["o"] + b["m"] + HOST_GRAD_BYTES), 0.0) + np.where(par_off, params, 0.0)
        return {
            "params": np.where(par_off, 0.0, params),
            "compute_copy": copy,
            "grads": np.where(opt_off, 0.0, grads),
            "optimizer": np.where(opt_off, 0.0, optimizer),
            "host": host,
        }
    params = psi * b["p"] / np.where(z >= 2, d, 1.0)
    grads = psi * b["g"] / np.where(z >= 2, d, 1.0)
    # ZeRO-1 (bench_model ZeRO1AdamW): each rank keeps an fp32 slice of the params it updates plus its Adam states
    optimizer = updated * b["o"] + np.where(z == 1, psi * b["p"] / d, 0.0)
    # FSDP2 (every stage; HSDP with shard=1 for stages 0-1) gathers/casts params per block and keeps them from forward
    # to backward unless it reshards (stage 3); with one rank and no cast there is no wrapper and no copy
    fsdp = (d > 1) | (b["c"] != b["p"])
    copy = np.where((z <= 2) & fsdp, psi * b["c"], 0.0)
    # offload=optimizer (bench_model/parallel/offload.py): an fp32 master slice, the Adam states and an fp32 gradient
    # buffer of the updated parameters on the host; params=FSDP2 CPUOffloadPolicy: sharded params, grads and the
    # optimizer state built on them live on the host
    host = np.select(
        [par_off, opt_off],
        [params + grads + updated * b["o"], updated * (HOST_MASTER_BYTES + b["o"] + HOST_GRAD_BYTES)],
    )
    return {
        "params": np.where(par_off, 0.0, params),
        "compute_copy": copy,
        "grads": np.where(par_off, 0.0, grads),
        "optimizer": np.where(opt_off, 0.0, optimizer),
        "host": host,
    }


def layers_of_rank(num_layers: int, pp: Any, vpp: Any, rank: Any) -> np.ndarray:
    """Layers held by pipeline rank `rank` under bench_model's split (bench_model/parallel/pipeline.py): each of the
    S = pp*vpp stages gets floor(L/S); the L mod S extra layers go to stages 1..S-2 first, then stage 0, then S-1.
    Rank r holds stages r, r+pp, ..., r+(vpp-1)*pp."""
    pp, vpp, rank = np.asarray(pp), np.asarray(vpp), np.asarray(rank)
    stages = pp * vpp
    base, extra = num_layers // stages, num_layers % stages
    total = np.zeros(np.broadcast(pp, vpp, rank).shape, dtype=np.int64)
    for k in range(int(np.max(vpp, initial=1))):
        j = rank + k * pp
        middle = (j >= 1) & (j <= stages - 2) & (j <= extra)
        first = (j == 0) & (extra >= stages - 1) & (stages > 1)
        total = total + np.where(k < vpp, base + (middle | first), 0)
    return total


def layers_on_rank(num_layers: int, pp: Any, vpp: Any) -> np.ndarray:
    """The most layers any pipeline rank holds (for compute balance)."""
    return np.maximum.reduce(
        [layers_of_rank(num_layers, pp, vpp, r) for r in (0, np.minimum(1, np.asarray(pp) - 1), np.asarray(pp) - 1)]
    )


def rank_params(model: ModelSpec, tp: Any, pp: Any, vpp: Any) -> dict[str, Any]:
    """Parameters of pipeline ranks 0, 1 and pp-1 (`first`, `second`, `last`), the part of each that is FSDP's root
    unit (embedding, final norm, head: `root_<pos>`), their layer counts (`layers_<pos>`) and one layer's local size."""
    tp, pp, vpp = (np.asarray(x, dtype=np.int64) for x in (tp, pp, vpp))
    matmul = model.matmul_params() - model.vocab_size * model.hidden_size  # all blocks' weight matrices
    per_layer_matmul = matmul // model.num_layers
    per_layer_repl = model.layer_params() - per_layer_matmul  # norms: replicated across TP
    layer_local = per_layer_matmul / tp + per_layer_repl
    vh_local = model.vocab_size * model.hidden_size / tp  # vocab-parallel embedding / head
    final_norm = (
        model.num_params() - model.embedding_params() - model.head_params() - model.num_layers * model.layer_params()
    )
    head = np.where(pp > 1, vh_local, 0.0) if model.tie_embeddings else vh_local  # tied: a copy on the last stage
    single = pp == 1
    roots = {
        "first": vh_local + np.where(single, head + final_norm, 0.0),
        "second": np.where(pp == 2, head + final_norm, np.where(single, vh_local + head + final_norm, 0.0)),
        "last": np.where(single, vh_local, 0.0) + head + final_norm,
    }
    ranks = {"first": 0, "second": np.minimum(1, pp - 1), "last": pp - 1}
    out: dict[str, Any] = {"layer": layer_local}
    for pos in POSITIONS:
        layers = layers_of_rank(model.num_layers, pp, vpp, ranks[pos])
        out[pos], out[f"root_{pos}"], out[f"layers_{pos}"] = layers * layer_local + roots[pos], roots[pos], layers
        out[f"rank_{pos}"] = ranks[pos]
    return out


def layer_activation_bytes(
    model: ModelSpec, seq: Any, mbs: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int
) -> dict[str, np.ndarray]:
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
        sel = tok * (2 * c * h / sp_div + 2 * c * h + c * (2 * h + 2 * k + 3 * f) / t + lse) + rope
        norm_internals = ((4 if c != 4 else 0) + c) * h + 4  # fp32 copy, output, rsqrt; bytes per token
        sel_transient = tok * np.maximum(norm_internals / sp_div, c * f / t)
        full = tok * c * h / sp_div
    saved = np.select([r == _NONE, r == _SEL], [none, sel], full)
    transient = np.select(
        [r == _NONE, r == _SEL],
        [np.zeros_like(none), sel_transient if model.block != "gpt" else np.maximum(none - sel, 0.0)],
        none,
    )
    return {"saved": saved, "transient": transient}


def inflight_microbatches(pp: Any, vpp: Any, m: Any, schedule: Any, rank: Any = 0) -> np.ndarray:
    """Micro-batches whose activations pipeline rank `rank` holds at its peak, in units of all its layers.
    1F1B (PipeDream-Flush): pp - rank warm-up forwards. Interleaved 1F1B (Megatron-LM's schedule, which torch's
    Interleaved1F1B follows): (pp - rank - 1)*2 + (vpp - 1)*pp + 1 chunk forwards of 1/vpp of the rank's layers; for
    rank 0 that is pp*(1 + (pp-1)/(pp*vpp)), Korthikanti et al. 2022's note to Eq. 5. GPipe: all m."""
    pp, vpp, m, sch, r = (np.asarray(x, dtype=np.float64) for x in (pp, vpp, m, schedule, rank))
    inter = np.where(sch == SCHEDULE_CODE["interleaved_1f1b"], ((pp - r - 1) * 2 + (vpp - 1) * pp + 1) / vpp, pp - r)
    n = np.where(sch == SCHEDULE_CODE["gpipe"], m, np.minimum(inter, m))
    return np.where(pp == 1, 1.0, n)


def shard_group(arr: dict[str, np.ndarray]) -> np.ndarray:
    """Ranks the ZeRO/FSDP states are sharded over: dp*cp, or dp_shard*cp with HSDP (FSDP2 on a 2-D (replicate,
    shard) mesh; Zhao et al. 2023, "PyTorch FSDP", Sec 3.2.2: each of the dp/dp_shard replicas holds the full model
    state, sharded over its own F = dp_shard*cp ranks). dp_shard = 0 means all of dp."""
    dp = np.asarray(arr["dp"])
    ds = np.asarray(arr["dp_shard"]) if "dp_shard" in arr else np.zeros_like(dp)
    return np.where(ds > 0, ds, dp) * np.asarray(arr["cp"])


def _rank_memory(arr, model, train, psi, pos: str, layer_act, extras, prof) -> dict[str, np.ndarray]:
    pp, z, shard = arr["pp"], arr["zero_stage"], shard_group(arr)
    ms = prof.model_states(psi[pos], z, shard, train, arr["offload"])  # bench_model: model_state_arrays
    # bench_model: the FSDP2 root unit (embedding, norm, head) stays gathered all step, also in stage 3
    copy = ms["compute_copy"] + prof.root_copy(psi[f"root_{pos}"], z, train)
    inflight = prof.inflight(pp, arr["vpp"], arr["grad_accum_steps"], arr["pp_schedule"], psi[f"rank_{pos}"])
    act = psi[f"layers_{pos}"] * layer_act["saved"] * inflight + layer_act["transient"]
    act = act + np.where(psi[f"rank_{pos}"] == 0, extras["first_act"] * inflight, 0.0)
    is_last = psi[f"rank_{pos}"] == pp - 1
    act = act + np.where(is_last, extras["head_act"], 0.0)
    logits = np.where(is_last, extras["logits"], 0.0)
    params = ms["params"] + copy
    # bench_model: the sum of every term; a profile whose peak is one phase or another says so (FrameworkProfile.allocated)
    alloc = prof.allocated(params, ms["grads"], ms["optimizer"], act, logits, extras["buffers"], layer_act["transient"])
    return {
        "params": params,
        "compute_copy": copy,
        "grads": ms["grads"],
        "optimizer": ms["optimizer"],
        "activations": act,
        "logits": logits,
        "allocated": alloc,
        "host": ms["host"],
    }


def memory_arrays(
    arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, profile=None
) -> dict[str, np.ndarray]:
    """Vectorised worst-rank memory for plan arrays (see `autotune.plan_arrays`). Keys: params (incl. compute_copy),
    compute_copy, grads, optimizer, activations, logits, buffers, overhead, allocated, step_temporaries (optimizer-step
    transients), allocator_reserved (the caching allocator's reserved peak), reserved (plus overhead; bytes) and
    worst_pp_rank (the pipeline rank these numbers describe). `profile` (default: train.framework's) is the
    framework whose accounting applies (autotune/frameworks/)."""
    prof = get_profile(train.framework) if profile is None else profile
    tp, cp, z, sp = arr["tp"], arr["cp"], arr["zero_stage"], arr["sequence_parallel"]
    c = DTYPE_BYTES[train.compute_dtype]
    psi = rank_params(model, tp, arr["pp"], arr["vpp"])
    seq = train.seq_len / cp
    layer_act = prof.layer_activations(model, seq, arr["micro_batch_size"], tp, sp, arr["recompute"], c)
    tok = seq * arr["micro_batch_size"]
    # bench_model (FrameworkProfile's defaults): head_act = the final RMSNorm's tensors ((4 + c)h, /t with SP) and
    # the head's gathered input (ch); logits = (8 + c) bytes per fp32 logit, chunked at pp=1; buffers = FSDP2's one
    # block's unsharded gradient + fp32 reduce buffer (+ two gathered blocks in stage 3)
    extras = {
        "first_act": prof.first_stage_activations(model, tok, tp, sp, c),
        "head_act": prof.head_activations(model, tok, tp, sp, c),
        "logits": prof.logits(model, tok, arr["pp"], tp, c),
        "buffers": prof.buffers(psi["layer"], z, arr["dp"] * cp, train),
    }
    per = [_rank_memory(arr, model, train, psi, pos, layer_act, extras, prof) for pos in POSITIONS]
    worst = np.argmax(np.stack([p["allocated"] for p in per]), axis=0)
    res = {k: np.choose(worst, [p[k] for p in per]) for k in per[0]}
    res["buffers"] = extras["buffers"] * np.ones_like(res["allocated"])
    res["host"] = np.maximum.reduce([p["host"] for p in per])  # host bytes per GPU of the rank that needs most
    res["overhead"] = np.full_like(res["allocated"], float(cluster.runtime_overhead_bytes))
    local = np.choose(worst, [np.broadcast_to(psi[pos], worst.shape) for pos in POSITIONS])
    shard = shard_group(arr)
    # with the optimizer on the host, AdamW's temporaries are host memory (the ZeRO-1 gather stays on the device)
    states = np.where(arr["offload"] == OFFLOAD_CODE["none"], train.optimizer_states, 0)
    res["step_temporaries"] = step_temporaries(local, z, shard, zero1_gather(arr), states)
    res["allocator_reserved"] = allocator_reserved(res, arr, train, cluster)  # autotune/reserved.py
    res["reserved"] = res["allocator_reserved"] + res["overhead"]
    res["worst_pp_rank"] = np.choose(worst, [np.broadcast_to(psi[f"rank_{pos}"], worst.shape) for pos in POSITIONS])
    return res


def estimate_memory(
    plan: ParallelPlan, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, profile=None
) -> MemoryEstimate:
    m = memory_arrays(arrays_from_plans([plan]), model, train, cluster, profile)
    return MemoryEstimate(
        params_bytes=float(m["params"][0]),
        grads_bytes=float(m["grads"][0]),
        optimizer_bytes=float(m["optimizer"][0]),
        activations_bytes=float(m["activations"][0]),
        logits_bytes=float(m["logits"][0]),
        buffers_bytes=float(m["buffers"][0]),
        overhead_bytes=float(m["overhead"][0]),
        fragmentation=float(m["allocator_reserved"][0] / m["allocated"][0] - 1.0) if m["allocated"][0] > 0 else 0.0,
        host_bytes=float(m["host"][0]),
    )

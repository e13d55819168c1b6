"""Mixture-of-experts terms of the memory and speed models, vectorised over candidate arrays like the rest.

Notation: E routed experts, k = moe_router_topk, F = moe_ffn_hidden_size, h hidden, T = tokens of one micro-batch on
one rank after attention (b*s/cp), ep / etp the expert-parallel and expert-tensor-parallel degrees. The MoE mesh is
folded over the attention mesh (Megatron-Core "parallel folding": per pipeline stage the same W/pp ranks are viewed
as tp x cp x dp for attention and as edp x ep x etp for the experts, etp innermost), so
  - expert weights per rank: E/ep experts of 3hF/etp parameters per MoE layer; the rest of the block (attention,
    norms, router, shared experts, dense layers' MLP) is split by tp as before;
  - expert states are sharded by ZeRO/FSDP over the expert-data-parallel group edp = W/(pp*ep*etp), the dense
    states over dp*cp (as torchtitan's efsdp mesh / Megatron's expert_data_parallel group do);
  - tokens entering the MoE layer per rank: T/tp with sequence parallelism (Megatron requires SP with TP for MoE),
    each sent to k experts: a dispatch all-to-all and a combine all-to-all per MoE layer forward, two more backward.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.types import DTYPE_BYTES, ClusterSpec, TrainSpec
from autotune.predict.perf_terms import memory_bound_s, prefetch_exposed_s, streaming_s

A2A_PER_LAYER = 4  # dispatch + combine, forward and backward (Megatron MoEAlltoAllTokenDispatcher)


def routed_active_params(model: ModelSpec) -> int:
    """Routed-expert parameters one token passes through in one MoE layer: k experts of 3hF."""
    return model.moe_router_topk * 3 * model.hidden_size * model.moe_ffn_hidden_size


def expert_layer_params(model: ModelSpec) -> int:
    """Routed-expert parameters of one MoE layer (SwiGLU: w1, w3 h->F and w2 F->h per expert)."""
    return model.num_experts * 3 * model.hidden_size * model.moe_ffn_hidden_size


def moe_layers_of_rank(
    model: ModelSpec, pp: Any, vpp: Any, rank: Any, embed: Any = False, loss: Any = False
) -> np.ndarray:
    """MoE layers held by pipeline rank `rank` under bench_model's split (autotune/predict/schedule.py: stage j of
    S = pp*vpp holds a contiguous run of layers, the L mod S extra ones on stages 1..S-2 first, then 0, then S-1;
    rank r holds stages r, r+pp, ...), or Megatron's with the embedding / loss accounted (`embed`, `loss`)."""
    arrs = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (pp, vpp, rank, embed, loss)))
    pp, vpp, rank, embed, loss = arrs
    out = np.zeros(pp.shape, dtype=np.int64)
    moe = np.array([model.is_moe_layer(i) for i in range(model.num_layers)], dtype=np.int64)
    for key in set(zip(*(a.ravel().tolist() for a in arrs))):
        p, v, r, e, lo = key
        sizes = _stage_sizes(model.num_layers, p * v, e, lo)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        count = sum(int(moe[starts[j] : starts[j + 1]].sum()) for j in range(r, p * v, p))
        out[(pp == p) & (vpp == v) & (rank == r) & (embed == e) & (loss == lo)] = count
    return out


def _stage_sizes(num_layers: int, stages: int, embed: int = 0, loss: int = 0) -> list[int]:
    """Layers per pipeline stage, bench_model's split (the rule `schedule.layers_of_rank` counts), or Megatron's
    with the embedding / loss taking one slot of the first / last stage."""
    if embed or loss:
        slots = (num_layers + embed + loss) // stages
        sizes = [slots] * stages
        sizes[0] -= embed
        sizes[-1] -= loss
        return sizes
    base, extra = divmod(num_layers, stages)
    sizes = [base] * stages
    order = list(range(1, stages - 1)) + ([0] if stages > 1 else []) + ([stages - 1] if stages > 1 else [0])
    for j in order[:extra]:
        sizes[j] += 1
    return sizes


def expert_params_of_rank(model: ModelSpec, pp: Any, vpp: Any, rank: Any, ep: Any, etp: Any) -> np.ndarray:
    """Routed-expert parameters on one rank: its MoE layers x E/ep experts x 3hF/etp."""
    n = moe_layers_of_rank(model, pp, vpp, rank)
    return n * expert_layer_params(model) / (np.asarray(ep, dtype=np.float64) * np.asarray(etp, dtype=np.float64))


def expert_shard_group(world: Any, pp: Any, ep: Any, etp: Any) -> np.ndarray:
    """edp = W/(pp*ep*etp): the ranks holding the same experts, over which ZeRO/FSDP shards their states."""
    return np.asarray(world) // (np.asarray(pp) * np.asarray(ep) * np.asarray(etp))


def moe_tokens(tokens: Any, tp: Any, sp: Any) -> np.ndarray:
    """Tokens entering the router per rank: the sequence-parallel shard (T/tp) when SP is on, else all T."""
    return np.asarray(tokens, dtype=np.float64) / np.where(np.asarray(sp, dtype=bool), tp, 1)


def routing_imbalance(balanced: bool, copies_per_rank: Any, ep: Any) -> np.ndarray:
    """Busiest EP rank's token copies over the mean. Balanced routing (train.moe_routing=balanced, what NVIDIA's
    published MoE benchmarks force): 1. Learned routing, modelled as independent uniform choices: the expected
    maximum of ep multinomial counts of mean mu is about mu + sigma*sqrt(2 ln ep) (Gaussian extreme-value bound),
    sigma = sqrt(mu (1 - 1/ep)); a trained router's own skew comes on top and is not modelled."""
    ep = np.asarray(ep, dtype=np.float64)
    if balanced:
        return np.ones_like(ep)
    mu = np.maximum(np.asarray(copies_per_rank, dtype=np.float64), 1.0)
    sigma = np.sqrt(mu * (1.0 - 1.0 / ep))
    return np.where(ep > 1, 1.0 + sigma * np.sqrt(2.0 * np.log(np.maximum(ep, 1.0))) / mu, 1.0)


def collapsed_imbalance(model: ModelSpec, ep: Any) -> np.ndarray:
    """Busiest EP rank's token copies over the mean when the learned router has collapsed (train.moe_routing=
    "collapsed"): every token sends as many of its k copies as the rank's E/ep local experts can take (a token's k
    experts are distinct), so the rank receives ep x T x min(k, E/ep) copies against the mean T x k: ep min(k, E/ep)/k.
    A dropless router bounds nothing below that (torchtitan's TokenChoiceTopKRouter has no capacity; a model's
    moe_capacity_factor caps it, GShard, Lepikhin et al. 2021 Sec 2.2)."""
    ep = np.asarray(ep, dtype=np.float64)
    k = float(model.moe_router_topk)
    out = ep * np.minimum(k, model.num_experts / np.maximum(ep, 1.0)) / k
    if model.moe_capacity_factor is not None:
        out = np.minimum(out, model.moe_capacity_factor)
    return np.maximum(out, 1.0)


def collapsed_expert_bytes(
    model: ModelSpec, tokens: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int, ep: Any, etp: Any = 1
) -> np.ndarray:
    """What the busiest EP rank saves per MoE layer beyond an even share when the router has collapsed
    (`collapsed_imbalance`): (imbalance - 1) x its mean copies (moe_tokens x k) x the bytes a received copy leaves on
    the expert side, as `bench_model_moe_layer_bytes` counts them there (and torchtitan's MoE keeps them: models/moe.py
    `_run_experts_grouped_mm` @ 9603872e (Oct 2025), torch._grouped_mm saving its input, F.silu its input, the product
    its two factors, w2's grouped GEMM the product; distributed/expert_parallel.py `_permute` the padded permuted
    copy and its int indices): per gathered copy the index and the permuted copy (etp (8 + c h)), the SwiGLU on
    F/etp columns over the etp gathered copies (4c F; 3c F under selective recompute). Full recompute keeps the
    layer input only: 0. The sender-side tensors (router scores, the combine's index) do not grow."""
    c, h, f = float(act_bytes), model.hidden_size, model.moe_ffn_hidden_size
    r = np.asarray(recompute)
    swiglu = np.select([r == 0, r == 1], [4.0, 3.0], 0.0)  # RECOMPUTE_CODE none=0, selective=1
    per_copy = np.asarray(etp, dtype=np.float64) * (8.0 + c * h) + swiglu * c * f
    copies = moe_tokens(tokens, tp, sp) * model.moe_router_topk
    extra = (collapsed_imbalance(model, ep) - 1.0) * copies * per_copy
    return np.where(r >= 2, 0.0, extra)


def a2a_s(copies: Any, hidden: int, act_bytes: int, ep: Any, etp: Any, cluster: ClusterSpec) -> np.ndarray:
    """One all-to-all moving `copies` token copies of h values over an EP group of ep ranks that are etp apart: each
    rank keeps 1/ep of its copies and sends the rest, (ep-1)/ep * copies * h * c bytes (the derivation in
    ../shared/reference/moe_and_blackwell.md, 4 per layer). The peers inside the rank's node (gpus_per_node/etp - 1
    of them when the group spans nodes) take their share over NVLink, the others through the rank's own NIC
    (rail-optimised DGX/HGX nodes: one NIC per GPU), both at once: the slower of the two sets the time (NVIDIA advises
    EP x TP within the NVLink domain for this reason, Megatron-Core MoE README). Plus ep-1 point-to-point
    latencies. 0 when ep == 1."""
    ep, etp = np.asarray(ep, dtype=np.float64), np.asarray(etp, dtype=np.float64)
    sent = (ep - 1) / np.maximum(ep, 1) * np.asarray(copies, dtype=np.float64) * hidden * act_bytes
    node = float(cluster.fast_domain)  # the NVLink domain: a node, or an NVL72 rack
    inside = np.maximum(np.minimum(node, ep * etp) / etp - 1.0, 0.0)  # peers in this node
    intra_frac = np.where(ep > 1, inside / np.maximum(ep - 1, 1), 1.0)
    eff = cluster.comm_efficiency
    t = np.maximum(
        sent * intra_frac / (cluster.intra_node_bw_bytes_per_s * eff),
        sent * (1.0 - intra_frac) / (cluster.inter_node_bw_bytes_per_s * eff),
    )
    lat = np.where(ep * etp <= node, cluster.intra_node_latency_s, cluster.inter_node_latency_s)
    return np.where(ep > 1, t + (ep - 1) * lat, 0.0)


def expert_gemm_m(copies: Any, ep: Any, etp: Any, model: ModelSpec) -> np.ndarray:
    """Rows of each local expert's grouped GEMM: the rank's EP group's copies land on its E/ep experts, gathered over
    etp: copies * ep * etp / E per expert (even routing)."""
    return np.asarray(copies, dtype=np.float64) * np.asarray(ep) * np.asarray(etp) / model.num_experts


def moe_layer_extra_activation_bytes(
    model: ModelSpec, tokens: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int, gemm_input_bytes: Any = None
) -> np.ndarray:
    """What an MoE layer saves per micro-batch beyond a dense layer of the same model, in bench_model's MoE block
    (bench_model/moe.py): the dense accounting counts a SwiGLU of width f; an MoE layer instead keeps, per routed
    token (T/tp of them with SP), the router's fp32 scores (4E), the chosen experts and their weights (int64 k, c k),
    the permuted copy of each token for its k experts (c k h), the k experts' SwiGLU tensors (w1 out, silu out, w3
    out, product: 4 c k F; selective recompute drops the silu output: 3), their outputs for the weighted combine
    (c k h) and the shared expert's SwiGLU (4 c F_shared, 3 with selective). Full recompute keeps only the layer input
    (counted by the dense term), so nothing extra. The dense SwiGLU's 4cf/t (3cf/t selective) is taken back out.
    `gemm_input_bytes`: bytes per element the expert GEMMs keep of their inputs (the permuted tokens and the SwiGLU
    product), c by default; Transformer Engine's FP8 layers keep the FP8-cast input, 1 byte (megatron profile)."""
    c, k, h = act_bytes, model.moe_router_topk, model.hidden_size
    g = np.asarray(c if gemm_input_bytes is None else gemm_input_bytes, dtype=np.float64)
    tp = np.asarray(tp, dtype=np.float64)
    n = moe_tokens(tokens, tp, sp)
    r = np.asarray(recompute)
    swiglu = np.select([r == 0, r == 1], [4.0, 3.0], 0.0)  # RECOMPUTE_CODE none=0, selective=1
    f = model.moe_ffn_hidden_size
    # permuted input (g) + output for the combine (c), per copy of h; SwiGLU: w1, silu, w3 outputs (c) + product (g)
    routed = n * (4.0 * model.num_experts + 8.0 * k + c * k + (g + c) * k * h + ((swiglu - 1) * c + g) * k * f)
    shared = n * swiglu * c * model.moe_shared_expert_ffn_hidden_size
    dense = np.asarray(tokens, dtype=np.float64) * swiglu * c * model.ffn_hidden_size / tp
    return np.where(r >= 2, 0.0, routed + shared - dense)


def bench_model_moe_layer_bytes(
    model: ModelSpec,
    tokens: Any,
    tp: Any,
    sp: Any,
    recompute: Any,
    act_bytes: int,
    ep: Any = 1,
    etp: Any = 1,
    mbs: Any = 1,
) -> np.ndarray:
    """What an MoE layer saves per micro-batch beyond a dense layer of the same model, tensor by tensor as autograd
    keeps them in bench_model's MoE block (bench_model/moe.py, parallel/expert_parallel.py; checked to the byte by
    tests/unit/test_memory_moe_measured.py). T tokens of the micro-batch on the rank (b*s/cp), n = T/tp of them
    routed here with SP (else T), c the compute dtype's bytes (g = c: torchao keeps the high-precision GEMM inputs).
    `moe_layer_extra_activation_bytes` is the framework-neutral count (no index_copy_ source, no permutation
    indices) the megatron profile uses. Per routed token:
      router     fp32 scores kept by softmax/sigmoid (4E), the chosen experts (int64, 8k: the gather's index),
                 with moe_norm_topk the raw top-k weights and their sum (fp32, 4k + 4) kept by the re-normalisation;
      dispatch   the gathered index of each copy (int64 8k) and the permuted copy (g h) -- over etp*n tokens, since
                 ETP all-gathers its group's tokens first -- the k experts' SwiGLU on F/etp columns (w1, silu and
                 w3 outputs c, product g: (3c + g) k F; selective recompute drops silu's: (2c + g) k F);
      combine    index_copy_'s index (8k) and source (c h) per gathered copy (etp*), the un-permuted outputs and
                 their weights in the compute dtype (c k h + c k) for the weighted sum;
      aux loss   (moe_aux_loss_coeff > 0) the scores' row sums (fp32, 4); per sequence its expert counts (4E);
      shared     the shared expert's SwiGLU on the routed tokens (4c F_s; 3c selective).
    Per layer: the grouped GEMM's int32 group offsets (4 E/ep). With SP the block's input (the norm's output) is kept
    sequence-sharded (c h n) where the dense accounting counts the all-gathered input of w1/w3 (c h T), and the dense
    SwiGLU's 4cf T/tp (3cf selective) is not there: both are taken back out. Full recompute keeps the layer input
    only (the dense term): nothing extra."""
    c, k, h, e = act_bytes, model.moe_router_topk, model.hidden_size, model.num_experts
    g = float(c)
    tp, ep, etp = (np.asarray(x, dtype=np.float64) for x in (tp, ep, etp))
    t = np.asarray(tokens, dtype=np.float64)
    n = moe_tokens(t, tp, sp)
    r = np.asarray(recompute)
    swiglu = np.select([r == 0, r == 1], [4.0, 3.0], 0.0)  # RECOMPUTE_CODE none=0, selective=1
    f = model.moe_ffn_hidden_size
    aux = model.moe_aux_loss_coeff > 0
    router = 4.0 * e + 8.0 * k + (4.0 * k + 4.0 if model.moe_norm_topk else 0.0) + (4.0 if aux else 0.0)
    gathered = etp * (8.0 + g * h + 8.0 + c * h)  # per copy: index + permuted copy, index + index_copy_ source
    per_copy = gathered + ((swiglu - 1) * c + g) * f + c * h + c
    per_layer = 4.0 * e / ep + (4.0 * e * np.asarray(mbs, dtype=np.float64) if aux else 0.0)
    routed = n * (router + k * per_copy) + per_layer
    shared = n * swiglu * c * model.moe_shared_expert_ffn_hidden_size
    dense = t * swiglu * c * model.ffn_hidden_size / tp + c * h * (t - n)
    return np.where(r >= 2, 0.0, routed + shared - dense)


# ---- speed-model terms of the MoE block beyond its GEMMs (docs/perf_model_moe.md) -----------------------------------


def moe_block_bytes_per_token(model: ModelSpec, act_bytes: int) -> float:
    """HBM bytes per routed token of one MoE layer's memory-bound work in one forward pass, kernel by kernel as
    bench_model's MoE block runs them eager (bench_model/moe.py; one read per input, one write per output, the count
    `elementwise_bytes_per_token` makes for the dense block). c = compute dtype bytes, E experts, k top-k, h hidden:
      router    logits (GEMM output, c E) cast to fp32 (read c E, write 4E); softmax or sigmoid (read 4E, write 4E);
                top-k (read 4E, write int64 + fp32 per slot: 12k); the gather of the k weights and their
                re-normalisation (read 4E + 3 x 4k, write 3 x 4k: gather, sum, divide)
      sort      argsort of the token's k int64 expert ids: an LSD radix sort of 64-bit keys with int64 values makes
                8 passes of 8-bit digits, each reading and writing key and value (8 x 32 bytes per slot: CUB
                DeviceRadixSort, Merrill & Garland 2016 "Single-pass Parallel Prefix Scan with Decoupled Look-back"
                onesweep: one pass per digit), the index arithmetic order // k (read 8, write 8 per slot)
      permute   x[order // k]: read and write k copies of h (2 c k h), index read (8k)
      unpermute index_copy_ of the k expert outputs into slot order: read and write c k h, index read (8k)
      combine   ys * weights: read c k h + weights, write c k h; sum over the k slots: read c k h, write c h
      aux loss  (moe_aux_loss_coeff > 0) the scores over their row sums: read 4E twice, write 4E; the counts'
                scatter_add: read 8k, write 4k
    The experts' SwiGLU is the dense term's (elementwise_bytes_per_token counts one of width ffn_hidden_size, which
    Qwen3-style configs set to k x moe_ffn_hidden_size). The backward pass moves about twice these bytes (each op's
    gradient reads the incoming gradient and its saved input, writes one gradient: the dense count's convention)."""
    c, e, k, h = float(act_bytes), model.num_experts, model.moe_router_topk, model.hidden_size
    router = (c * e + 4 * e) + (4 * e + 4 * e) + (4 * e + 12 * k) + (4 * e + 12 * k + 12 * k)
    sort = 8 * 32 * k + 16 * k
    permute = 2 * c * k * h + 8 * k
    unpermute = 2 * c * k * h + 8 * k
    combine = (2 * c * k * h + 4 * k) + (c * k * h + c * h)
    aux = (12 * e + 12 * k) if model.moe_aux_loss_coeff > 0 else 0.0
    return router + sort + permute + unpermute + combine + aux


def fused_moe_block_bytes_per_token(model: ModelSpec, act_bytes: int) -> float:
    """moe_block_bytes_per_token when the block's elementwise chains are fused (plan.compile: Inductor; Megatron's
    fused router / permute kernels), counted kernel by kernel rather than by the dense block's fitted fusion factor:
    fusion removes the round trips *between* elementwise ops, not the data-dependent gathers and scatters, so
      router    one kernel from the logits to the k weights: read c E, write the fp32 scores (4E, kept for backward
                and the aux loss) and the top-k ids + weights (12k)
      sort      unchanged (a library radix sort, not generated code)
      permute   unchanged (a gather feeding the grouped GEMM, an extern kernel Inductor cannot fuse into)
      unpermute unchanged (an index scatter)
      combine   the weighted sum over the k slots in one kernel: read c k h + weights, write c h
      aux loss  one reduction over the scores: read 4E, write the counts (4k) and index reads (8k)"""
    c, e, k, h = float(act_bytes), model.num_experts, model.moe_router_topk, model.hidden_size
    router = c * e + 4 * e + 12 * k
    sort = 8 * 32 * k + 16 * k
    permute = unpermute = 2 * c * k * h + 8 * k
    combine = c * k * h + 4 * k + c * h
    aux = (4 * e + 12 * k) if model.moe_aux_loss_coeff > 0 else 0.0
    return router + sort + permute + unpermute + combine + aux


def expert_cast_bytes(
    layer_params: Any, zero_stage: Any, edp: Any, grad_accum: Any, act_bytes: int, param_bytes: int
) -> np.ndarray:
    """HBM bytes per micro-batch of one MoE layer's expert-weight casts in bench_model, `layer_params` the layer's
    routed-expert parameters on the rank (E/ep experts x 3hF/etp), held in fp32 (param_bytes p = 4), computed in
    c = act_bytes (bf16: 2). Nothing when c == p.
      ZeRO 0/1: the experts stay outside FSDP (bench_model/parallel/data_parallel.py `ignored_params`) and
        GroupedExperts.forward casts them, `w.to(x.dtype)`, every forward: read p, write c per parameter; autograd's
        backward of the cast turns the c-byte weight gradient into p bytes (read c, write p); AccumulateGrad adds it
        into .grad on every micro-batch but the first of the step (zero_grad(set_to_none=True): the first one is
        kept as is): read 2p, write p, on (m-1)/m of the micro-batches on average.
      ZeRO 2/3: FSDP2 (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)) casts the rank's 1/edp shard in
        the all-gather copy-in (read p, write c per shard element; again in backward at ZeRO 3, which re-gathers),
        casts the full c-byte gradient to fp32 before the reduce-scatter (read c, write p) and accumulates the
        sharded fp32 gradient (read 2p, write p per shard element, (m-1)/m of the micro-batches)."""
    p, c = float(param_bytes), float(act_bytes)
    n = np.asarray(layer_params, dtype=np.float64)
    z, edp = np.asarray(zero_stage), np.maximum(np.asarray(edp, dtype=np.float64), 1.0)
    m = np.maximum(np.asarray(grad_accum, dtype=np.float64), 1.0)
    accumulate = 3.0 * p * (m - 1.0) / m
    low = n * ((p + c) + (c + p) + accumulate)
    gathers = np.where(z >= 3, 2.0, 1.0)
    sharded = n * ((p + c) * gathers / edp + (c + p) + accumulate / edp)
    return np.where(c >= p, 0.0, np.where(z >= 2, sharded, low))


def expert_activation_extra_bytes(
    model: ModelSpec, tokens: Any, copies: Any, imbalance: Any, tp: Any, act_bytes: int
) -> tuple[np.ndarray, np.ndarray]:
    """HBM bytes of one forward of an MoE layer's expert activations per micro-batch on one rank, beyond what the
    dense elementwise term already counts for the layer (perf_terms.elementwise_bytes_per_token prices a SwiGLU of
    width ffn_hidden_size on every layer: read 2f, write f, tokens x 3cf / tp). The MoE layer's gated activations are
    the routed copies' (read fc1's 2F, write F per copy; under etp each rank holds F/etp of etp x the copies, the
    product is the same; x the busiest rank's load `imbalance`) and the shared expert's (tokens x 3cS / tp, TP-split
    like a dense MLP): copies x 3cF x imbalance + tokens x 3cS / tp - tokens x 3cf / tp. Zero where a preset's
    ffn_hidden_size is k F + S (Qwen3-MoE, DeepSeek-V3, Kimi-K2, Llama 4 Scout), positive where it is not: GPT-OSS
    (f = F = 2880, k = 4: the HF config's intermediate_size is the expert width) and Mixtral (f = F, k = 2).
    Megatron runs the activation as one fused kernel (GPT-OSS's clamped quick-GeGLU with its linear offset included:
    megatron/core/transformer/moe/experts.py TEGroupedMLP, `weighted_bias_quick_geglu_impl` under
    bias_activation_fusion, which Megatron-Bridge's GPTOSSBridge sets), hence the 3 accesses.
    Returned apart, (routed, dense-width delta): the routed copies' kernel is already one fused kernel between two
    grouped GEMMs, which no compiler fusion shrinks further (as the block's gathers: fused_moe_block_bytes_per_token),
    while the shared-expert / dense delta is the dense term's own convention (its compile factor applies)."""
    c = float(act_bytes)
    tp = np.asarray(tp, dtype=np.float64)
    routed = np.asarray(copies, dtype=np.float64) * 3.0 * c * model.moe_ffn_hidden_size * np.asarray(imbalance)
    width = model.moe_shared_expert_ffn_hidden_size - model.ffn_hidden_size
    return routed, np.asarray(tokens, dtype=np.float64) * 3.0 * c * width / tp


def moe_memory_bound_s(
    arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, tokens: Any, c: int
) -> np.ndarray:
    """One MoE layer's memory-bound seconds per micro-batch: routing, sort, permute, unpermute, combine and aux loss
    (moe_block_bytes_per_token: forward, x3 with its backward; under plan.compile the fused kernels' own count,
    fused_moe_block_bytes_per_token — not the dense block's compile_memory_traffic_factor, which is fitted to
    RMSNorm/SwiGLU chains whose intermediates all vanish, while this block's traffic is mostly gathers and scatters
    fusion cannot remove) and, in bench_model, the experts' weight casts (expert_cast_bytes)."""
    n = moe_tokens(tokens, arr["tp"], arr["sequence_parallel"])
    per_token = np.where(
        np.asarray(arr["compile"], dtype=bool),
        fused_moe_block_bytes_per_token(model, c),
        moe_block_bytes_per_token(model, c),
    )
    t = memory_bound_s(n * per_token * 3.0, cluster)
    if train.framework != "bench_model":  # Megatron keeps bf16 weights and accumulates wgrad in fp32 main_grad
        return t
    ep, etp = arr["ep"], arr["etp"]
    world = arr["dp"] * arr["tp"] * arr["pp"] * arr["cp"]
    local = expert_layer_params(model) / (ep * etp)
    edp = expert_shard_group(world, arr["pp"], ep, etp)
    casts = expert_cast_bytes(local, arr["zero_stage"], edp, arr["grad_accum_steps"], c, DTYPE_BYTES[train.param_dtype])
    return t + streaming_s(casts, cluster)  # whole expert weight tensors, streamed (perf_terms.streaming_s)


# ---- EP communication overlap (plan.ep_overlap); the dispatchers themselves: autotune/predict/moe_dispatch.py ------


def ep_overlap_unpaired(pp: Any, vpp: Any, grad_accum: Any) -> np.ndarray:
    """Share of a rank's micro-batch chunks whose all-to-alls have no other micro-batch's compute to hide behind under
    Megatron's combined 1F1B schedule (plan.ep_overlap). Without pipelining the first micro-batch's forward and the
    last one's backward run alone (megatron/core/pipeline_parallel/combined_1f1b.py
    combined_1f1b_schedule_for_no_pipelining: "The forward step for the first microbatch is executed alone, no a2a
    overlapping", the same for the last backward): 1 of m. With the interleaved pipeline the warm-up forwards (and as
    many cool-down backwards) run unpaired: on rank 0, (pp - 1) * 2 + (vpp - 1) * pp + 1 of the m * vpp chunks
    (schedules.py get_pp_rank_microbatches, microbatch_group_size_per_vp_stage = pp, "+ 1" with the overlap); at pp = 1
    that formula gives the 1 of m above."""
    pp, vpp = np.asarray(pp, dtype=np.float64), np.asarray(vpp, dtype=np.float64)
    chunks = np.maximum(np.asarray(grad_accum, dtype=np.float64), 1.0) * vpp
    warmup = (pp - 1.0) * 2.0 + (vpp - 1.0) * pp + 1.0
    return np.minimum(warmup, chunks) / chunks


def ep_overlap_exposed_s(comm: Any, compute: Any, on: Any, unpaired: Any, overlap: float = 1.0) -> np.ndarray:
    """Exposed seconds of one MoE layer's all-to-alls per micro-batch (`comm`: dispatch + combine, forward and
    backward). Without plan.ep_overlap every framework priced here dispatches on the compute stream (bench_model's
    dist.all_to_all_single, bench_model/parallel/expert_parallel.py; torchtitan's and DeepSpeed-MoE's all-to-all;
    Megatron's dispatcher without --overlap-moe-expert-parallel-comm): all of it. With it (Megatron only), the
    forward of one micro-batch runs with the backward of another (combined 1F1B), each one's all-to-alls on a
    communication stream behind the other's compute of the same layer (`compute`: the layer's forward + backward,
    which the pair's two halves together match): on the paired share of the chunks what exceeds it plus the
    contention of the overlapped part, as every hidden collective of this model (perf_terms.prefetch_exposed_s:
    max(C - G, 0) + (1 - overlap) min(C, G), `overlap` = cluster.dp_overlap: the compute slowdown while the
    communication kernels share SMs and HBM with it; DeepEP takes 20 of 132 SMs), and all of C on the `unpaired`
    share (ep_overlap_unpaired)."""
    comm = np.asarray(comm, dtype=np.float64)
    u = np.asarray(unpaired, dtype=np.float64)
    hidden = u * comm + (1.0 - u) * prefetch_exposed_s(comm, compute, overlap)
    return np.where(np.asarray(on, dtype=bool), hidden, comm)

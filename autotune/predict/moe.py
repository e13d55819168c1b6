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
from autotune.core.types import ClusterSpec

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


def router_bytes_per_token(model: ModelSpec, act_bytes: int) -> float:
    """HBM bytes per token of one MoE layer's memory-bound routing work, one pass: the router's fp32 scores (write E,
    read E for softmax/sigmoid, write E probabilities, read them for top-k: 4E fp32 values), the permutation of the
    token into k copies and back (read h, write kh; read kh, write h in the compute dtype), the weighted sum of the k
    outputs (read kh, write h)."""
    h, k, e = model.hidden_size, model.moe_router_topk, model.num_experts
    return 4.0 * 4 * e + act_bytes * (h + k * h + k * h + h + k * h + h)


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

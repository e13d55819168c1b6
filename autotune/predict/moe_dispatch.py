"""Token dispatchers of an MoE layer (plan.moe_dispatcher; MOE_DISPATCHERS: alltoall 0, allgather 1, deepep 2, hybridep 3):
what each moves between the EP ranks and over which links, and the buffers it holds (docs/perf_model_moe.md "Token
dispatchers"). The all-to-all of the routed copies itself is autotune/predict/moe.py `a2a_s`.

DeepEP (deepseek-ai/DeepEP docs/legacy.md, the V1 README: "normal kernels with NVLink and RDMA forwarding";
DeepSeek-V3 technical report arXiv 2412.19437 Sec 3.2.2) and Megatron's HybridEP (the flex dispatcher's
`moe_flex_dispatcher_backend=hybridep`, NVIDIA's Hybrid-EP in DeepEP's hybrid-ep branch, README_Hybrid-EP.md:
"Hierarchical Communication Design: inter-node RDMA, intra-node NVLink (TMA)") exchange tokens hierarchically: a token
crosses the network once per destination NVLink domain (to the GPU of the same local index there), which forwards it
over NVLink to each destination rank of that domain; the expert-parallel ranks of one domain get one copy per rank,
not one per expert. With group-limited ("node-limited") routing a token's experts lie in a bounded number of domains
(DeepSeek-V3: M = 4 nodes, Sec 2.1.2).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.types import ClusterSpec
from autotune.predict.moe import moe_tokens


def distinct_ranks_per_token(model: ModelSpec, ep: Any) -> np.ndarray:
    """Expected EP ranks a token's k experts live on (E experts, E/ep per rank, k distinct experts drawn uniformly):
    ep * (1 - P(none of the k on a given rank)), P = prod_{i<k} (E - E/ep - i) / (E - i) (hypergeometric). DeepEP
    sends a token once per destination rank (its dispatch layout counts tokens per rank, deep_ep/buffer.py
    get_dispatch_layout), the all-to-all dispatcher once per chosen expert (k copies)."""
    ep = np.asarray(ep, dtype=np.float64)
    e = float(model.num_experts)
    return ep * (1.0 - _miss(e, e / ep, model.moe_router_topk))


def _miss(total: float, per_unit: Any, draws: int) -> np.ndarray:
    """P(none of `draws` distinct items drawn uniformly from `total` falls in one unit of `per_unit` items):
    prod_{i<draws} (total - per_unit - i) / (total - i) (hypergeometric)."""
    per_unit = np.asarray(per_unit, dtype=np.float64)
    miss = np.ones_like(per_unit)
    for i in range(draws):
        miss = miss * np.maximum(total - per_unit - i, 0.0) / (total - i)
    return miss


def distinct_domains_per_token(model: ModelSpec, domains: Any) -> np.ndarray:
    """Expected NVLink domains (nodes) of the EP group a token's k experts live on, the group spanning `domains` of
    them with E/domains consecutive experts each (Megatron places experts on EP ranks in order, EP ranks contiguous
    inside a domain). Unlimited: domains x (1 - P(none of the k in a given domain)), as distinct_ranks_per_token.
    Group-limited routing (model.moe_router_num_groups G, moe_router_group_topk g; Megatron-Core
    moe_utils.group_limited_topk: groups of E/G consecutive experts, a token's k experts inside its g best groups):
    with domains <= G each domain holds G/domains whole groups and a token touches the domains of its g groups,
    domains x (1 - P(none of the g groups in a given domain)) (each chosen group holds one of its experts: k >= g);
    with domains > G a group spans domains/G domains and a token at most g x domains/G. The smaller bound holds."""
    n = np.maximum(np.asarray(domains, dtype=np.float64), 1.0)
    e, k = float(model.num_experts), model.moe_router_topk
    free = n * (1.0 - _miss(e, e / n, k))
    g, top = model.moe_router_num_groups, model.moe_router_group_topk
    if g == 0:
        return free
    inside = n * (1.0 - _miss(float(g), g / np.minimum(n, g), top))  # n <= G: whole groups per domain
    spanning = top * n / g  # n > G
    return np.minimum(free, np.where(n <= g, inside, spanning))


def hierarchical_dispatch_s(
    model: ModelSpec, routed: Any, hidden: int, act_bytes: int, ep: Any, etp: Any, cluster: ClusterSpec
) -> np.ndarray:
    """One DeepEP / HybridEP dispatch (or combine) of `routed` tokens per rank over an EP group of ep ranks etp apart
    (module doc). L = EP ranks per NVLink domain (fast_domain/etp, at most ep), N = ep/L domains:
      network  routed x (distinct domains per token) x (N-1)/N remote ones x h x c bytes through the rank's NIC (the
               remote share of the domains: each domain of the group is equally likely);
      NVLink   routed x (distinct ranks per token) x (L-1)/L x h x c bytes: every destination-rank copy crosses
               NVLink once (from the sender inside its domain, from the forwarding GPU in a remote one) unless it
               lands on the GPU that holds it already (1/L).
    Both at once, the slower sets the time (deepseek-ai/DeepEP docs/legacy.md, the V1 README's normal kernels on H800
    in the DeepSeek-V3 setting, top-4 groups: intranode 153-158 GB/s of ~160 NVLink, internode bottleneck RDMA
    43-58 GB/s "logical" of a ~50 GB/s CX7, i.e. at link rate), at comm_efficiency; plus ep-1 latencies as
    `moe.a2a_s`. Within one domain (N = 1) this is one copy per destination rank at NVLink rate. 0 when ep == 1."""
    ep, etp = np.asarray(ep, dtype=np.float64), np.asarray(etp, dtype=np.float64)
    local = np.maximum(np.minimum(float(cluster.fast_domain) / etp, ep), 1.0)
    domains = np.maximum(ep / local, 1.0)
    per_copy = np.asarray(routed, dtype=np.float64) * hidden * act_bytes
    net = per_copy * distinct_domains_per_token(model, domains) * (domains - 1.0) / domains
    nvl = per_copy * distinct_ranks_per_token(model, ep) * (local - 1.0) / local
    eff = cluster.comm_efficiency
    t = np.maximum(net / (cluster.inter_node_bw_bytes_per_s * eff), nvl / (cluster.intra_node_bw_bytes_per_s * eff))
    lat = np.where(domains > 1, cluster.inter_node_latency_s, cluster.intra_node_latency_s)
    return np.where(ep > 1, t + (ep - 1) * lat, 0.0)


def allgather_bytes(routed: Any, hidden: int, act_bytes: int, ep: Any) -> np.ndarray:
    """Megatron MoEAllGatherTokenDispatcher (megatron/core/transformer/moe/token_dispatcher.py): the EP group's hidden
    states are all-gathered before the local experts pick their tokens and the outputs reduce-scattered after;
    the buffer of each collective is every rank's tokens, ep x routed x h x c bytes (backward: reduce-scatter then
    all-gather of the same size)."""
    return np.asarray(ep, dtype=np.float64) * np.asarray(routed, dtype=np.float64) * hidden * act_bytes


# DeepEP normal (high-throughput) kernels' buffers, deep_ep/buffer.py and csrc/config.hpp (deepseek-ai/DeepEP):
# Buffer.num_sms = 20 SMs -> 10 channels; get_nvl_buffer_size_hint = channels x NVLink ranks (<= 8) x
# num_max_nvl_chunked_recv_tokens x (hidden bytes + 128 int64 top-k indices + 128 fp32 weights + 128 fp32 scales);
# get_rdma_buffer_size_hint (ep > 8) = channels x RDMA ranks (ep/8) x num_max_rdma_chunked_recv_tokens (128) x
# (the same + 16) x 2 (send and receive) + 1 MiB. Receive tokens per channel and rank from get_dispatch_config:
# 256 up to 8 ranks, 288 up to 64, 560 at 128, 720 beyond. Megatron's fused_a2a.get_buffer sizes them with
# hidden_bytes = h x max(element size, 2).
DEEPEP_CHANNELS = 10
DEEPEP_META_BYTES = 128 * 8 + 128 * 4 + 128 * 4
DEEPEP_RDMA_RECV_TOKENS = 128


def deepep_buffer_bytes(hidden: int, ep: Any) -> np.ndarray:
    """Device bytes of DeepEP's NVLink + RDMA buffers on one rank (comment above), allocated once per EP group
    outside PyTorch's caching allocator."""
    ep = np.asarray(ep, dtype=np.float64)
    hb = hidden * 2.0 + DEEPEP_META_BYTES
    recv = np.select([ep <= 8, ep <= 64, ep <= 128], [256.0, 288.0, 560.0], 720.0)
    nvl = DEEPEP_CHANNELS * np.minimum(ep, 8.0) * recv * hb
    rdma = DEEPEP_CHANNELS * np.maximum(ep // 8, 1.0) * DEEPEP_RDMA_RECV_TOKENS * (hb + 16.0) * 2.0 + 2.0**20
    return nvl + np.where(ep > 8, rdma, 0.0)


def dispatcher_memory_bytes(
    model: ModelSpec, dispatcher: Any, tokens: Any, tp: Any, sp: Any, ep: Any, etp: Any, act_bytes: int
) -> tuple[np.ndarray, np.ndarray]:
    """(transient, runtime) bytes of the dispatcher on one rank: allgather's gathered hidden states of the EP x ETP
    group inside the MoE layer (ep x etp x routed x h x c, allgather_bytes) and DeepEP's buffers (deepep_buffer_bytes,
    outside the caching allocator, like NCCL's); 0 for alltoall (its buffers are the routed copies, counted with the
    layer's activations). HybridEP's buffers (its own allocation, sized by the tokens per rank it may receive) are not
    modelled: 0, named in docs/perf_model_moe.md."""
    d = np.asarray(dispatcher)
    routed = moe_tokens(tokens, tp, sp)
    gathered = allgather_bytes(routed, model.hidden_size, act_bytes, np.asarray(ep) * np.asarray(etp))
    transient = np.where(d == 1, gathered, 0.0)
    runtime = np.where(d == 2, deepep_buffer_bytes(model.hidden_size, ep), 0.0)  # hybridep (3): not modelled
    return transient, runtime

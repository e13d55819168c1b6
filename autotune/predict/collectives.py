"""Collective communication time (alpha-beta per link class): the link a group runs on (NVLink inside an NVLink domain,
hierarchical across domains), NCCL ring collectives, and the data-parallel all-reduce with NCCL's ring/tree latency.
autotune.predict.perf prices every collective through these; `autotune netbench` fits the alpha and beta of each link
class (intra/inter) with the same ring model (autotune/fitting/netbench.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.types import ClusterSpec


def _link(cluster: ClusterSpec, inner_span: np.ndarray, stride: Any = 1) -> tuple[np.ndarray, np.ndarray]:
    """(bus bandwidth bytes/s, latency s) of a group whose ranks are `stride` apart and `inner_span` apart-or-less in
    the mesh order. Inside one NVLink domain: NVLink. A group spanning domains is hierarchical (NCCL's rings and trees
    chain the ranks of a domain over NVLink and cross domains over the NICs; Megatron/NeMo's two-level reductions):
    inside a domain at NVLink rate, across domains each of the g = domain/stride ranks a domain holds moves 1/g of the
    data over its own NIC (rail-optimised fabrics, one NIC per GPU: NVIDIA DGX SuperPOD reference architectures for
    H100 and GB200 NVL72). Pipelined, the slower level sets the rate: bus bandwidth min(g * NIC, NVLink). g counts the
    ranks per NVLink *domain* (72 on NVL72 racks), not per host: a GB200 tray's 4 GPUs share the rack's NVLink
    switches with the other 68, so a data-parallel reduction across racks sends 1/72 of the data per NIC."""
    intra = inner_span <= cluster.fast_domain  # NVLink: a node, or the whole NVL72 rack (cluster.nvlink_domain_size)
    per_domain = np.maximum(cluster.fast_domain // np.minimum(stride, cluster.fast_domain), 1)
    inter = np.minimum(cluster.inter_node_bw_bytes_per_s * per_domain, cluster.intra_node_bw_bytes_per_s)
    bw = np.where(intra, cluster.intra_node_bw_bytes_per_s, inter) * cluster.comm_efficiency
    lat = np.where(intra, cluster.intra_node_latency_s, cluster.inter_node_latency_s)
    return bw, lat


def dp_group_geometry(arr: dict[str, np.ndarray], inner: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """(span, stride) of a data-parallel group in the rank order: `inner` ranks per replica below it (default tp*cp:
    the dense dp*cp group; the experts' edp group passes ep*etp). Megatron's default order tp-cp-ep-dp-pp (torchtitan's
    and bench_model's meshes too: pp outermost) puts the replicas `inner` apart over span inner*dp; with
    plan.tp_pp_dp_mapping (order tp-cp-ep-pp-dp, megatron/training/initialize.py @ core_v0.16.1; the experts' rank
    generator takes the same order, parallel_state.py) the replicas are outermost: `inner`*pp apart, over the whole
    world."""
    pp, dp = np.asarray(arr["pp"]), np.asarray(arr["dp"])
    inner = np.asarray(arr["tp"]) * np.asarray(arr["cp"]) if inner is None else np.asarray(inner)
    world = np.asarray(arr["tp"]) * np.asarray(arr["cp"]) * dp * pp
    mapped = np.asarray(arr["tp_pp_dp_mapping"], dtype=bool)
    stride = np.where(mapped, inner * pp, inner)
    return np.where(mapped, world, world // pp), stride


def pp_group_span(arr: dict[str, np.ndarray]) -> np.ndarray:
    """Extent of a pipeline group in the rank order (dp_group_geometry): the whole world under Megatron's default
    order (pp outermost), tp*cp*pp with plan.tp_pp_dp_mapping (the stages are the replicas' inner neighbours)."""
    inner = np.asarray(arr["tp"]) * np.asarray(arr["cp"]) * np.asarray(arr["pp"])
    return np.where(np.asarray(arr["tp_pp_dp_mapping"], dtype=bool), inner, inner * np.asarray(arr["dp"]))


def ring_s(kind: str, n: Any, nbytes: Any, bw: Any, lat: Any) -> np.ndarray:
    """Time of one NCCL ring collective over n ranks (0 when n == 1), every hop at latency `lat`."""
    n = np.asarray(n, dtype=np.float64)
    steps = 2 * (n - 1) if kind == "all_reduce" else (n - 1)
    return steps / np.maximum(n, 1) * np.asarray(nbytes) / bw + steps * lat


def ranks_per_domain(cluster: ClusterSpec, n: Any, span: Any, stride: Any) -> np.ndarray:
    """How many of a group's n ranks share one NVLink domain (1..n): all n when the group's extent `span` fits in
    one domain (as _link), else the domain's ranks `stride` apart."""
    n = np.asarray(n, dtype=np.float64)
    per = np.clip(cluster.fast_domain // np.minimum(np.asarray(stride), cluster.fast_domain), 1, n)
    return np.where(np.asarray(span) <= cluster.fast_domain, n, per)


def ring_latency_s(kind: str, n: Any, per_domain: Any, intra_lat: float, inter_lat: float) -> np.ndarray:
    """Latency of one NCCL ring collective over n ranks, `per_domain` of them in each NVLink domain: NCCL's tuning
    model (NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel, ring branch) counts nsteps = 2(n-1) hops for an
    all-reduce and n-1 for an all-gather / reduce-scatter, of which nInterSteps = 2(nNodes-1) resp. nNodes-1 cross
    the network at the net latency and the other nsteps - nInterSteps stay inside a node at the NVLink latency: the
    ring enters and leaves each domain once. All-gather and reduce-scatter have no tree algorithm in NCCL (NCCL docs,
    "NCCL_ALGO": Tree is for all-reduce only), so their latency grows linearly with n: at 1,536 ranks in 192 nodes
    (preset latencies 5 us / 10 us) 1,344 x 5 + 191 x 10 us = 8.6 ms per collective."""
    n = np.asarray(n, dtype=np.float64)
    nodes = np.maximum(n / np.maximum(np.asarray(per_domain, dtype=np.float64), 1.0), 1.0)
    f = 2.0 if kind == "all_reduce" else 1.0
    steps, inter = f * (n - 1), f * (nodes - 1)
    return np.where(n > 1, (steps - inter) * intra_lat + inter * inter_lat, 0.0)


def dp_ring_s(
    cluster: ClusterSpec, kind: str, n: Any, nbytes: Any, span: Any, stride: Any, count: Any = 1.0
) -> np.ndarray:
    """`count` NCCL ring all-gathers / reduce-scatters of a data-parallel group (n ranks `stride` apart, extent
    `span` in the mesh) moving `nbytes` in total: the ring's bandwidth term on the hierarchical link (_link) once,
    the NCCL ring latency (ring_latency_s) once per collective. `count` is the framework's number of collectives for
    these bytes (FrameworkProfile.fsdp_collectives_per_block: FSDP2 one per block, DeepSpeed ZeRO-3 one per fetched
    submodule)."""
    bw, _ = _link(cluster, span, stride)
    n = np.asarray(n, dtype=np.float64)
    per = ranks_per_domain(cluster, n, span, stride)
    lat = ring_latency_s(kind, n, per, cluster.intra_node_latency_s, cluster.inter_node_latency_s)
    steps = 2 * (n - 1) if kind == "all_reduce" else (n - 1)
    return np.where(n > 1, steps / np.maximum(n, 1) * np.asarray(nbytes) / bw + np.asarray(count) * lat, 0.0)


def dp_all_reduce_s(cluster: ClusterSpec, n: Any, nbytes: Any, span: Any, stride: Any) -> np.ndarray:
    """A data-parallel all-reduce over n ranks `stride` apart (span = the group's extent in the mesh): the ring's
    bandwidth term on the hierarchical link (_link), and the latency of the faster of NCCL's two algorithms (NCCL
    picks per size; NCCL docs "NCCL_ALGO", Sanders et al. 2009 double binary trees; latencies as NCCL's tuning
    model, src/graph/tuning.cc): ring 2(n-1) hops, 2(N-1) of them across the N = n/g domains (ring_latency_s), tree
    a chain of the g ranks inside each domain plus 2 log2(N) hops across domains. At 512+ ranks the ring's latency
    alone is milliseconds per bucket; the tree's grows with log N."""
    bw, _ = _link(cluster, span, stride)
    n = np.asarray(n, dtype=np.float64)
    g = ranks_per_domain(cluster, n, span, stride)
    domains = np.maximum(n / g, 1.0)
    tree = 2 * (g - 1) * cluster.intra_node_latency_s + 2 * np.log2(domains) * cluster.inter_node_latency_s
    ring = ring_latency_s("all_reduce", n, g, cluster.intra_node_latency_s, cluster.inter_node_latency_s)
    return np.where(n > 1, 2 * (n - 1) / np.maximum(n, 1) * np.asarray(nbytes) / bw + np.minimum(ring, tree), 0.0)

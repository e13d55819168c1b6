"""Data-parallel communication of the step-time model (autotune.predict.perf composes it): ZeRO-2/3 / FSDP per block
with prefetch and HSDP's replica all-reduce (`fsdp_s`), DDP / ZeRO-1 gradient reduction and parameter gather
(`ddp_s`), both as each framework runs them (FrameworkProfile.overlaps and its collective counts), and the tied
embedding's all-reduce across the pipeline (`tied_embedding_allreduce_s`); also the optimizer step over the rank's
sharded states (`optimizer_s`). Every collective pays NCCL's ring latency
(autotune/predict/collectives.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import OFFLOAD_CODE, RECOMPUTE_CODE
from autotune.core.types import DTYPE_BYTES, ClusterSpec, TrainSpec
from autotune.predict import moe
from autotune.predict.collectives import _link, dp_all_reduce_s, dp_group_geometry, dp_ring_s, pp_group_span, ring_s
from autotune.predict.frameworks import get_profile
from autotune.predict.perf_terms import (
    adam_tensors_per_param,
    fsdp_exposed_s,
    host_device_s,
    offload_step_s,
    optimizer_step_s,
    prefetch_exposed_s,
)
from autotune.predict.rank_params import shard_group


def offload_copies_s(
    arr: dict[str, np.ndarray], cluster: ClusterSpec, elems: np.ndarray, shard: np.ndarray, p: int, g: int
) -> tuple[np.ndarray, np.ndarray]:
    """(H2D, D2H) seconds of one FSDP unit of `elems` parameters under offload=params (FSDP2 CPUOffloadPolicy): each
    gather first copies the fp32 shard H2D and each reduce-scatter's shard goes D2H, on the same streams as the
    collectives (they lengthen the prefetched communication); 0 for other offload modes."""
    par_off = arr["offload"] == OFFLOAD_CODE["params"]
    h2d = np.where(par_off, host_device_s(elems / shard * p, cluster), 0.0)
    d2h = np.where(par_off, host_device_s(elems / shard * g, cluster), 0.0)
    return h2d, d2h


def fsdp_s(
    arr: dict[str, np.ndarray],
    model: ModelSpec,
    train: TrainSpec,
    cluster: ClusterSpec,
    ranks: dict,
    stage: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """ZeRO 2/3 (FSDP2 per block with prefetch, every micro-batch; perf_terms.fsdp_exposed_s) on the shard group of
    F = dp_shard*cp ranks, and HSDP's all-reduce of each 1/F gradient shard across the R replicas once per step behind
    the last backward (Zhao et al. 2023, "PyTorch FSDP", Sec 3.2.2). (exposed seconds per step, replicate all-reduce
    seconds before overlap)."""
    dp, tp, cp, m = arr["dp"], arr["tp"], arr["cp"], arr["grad_accum_steps"]
    c, g, p = (DTYPE_BYTES[x] for x in (train.compute_dtype, train.grad_dtype, train.param_dtype))
    shard = shard_group(arr)
    reps = dp * cp // shard
    prof = get_profile(train.framework)
    ov = prof.overlaps()
    root = np.maximum.reduce([ranks["root_first"], ranks["root_second"], ranks["root_last"]])
    h2d_layer, d2h_layer = offload_copies_s(arr, cluster, ranks["layer"], shard, p, g)
    h2d_root, d2h_root = offload_copies_s(arr, cluster, root, shard, p, g)
    busy_layers, z, overlap = stage["layers"], arr["zero_stage"], cluster.dp_overlap if ov.fsdp_prefetch else 0.0
    # each block in the framework's number of collectives (FrameworkProfile.fsdp_collectives_per_block), each paying
    # NCCL's ring latency (collectives.ring_latency_s: all-gather / reduce-scatter have no tree)
    n_ag, n_rs = prof.fsdp_collectives_per_block(model, ranks["layer"])
    span, stride = tp * shard, tp * cp
    ag = dp_ring_s(cluster, "all_gather", shard, ranks["layer"] * c, span, stride, n_ag) + h2d_layer
    rs = dp_ring_s(cluster, "reduce_scatter", shard, ranks["layer"] * g, span, stride, n_rs) + d2h_layer
    fwd, bwd = stage["fwd_layer"], stage["bwd_layer"]
    # the root unit (embedding, final norm, head) gathers before the first block and reduce-scatters after the last:
    # nothing to hide behind
    root_s = dp_ring_s(cluster, "all_gather", shard, root * c, span, stride)
    root_s = root_s + dp_ring_s(cluster, "reduce_scatter", shard, root * g, span, stride)
    root_s = root_s + h2d_root + d2h_root
    # DeepSpeed ZeRO-3 under full recompute gathers each block twice in backward (recompute, then backward)
    bwd_gathers = np.where(prof.recompute_regathers() & (arr["recompute"] == RECOMPUTE_CODE["full"]), 2.0, 1.0)
    fsdp = m * (fsdp_exposed_s(busy_layers, ag, rs, fwd, bwd, z, overlap, bwd_gathers) + root_s)
    if prof.pipeline_defers_grad_reduce():
        # pp > 1 (FrameworkProfile.pipeline_defers_grad_reduce): blocks stay gathered from one micro-batch's backward
        # to the end of the step, so the first forward gathers every block, stage 3 gathers again in each backward
        # (its forward reshards; the 1F1B steady state's forward reuses the previous backward's gather), and every
        # block reduce-scatters once, after the last backward, with no compute left to hide behind
        deferred = fsdp_exposed_s(busy_layers, ag, 0.0, fwd, bwd, 2, overlap) + busy_layers * rs + root_s
        deferred = deferred + np.where(z >= 3, m * busy_layers * prefetch_exposed_s(ag, bwd, overlap), 0.0)
        fsdp = np.where(arr["pp"] > 1, deferred, fsdp)
    # each block's gradient shard behind the last micro-batch's backward like DDP's buckets; the root unit's after the
    # last block (exposed)
    replicate = busy_layers * dp_all_reduce_s(cluster, reps, ranks["layer"] * g / shard, tp * cp * dp, tp * shard)
    root_ar = dp_all_reduce_s(cluster, reps, root * g / shard, tp * cp * dp, tp * shard)
    fsdp = fsdp + hidden_s(replicate, busy_layers * stage["bwd_layer"], ov.grad_reduce, cluster) + root_ar
    return fsdp, replicate + root_ar


def hidden_s(comm: Any, compute: Any, on: bool, cluster: ClusterSpec) -> np.ndarray:
    """`comm` behind `compute` when the framework overlaps it (perf_terms.prefetch_exposed_s), else fully exposed."""
    return prefetch_exposed_s(comm, compute, cluster.dp_overlap) if on else np.asarray(comm, dtype=np.float64)


def param_gather_bytes(arr: dict[str, np.ndarray], train: TrainSpec, psi: Any, quantized: Any) -> np.ndarray:
    """Bytes one rank's share of the ZeRO-1 / distributed-optimizer parameter all-gather covers for `psi` parameters,
    `quantized` of them block-linear weights: those at the framework's FrameworkProfile.gather_weight_bytes (Megatron
    --fp8-param-gather: 1 byte under a tensorwise FP8 recipe, [FP8P] in autotune/predict/frameworks/megatron.py), the
    rest (embedding, head, norms) at the param dtype's."""
    p = float(DTYPE_BYTES[train.param_dtype])
    per = get_profile(train.framework).gather_weight_bytes(arr["fp8"], train)
    q = np.minimum(np.asarray(quantized, dtype=np.float64), psi)
    return (np.asarray(psi, dtype=np.float64) - q) * p + q * per


def ddp_s(
    arr: dict[str, np.ndarray],
    train: TrainSpec,
    cluster: ClusterSpec,
    psi: np.ndarray,
    stage: dict[str, np.ndarray],
    quantized: Any = 0.0,
    psi_experts: Any = 0.0,
) -> np.ndarray:
    """DDP / ZeRO-1 on the group dp*cp, as the framework runs it (FrameworkProfile.overlaps): gradients all-reduced
    (bench_model, DDP) or reduce-scattered (Megatron's distributed optimizer, DeepSpeed ZeRO-1) in buckets behind the
    last micro-batch's backward where the framework overlaps them; ZeRO-1 then all-gathers the updated params, behind
    the next step's first forward under Megatron's --overlap-param-gather, exposed otherwise.
    `psi_experts`, the rank's routed-expert parameters, go the same way on their own group (expert_ddp_s); both
    share the backward (forward) window they hide behind: `stage` bwd_window / fwd_window when set (perf.py adds the
    MoE layers' compute), else the dense layers'."""
    dp, cp = arr["dp"], arr["cp"]
    g = DTYPE_BYTES[train.grad_dtype]
    prof = get_profile(train.framework)
    ov = prof.overlaps()
    n, z1 = dp * cp, arr["zero_stage"] == 1
    # the gradient in `count` collectives (FrameworkProfile.grad_reduce_collectives): same bytes, count x latency
    count = prof.grad_reduce_collectives(stage["layers"])
    span, stride = dp_group_geometry(arr)  # tp*cp*dp and tp*cp; the whole world and tp*cp*pp when dp is outermost
    grad = count * dp_all_reduce_s(cluster, n, psi * g / count, span, stride)
    if ov.zero1_reduce_scatter:
        rs = dp_ring_s(cluster, "reduce_scatter", n, psi * g, span, stride, count)
        grad = np.where(z1, rs, grad)
    gather = dp_ring_s(cluster, "all_gather", n, param_gather_bytes(arr, train, psi, quantized), span, stride)
    e_grad, e_gather, e_exposed = expert_ddp_s(arr, train, cluster, psi_experts, stage)
    fwd_window = stage.get("fwd_window", stage["layers"] * stage["fwd_layer"])
    bwd_window = stage.get("bwd_window", stage["layers"] * stage["bwd_layer"])
    gather = hidden_s(gather + e_gather, fwd_window, ov.param_gather, cluster)
    return hidden_s(grad + e_grad, bwd_window, ov.grad_reduce, cluster) + np.where(z1, gather, 0.0) + e_exposed


def expert_ddp_s(
    arr: dict[str, np.ndarray], train: TrainSpec, cluster: ClusterSpec, psi_experts: Any, stage: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gradient reduction, parameter gather, exposed) seconds per step of the routed experts' gradients at ZeRO 0/1.
    An expert's replicas are the edp = W/(pp*ep*etp) ranks holding it (moe.expert_shard_group), ep*etp apart in the
    folded MoE mesh (etp innermost, then ep, then edp: Megatron-Core parallel_state `expert_data_parallel_group`),
    so with ep*etp >= a node the group crosses the network; with edp = 1 (ep*etp*pp = W) there is nothing to reduce.
    Megatron's DDP puts the expert parameters in their own buffers and bucket groups reduced over that group
    (megatron/core/distributed/distributed_data_parallel.py: `expert_parallel_buffers, expert_parallel_bucket_groups =
    _allocate_buffers_for_parameters(expert_parallel_params, get_expert_data_parallel_group(), ...)`), overlapped like
    the dense buckets (returned as grad / gather for ddp_s to hide with them); the distributed optimizer
    reduce-scatters them and all-gathers the updated shards over the same group. bench_model at ZeRO 0/1 all-reduces
    each expert tensor over edp after the last backward (bench_model/parallel/expert_parallel.py
    `finalize_expert_grads`, 3 tensors per MoE layer: FrameworkProfile.expert_grads_overlapped False): exposed."""
    edp = moe.expert_shard_group(arr["dp"] * arr["tp"] * arr["pp"] * arr["cp"], arr["pp"], arr["ep"], arr["etp"])
    span, stride = dp_group_geometry(arr, arr["ep"] * arr["etp"])
    psi_experts = np.asarray(psi_experts, dtype=np.float64)
    g = DTYPE_BYTES[train.grad_dtype]
    prof = get_profile(train.framework)
    z1 = arr["zero_stage"] == 1
    zero = np.zeros(np.shape(edp))
    if not prof.expert_grads_overlapped():
        count = np.maximum(3.0 * stage["moe_layers"], 1.0)
        exposed = count * dp_all_reduce_s(cluster, edp, psi_experts * g / count, span, stride)
        return zero, zero, np.where(psi_experts > 0, exposed, 0.0)
    grad = dp_all_reduce_s(cluster, edp, psi_experts * g, span, stride)
    if prof.overlaps().zero1_reduce_scatter:
        grad = np.where(z1, dp_ring_s(cluster, "reduce_scatter", edp, psi_experts * g, span, stride), grad)
    quantized = param_gather_bytes(arr, train, psi_experts, psi_experts)  # block-linear weights, all of them
    gather = np.where(z1, dp_ring_s(cluster, "all_gather", edp, quantized, span, stride), 0.0)
    none = psi_experts <= 0  # a dense model issues no expert collective (no latency either)
    return np.where(none, 0.0, grad), np.where(none, 0.0, gather), zero


def tied_embedding_allreduce_s(
    arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec
) -> np.ndarray:
    """Tied embeddings with pp > 1: once per step, after backward and before the optimizer, the first and last stage
    all-reduce their shares of the shared V x h gradient (Megatron-LM finalize_model_grads.py,
    `_allreduce_word_embedding_grads`; bench_model/parallel/pipeline.py). 2-rank ring all-reduce of the local shard:
    V*h/tp elements (vocab-parallel), /(dp*cp) from ZeRO stage 2 (gradients sharded), in grad dtype. Not overlapped.
    The two ranks are (pp-1)*dp*cp*tp apart (tp*cp*(pp-1) with plan.tp_pp_dp_mapping): the link is chosen from the
    whole pipeline's span, as for p2p (collectives.pp_group_span)."""
    tp, pp, z = arr["tp"], arr["pp"], arr["zero_stage"]
    shard = np.where(z >= 2, shard_group(arr), 1)
    nbytes = model.vocab_size * model.hidden_size / tp / shard * DTYPE_BYTES[train.grad_dtype]
    bw, lat = _link(cluster, pp_group_span(arr))
    return np.where((pp > 1) & model.tie_embeddings, ring_s("all_reduce", 2, nbytes, bw, lat), 0.0)


def optimizer_s(
    arr: dict[str, np.ndarray], train: TrainSpec, cluster: ClusterSpec, psi: np.ndarray, psi_experts: Any = 0.0
) -> np.ndarray:
    """AdamW update of the rank's parameter slice at HBM bandwidth (perf_terms.optimizer_step_s, the framework's
    tensor accesses per parameter); with CPU offload it runs on the host instead, with its copies for
    offload=optimizer (perf_terms.offload_step_s). `psi_experts`: the rank's routed-expert parameters, whose states
    ZeRO shards over the expert-data-parallel group edp (autotune/predict/moe.py) instead of dp*cp."""
    z, off, shard = arr["zero_stage"], arr["offload"], shard_group(arr)
    edp = moe.expert_shard_group(arr["dp"] * arr["tp"] * arr["pp"] * arr["cp"], arr["pp"], arr["ep"], arr["etp"])
    g, p = DTYPE_BYTES[train.grad_dtype], DTYPE_BYTES[train.param_dtype]
    opt_b = DTYPE_BYTES[train.optimizer_dtype] if train.optimizer == "adamw" else 0
    accesses = adam_tensors_per_param(train.framework)
    opt = optimizer_step_s(psi, shard, z, opt_b, cluster, accesses)
    opt = opt + optimizer_step_s(psi_experts, edp, z, opt_b, cluster, accesses)
    updated = psi / np.where(z >= 1, shard, 1) + np.asarray(psi_experts) / np.where(z >= 1, edp, 1)
    host_opt = offload_step_s(updated, off, p, g, cluster)
    return np.where(off == OFFLOAD_CODE["none"], opt, host_opt)

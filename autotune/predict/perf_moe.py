"""The MoE layer's terms of the step-time model (autotune/predict/perf.py; the mechanisms and their sources in
autotune/predict/moe.py, moe_dispatch.py and te_fp8.py): the routed experts' grouped GEMMs, the router, permutation and
gated activations (memory-bound), Transformer Engine's expert casts, and the token dispatch / combine under
plan.moe_dispatcher with the etp gathers."""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import CODES, FP8_CODE, RECOMPUTE_CODE
from autotune.core.types import DTYPE_BYTES, ClusterSpec, TrainSpec
from autotune.predict import moe, moe_dispatch, recompute_share
from autotune.predict.collectives import _link, ring_s
from autotune.predict.frameworks import get_profile
from autotune.predict.gemm import gemm_efficiency
from autotune.predict.glu_clamp import unfused_clamp_bytes
from autotune.predict.perf_terms import compiled_elementwise_factor, memory_bound_s
from autotune.predict.te_fp8 import te_cast_layouts, te_expert_cast_extra_bytes


def moe_terms(
    arr: dict[str, np.ndarray],
    model: ModelSpec,
    train: TrainSpec,
    cluster: ClusterSpec,
    tokens: np.ndarray,
    passes: np.ndarray,
    linear_peak: np.ndarray,
    linear_eff: np.ndarray,
) -> dict[str, np.ndarray]:
    """Per MoE layer and micro-batch on one rank (autotune/predict/moe.py): `moe_compute`, the routed experts' grouped
    GEMMs (k copies of each routed token through 3hF/etp, gathered over etp, at the efficiency of rows per expert
    and width F/etp, times the busiest EP rank's load) plus the router and permutation (memory-bound), and `ep`, the
    token all-to-alls (dispatch + combine, forward and backward, + one more pair with full recompute) on the EP
    group's link and the etp all-gather / reduce-scatter. Zero on a dense model."""
    if not model.is_moe:
        zero = np.zeros(np.shape(tokens))
        return {"moe_compute": zero, "ep": zero}
    tp, ep, etp, sp = arr["tp"], arr["ep"], arr["etp"], arr["sequence_parallel"]
    c, k, h, f = DTYPE_BYTES[train.compute_dtype], model.moe_router_topk, model.hidden_size, model.moe_ffn_hidden_size
    copies = moe.moe_tokens(tokens, tp, sp) * k  # token copies this rank routes
    imbalance = moe.routing_imbalance(train.moe_routing == "balanced", copies, ep)
    if train.moe_routing == "collapsed":  # the busiest rank takes every copy its local experts can (moe.py)
        imbalance = moe.collapsed_imbalance(model, ep) * np.ones_like(imbalance)
    if model.moe_capacity_factor is not None:  # token dropping: no expert takes more than capacity x its even share
        imbalance = np.minimum(imbalance, model.moe_capacity_factor)  # (GShard, Lepikhin et al. 2021 Sec 2.2)
    rows = moe.expert_gemm_m(copies, ep, etp, model)
    # plan.moe_recompute (Megatron recompute_modules): "moe" re-runs the layer's forward (expert GEMMs, router and a
    # dispatch + combine pair) in backward; "moe_act" re-runs the SwiGLU, memory-bound (read fc1's 2F, write F)
    full = recompute_share.full_recompute_share(arr, model.num_layers / arr["pp"])
    layer_rc = (arr["moe_recompute"] == CODES["moe_recompute"]["moe"]) & (full == 0)
    act_rc = arr["moe_recompute"] == CODES["moe_recompute"]["moe_act"]
    passes = passes + layer_rc
    gemm = copies * etp * 2.0 * 3 * h * f / etp * passes * imbalance
    gemm = gemm / (linear_peak * gemm_efficiency(linear_eff, rows, f / etp))
    # moe_memory_bound_s is forward + backward (x3 of the forward); "moe" recompute runs one more forward
    router = moe.moe_memory_bound_s(arr, model, train, cluster, tokens, c) * (3.0 + layer_rc) / 3.0
    n_a2a = moe.A2A_PER_LAYER + 2.0 * np.maximum(full, layer_rc)
    # TE's fused grouped MLP (train.fused_grouped_mlp, autotune/core/train.py): under an MXFP8 / NVFP4 recipe the
    # routed copies' gated activation runs in the grouped GEMMs' epilogues, no memory-bound kernel of its own
    lowp_block = (arr["fp8"] == FP8_CODE["mxfp8"]) | (arr["fp8"] == FP8_CODE["nvfp4"])
    fused_mlp = np.asarray(train.fused_grouped_mlp & lowp_block, dtype=bool)
    act_rc = act_rc & ~fused_mlp
    router = router + np.where(act_rc, memory_bound_s(copies * imbalance * 3 * f / etp * c, cluster), 0.0)
    # the experts' gated activations beyond the dense term's SwiGLU of width ffn_hidden_size (moe.py), as many passes
    rerun = get_profile(train.framework).selective_reruns_elementwise()  # Megatron: only its modules (act_rc above)
    ew = 3.0 + np.where((arr["recompute"] == RECOMPUTE_CODE["selective"]) & rerun, 1.0, full)
    routed_act, dense_act = moe.expert_activation_extra_bytes(model, tokens, copies, imbalance, tp, c)
    routed_act = np.where(fused_mlp, 0.0, routed_act)
    fused = compiled_elementwise_factor(arr["compile"], cluster, model.block)  # the dense term's convention
    router = router + memory_bound_s(routed_act * ew, cluster) + memory_bound_s(dense_act * ew, cluster) * fused
    if get_profile(train.framework).unfused_glu_clamp():  # the eager clamp before the fused GeGLU (glu_clamp.py)
        reruns = np.maximum(np.asarray(act_rc, dtype=np.float64), full)
        clamp = unfused_clamp_bytes(model, copies * imbalance, etp, c, reruns)
        router = router + np.where(fused_mlp, 0.0, memory_bound_s(clamp, cluster))
    if (train.fp8_casts or get_profile(train.framework).fp8_casts()) == "te":  # GroupedLinear's casts (te_fp8.py)
        casts = te_expert_cast_extra_bytes(
            model, c, tokens, copies * imbalance, arr["fp8"], te_cast_layouts(arr["fp8"], cluster),
            arr["grad_accum_steps"], tp, ep, etp, sp, fused_mlp,
        )  # fmt: skip
        router = router + memory_bound_s(casts, cluster)  # full recompute's re-cast of the inputs not counted
    a2a = n_a2a * dispatch_s(arr, model, cluster, copies / k * imbalance, c)
    e_bw, e_lat = _link(cluster, etp)
    etp_s = 2 * (
        ring_s("all_gather", etp, copies * h * c, e_bw, e_lat)
        + ring_s("reduce_scatter", etp, copies * h * c, e_bw, e_lat)
    )
    return {"moe_compute": gemm + router, "ep": a2a + etp_s}


def dispatch_s(arr: dict[str, np.ndarray], model: ModelSpec, cluster: ClusterSpec, routed: Any, c: int) -> np.ndarray:
    """One dispatch or combine of `routed` tokens per rank under plan.moe_dispatcher: alltoall moves k copies per
    token (moe.a2a_s); deepep and hybridep one per destination NVLink domain over the network and one per destination
    rank over NVLink (moe_dispatch.hierarchical_dispatch_s); allgather is half of an all-gather +
    reduce-scatter pair over the EP group of ep x routed tokens (ranks etp apart: _link), so that forward + backward
    (4 dispatches) make the dispatcher's 2 + 2."""
    ep, etp, d = arr["ep"], arr["etp"], arr["moe_dispatcher"]
    h = model.hidden_size
    a2a = moe.a2a_s(np.asarray(routed, dtype=np.float64) * model.moe_router_topk, h, c, ep, etp, cluster)
    deepep = moe_dispatch.hierarchical_dispatch_s(model, routed, h, c, ep, etp, cluster)
    bw, lat = _link(cluster, ep * etp, etp)
    nbytes = moe_dispatch.allgather_bytes(routed, h, c, ep)
    pair = ring_s("all_gather", ep, nbytes, bw, lat) + ring_s("reduce_scatter", ep, nbytes, bw, lat)
    return np.select([d == 1, d >= 2], [pair / 2.0, deepep], a2a)

"""Step-time model (docs/memory_model.md "Modelling assumptions"): per-layer roofline compute, memory-bound kernels, alpha-beta
communication per axis, the busiest pipeline stage and its bubble. One vectorised implementation (`perf_arrays`);
`estimate_perf` wraps it for one plan. Terms other than GEMMs and collectives live in autotune/predict/perf_terms.py.

Coefficients in ClusterSpec, fitted per GPU type on public measured runs (autotune/fitting/fit_reference.py,
benchmarks/model_accuracy.py): `matmul_efficiency` (fraction of peak of large GEMMs), `attention_efficiency`
(FlashAttention kernels), `memory_efficiency` (fraction of HBM bandwidth of elementwise kernels), `comm_efficiency`
(fraction of link bandwidth NCCL reaches) and `dp_overlap` (fraction of overlapped data-parallel traffic really hidden).

Per micro-batch and layer on one rank (tokens = b*s/cp):
  GEMM   = tokens * 2 N_layer / tp * passes / (peak * eff), passes = 3 (fwd + bwd), 4 with full recompute
           (Korthikanti et al. 2022 Eq. 7 vs 8); eff = matmul_efficiency * m/(m + GEMM_M0) * n/(n + GEMM_N0) with
           m = tokens, n = h/tp (tile quantisation and memory-bound tails of narrow GEMMs).
  attention, memory-bound (norms, RoPE, SwiGLU, residuals; selective recompute re-runs them): perf_terms; with
    plan.compile the memory-bound part times cluster.compile_memory_traffic_factor (Inductor fusion, perf_terms).
  TP (Megatron, Narayanan et al. 2021 Sec 3.2 / Korthikanti Sec 4.2.2): 4 all-reduces of b*s*h*c (6 with full
    recompute; SP: all-gather + reduce-scatter, same volume), on the critical path (not overlapped).
  With plan.tp_overlap (SP only) the collectives are decomposed behind the GEMMs they feed:
    perf_terms.tp_overlap_layer_s (Wang et al. 2023 collective matmul, exposed max(C - (n-1)/n G, (1-eta) C)).
  CP (ring attention): cp-1 exchanges of the local K and V chunk forward, twice that backward, not overlapped;
    FrameworkProfile.context_parallel_attention says what runs (autotune/predict/ring_attention.py): torch's ring
    attention (torchtitan) adds its fp32 output merges and gradient accumulators as memory-bound bytes, its
    asynchronous K/V all-gather and dK/dV sends exposed beyond one ring step; bench_model's all-gathered K/V and
    masked SDPA run twice the causal FLOPs and its gathers / reduce-scatters on the critical path.
Stage time per micro-batch = its layers * layer time, + embedding on rank 0, + LM head and loss on rank pp-1; the
  busiest of ranks 0, 1, pp-1 sets the pace. compute = m * busiest stage; bubble = (pp-1)/vpp * stage time
  (Narayanan et al. 2021 Eq. 1, Sec 2.2.2 interleaving); pp = (m*vpp + pp - 1) boundaries of 2 p2p transfers +
  cluster.pp_microbatch_overhead_s each.
comm: NCCL ring bus factors (NCCL docs, "Performance: algorithm bandwidth / bus bandwidth"): all-reduce
  2(n-1)/n * bytes / bw + 2(n-1) alpha; all-gather / reduce-scatter (n-1)/n * bytes / bw + (n-1) alpha; bw = link *
  comm_efficiency, NVLink when the group fits in a node under the mesh order (pp, dp, cp, tp), InfiniBand otherwise;
  data-parallel collectives pay NCCL's ring latency with only the hops between domains at the NIC's alpha
  (collectives.ring_latency_s), once per collective the framework issues (FrameworkProfile.grad_reduce_collectives,
  fsdp_collectives_per_block: FSDP2 one per block, DeepSpeed ZeRO-3 one per fetched submodule / bucket).
DP (group dp*cp; ZeRO stages as bench_model/parallel/data_parallel.py): stages 0-1 all-reduce grads once per step
  behind the last micro-batch's backward, in FrameworkProfile.grad_reduce_collectives collectives (bench_model: one
  per FSDP2 unit; each pays the latency) (stage 1 then all-gathers params); stages 2-3 FSDP2 per block with prefetch
  (perf_terms.fsdp_exposed_s) every micro-batch, the root unit's gather and reduce-scatter exposed; under pp > 1 once
  per step where the pipeline defers the reduction (FrameworkProfile.pipeline_defers_grad_reduce).
optimizer: AdamW update at HBM bandwidth (perf_terms.optimizer_step_s); with CPU offload the update runs on the host at
  cluster.cpu_adam_params_per_s, plus for offload=optimizer the gradient D2H and parameter H2D copies at
  host_device_bw_bytes_per_s (perf_terms.offload_step_s); offload=params copies each block's shard H2D before its
  all-gather and its gradient shard D2H after its reduce-scatter (FSDP2 CPUOffloadPolicy), priced with them.
HSDP (plan.dp_shard = F/cp < dp): gathers and reduce-scatters run on the shard group of F = dp_shard*cp ranks (inner in
  the mesh: NVLink when dp_shard*cp*tp fits a node) every micro-batch; each rank all-reduces its 1/F gradient shard
  across the R = dp/dp_shard replicas (ranks dp_shard*cp*tp apart: inter-node) once per step, behind the last
  micro-batch's backward (Zhao et al. 2023, "PyTorch FSDP", Sec 3.2.2 hybrid sharding; FSDP2 reduce-scatter, then
  all-reduce over the replicate dim, skipped on earlier micro-batches with set_requires_all_reduce(False)).
FP8 / MXFP8 / NVFP4 (plan.fp8 != none; the block linears, attention (SDPA) and the LM head stay in the compute dtype):
  the block GEMMs run at the recipe's peak (peak_flops_fp8 for tensorwise/rowwise, peak_flops_mxfp8, peak_flops_nvfp4)
  at matmul_efficiency * lowp_gemm_efficiency (perf_terms.linear_efficiency_factor), plus the casts
  (perf_terms.fp8_cast_bytes, bytes per element by recipe; fused into the producing kernels under plan.compile; a
  framework casting through Transformer Engine: perf_terms.te_fp8_cast_bytes, FrameworkProfile.fp8_casts; under TE
  with sequence parallelism the TP all-gathers move the quantized tensor, the reduce-scatters the compute dtype:
  te_fp8.te_tp_gather_bytes).
  A preset without the recipe's peak is rejected (fp8_needs_peak).
host: what the host adds per micro-batch beyond the device time (autotune/predict/host.py: per-op host cost x ops per
  layer, max(host, device) while the stream runs ahead, host + device after the MoE dispatcher's device-to-host sync).
step = compute + tp + cp + pp + exposed dp + bubble + optimizer + host; MFU = model FLOPs (ModelSpec.flops_per_token: 6N +
causal attention, Narayanan/Chowdhery) per second / (num_gpus * peak).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import FP8_CODE, RECOMPUTE_CODE, arrays_from_plans, decoded
from autotune.core.pp_layout import train_layout
from autotune.core.trial import PerfEstimate
from autotune.core.types import DTYPE_BYTES, ClusterSpec, ParallelPlan, TrainSpec
from autotune.predict import moe, recompute_share
from autotune.predict.collectives import _link, ring_s
from autotune.predict.frameworks import get_profile
from autotune.predict.gemm import GEMM_M0, GEMM_N0, gemm_efficiency  # noqa: F401  (re-exported)
from autotune.predict.host import host_step_s
from autotune.predict.perf_dp import (  # noqa: F401  (param_gather_bytes, tied_embedding_allreduce_s re-exported)
    ddp_s,
    fsdp_s,
    optimizer_s,
    param_gather_bytes,
    tied_embedding_allreduce_s,
)
from autotune.predict.perf_moe import moe_terms
from autotune.predict.perf_terms import (
    attention_passes,
    attention_s,
    compiled_elementwise_factor,
    elementwise_bytes_per_token,
    fp8_cast_bytes,
    host_device_s,
    linear_efficiency_factor,
    linear_peak_flops,
    loss_bytes_per_token,
    loss_head_passes,
    loss_kernel_codes,
    memory_bound_s,
    require_offload_fields,
    require_perf_fields,
    streaming_s,
    te_fp8_cast_bytes,
    tp_overlap_layer_s,
)
from autotune.predict.pp_overlap import pp_comm_s
from autotune.predict.pp_stages import train_flops_per_token
from autotune.predict.rank_params import POSITIONS, rank_params
from autotune.predict.ring_attention import (
    ALLGATHER_MASK_FLOPS_FACTOR,
    allgather_mask_comm_s,
    ring_backward_accum_bytes,
    ring_comm_exposed_s,
    ring_forward_merge_bytes,
)
from autotune.predict.rope import unfused_rope_extra_bytes
from autotune.predict.schedule import bubble_microbatches
from autotune.predict.te_fp8 import te_cast_layouts, te_tp_gather_bytes

EMBEDDING_ACCESSES = 4  # gather: read row + write output (forward); backward: read grad + scatter-add into the table


def _layer_terms(
    arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec
) -> dict[str, np.ndarray]:
    """Per micro-batch, per layer, on one rank: GEMM, attention, memory-bound, TP and CP seconds."""
    tp, cp, mbs, sp, rc = arr["tp"], arr["cp"], arr["micro_batch_size"], arr["sequence_parallel"], arr["recompute"]
    c = DTYPE_BYTES[train.compute_dtype]
    peak = cluster.peak_flops(train.compute_dtype)
    tokens = mbs * train.seq_len / cp
    # the share of the rank's layers full recompute re-runs (plan.recompute_layers: recompute_share.py), 0 or 1 else
    full = recompute_share.full_recompute_share(arr, model.num_layers / arr["pp"])
    passes = 3.0 + full  # forward-equivalents: fwd + bwd (2x), + one forward with full recompute
    h = model.hidden_size
    # the matmul parameters a token passes through (ModelSpec.active_matmul_params: of an MoE layer the router, the
    # top-k experts and the shared expert); the routed experts' share runs as grouped GEMMs, priced in perf_moe.moe_terms
    routed = model.num_moe_layers * moe.routed_active_params(model) if model.is_moe else 0
    per_layer_matmul = (model.active_matmul_params() - model.vocab_size * h - routed) / model.num_layers
    fp8 = arr["fp8"] != FP8_CODE["none"]
    # each recipe's tensor-core peak; a preset without it keeps the compute-dtype peak (rejected: fp8_needs_peak)
    linear_peak = linear_peak_flops(arr["fp8"], cluster, peak)
    linear_eff = cluster.matmul_efficiency * linear_efficiency_factor(arr["fp8"], cluster)
    gemm_rate = linear_peak * gemm_efficiency(linear_eff, tokens, h / tp)  # FLOP/s of the block's linears
    gemm = tokens * 2.0 * per_layer_matmul / tp * passes / gemm_rate
    # plan.mlp_recompute (Megatron's mlp module): the dense layers' SwiGLU MLP forward once more (3 h f weights per
    # token), averaged over the layers as `per_layer_matmul`
    dense = (model.num_layers - (model.num_moe_layers if model.is_moe else 0)) / model.num_layers
    mlp_s = tokens * 2.0 * 3 * h * model.ffn_hidden_size / tp / gemm_rate
    gemm = gemm + np.where(recompute_share.module_on(arr, "mlp_recompute"), dense * mlp_s, 0.0)
    if model.attention == "mla":  # plan.mla_recompute (Megatron's mla_up_proj): the up projections once more
        dqk, qr = model.qk_nope_head_dim + model.qk_rope_head_dim, model.q_lora_rank or h
        up = model.num_heads * (dqk * qr + (model.qk_nope_head_dim + model.v_head_dim) * model.kv_lora_rank)
        up_s = tokens * 2.0 * up / tp / gemm_rate
        gemm = gemm + np.where(arr["mla_recompute"], up_s, 0.0)
    # FA2 or FA3/cuDNN (attention_terms.attention_s): the job's, else its framework's
    profile = get_profile(train.framework)
    kernel = train.attention_kernel or profile.attention_kernel()
    # train.fp8_attention (autotune/core/train.py): the attention matmuls at the FP8 peak where a recipe runs
    attn_peak = np.where(fp8 & train.fp8_attention, cluster.peak_flops_fp8 or peak, peak)
    attn = attention_s(tokens, train.seq_len, model, tp, passes, cluster, attn_peak, train.seq_len / cp, kernel)
    # elementwise: forward once, backward ~2x (reads saved input and incoming grad, writes grad), + a forward re-run
    # with selective (non-matmul ops) or full recompute
    sel = (rc == RECOMPUTE_CODE["selective"]) & profile.selective_reruns_elementwise()
    glu = profile.compiled_selective_rerun_bytes(model, c, tp)  # a compiled selective of one region (bench_model)
    comp_sel = sel & arr["compile"].astype(bool) if glu is not None else np.zeros_like(sel)
    ew_passes = 3.0 + np.where(sel & ~comp_sel, 1.0, full)
    mem = memory_bound_s(tokens * elementwise_bytes_per_token(model, c, tp, sp) * ew_passes, cluster)
    mem = mem * compiled_elementwise_factor(arr["compile"], cluster, model.block)  # eager kernels / fusion (perf_terms)
    if glu is not None:
        mem = mem + np.where(comp_sel, memory_bound_s(tokens * glu, cluster), 0.0)
    te = (train.fp8_casts or profile.fp8_casts()) == "te"  # the job's, else its framework's
    if te:  # Transformer Engine's fused cast-transposes (perf_terms), one FP8 copy where the GPU takes any layout
        layouts = te_cast_layouts(arr["fp8"], cluster)
        casts = te_fp8_cast_bytes(model, c, tp, tokens, full, arr["fp8"], arr["grad_accum_steps"], layouts, sp)
    else:
        casts = fp8_cast_bytes(model, c, tp, tokens, full, arr["fp8"], arr["compile"])  # compiled: fused casts
    # a cast streams a whole activation / weight tensor (TE's cast-transpose, torchao's amax + scaled cast: tens of MB
    # per kernel), the regime of perf_terms.streaming_s, not the blocks' mix of short eager kernels memory_efficiency
    # is fitted on
    mem = mem + np.where(fp8, streaming_s(casts, cluster), 0.0)
    # plan.norm_recompute (Megatron's layernorm module): the separate norms' forward once more in backward, reading
    # and writing c h per token (sequence-sharded with SP): MLA's input norm on every layer, the pre-MLP norm on MoE
    # layers (averaged over the layers, as `per_layer_matmul`)
    norms = float(model.attention == "mla") + (model.num_moe_layers / model.num_layers if model.is_moe else 0.0)
    norm_rerun = tokens * norms * 2.0 * c * h / np.where(sp, tp, 1)
    mem = mem + np.where(recompute_share.module_on(arr, "norm_recompute"), memory_bound_s(norm_rerun, cluster), 0.0)
    if profile.unfused_scaled_rope():  # YaRN's attention factor != 1 (predict/rope.py)
        mem = mem + memory_bound_s(tokens * unfused_rope_extra_bytes(model, c, tp, full), cluster)
    attn_gemm = min(model.attention_params() / per_layer_matmul, 1.0) * gemm  # split by the blocks' matmuls
    tp_s = _tp_layer_s(arr, model, cluster, tokens * h, c, te, attn_gemm, gemm - attn_gemm)
    bw, lat = _link(cluster, tp * cp, tp)
    cp_attention = profile.context_parallel_attention()
    if cp_attention == "torch_ring":  # torch's ring attention: merges, fp32 grads, async K/V (ring_attention.py)
        repeat = profile.sdpa_repeats_kv() if train.sdpa_repeat_kv is None else train.sdpa_repeat_kv
        q_elems = tokens * model.q_dim / tp
        kv_elems = tokens * (model.q_dim if repeat else model.kv_dim) / tp
        fwd_passes = 1.0 + full
        ring_bytes = ring_forward_merge_bytes(q_elems, cp, c) * fwd_passes
        # eager elementwise kernels inside the SDPA op's DTensor dispatch: not under compile's fusion factor
        mem = mem + memory_bound_s(ring_bytes + ring_backward_accum_bytes(q_elems, kv_elems, cp, c), cluster)
        cp_s = ring_comm_exposed_s(kv_elems, cp, c, bw, lat, attn / attention_passes(passes), fwd_passes)
    elif cp_attention == "allgather_mask":  # bench_model: gathered K/V, one masked SDPA (ring_attention.py)
        attn = np.where(cp > 1, ALLGATHER_MASK_FLOPS_FACTOR * attn, attn)
        cp_s = allgather_mask_comm_s(tokens * model.kv_dim / tp, cp, c, bw, lat, 1.0 + full)
    else:
        kv_chunk = 2 * tokens * model.kv_dim / tp * c
        cp_s = 3 * (cp - 1) * (kv_chunk / bw + lat)
    out = {"gemm": gemm, "attn": attn, "mem": mem, "tp": tp_s, "cp": cp_s, "passes": passes, "tokens": tokens}
    out.update(moe_terms(arr, model, train, cluster, tokens, passes, linear_peak, linear_eff))
    # plan.ep_overlap (Megatron's combined 1F1B): the all-to-alls behind another micro-batch's compute of the layer,
    # exposed what exceeds it, the contention of the rest (dp_overlap) and the unpaired warm-up / cool-down chunks;
    # without it all exposed (moe.py)
    unpaired = moe.ep_overlap_unpaired(arr["pp"], arr["vpp"], arr["grad_accum_steps"])
    layer = gemm + attn + mem + out["moe_compute"]
    out["ep"] = moe.ep_overlap_exposed_s(out["ep"], layer, arr["ep_overlap"], unpaired, cluster.dp_overlap)
    return out


def _tp_layer_s(
    arr: dict[str, np.ndarray],
    model: ModelSpec,
    cluster: ClusterSpec,
    elems: np.ndarray,
    c: int,
    te: bool,
    attn_gemm: np.ndarray,
    mlp_gemm: np.ndarray,
) -> np.ndarray:
    """One layer's TP seconds per micro-batch for activations of `elems` elements: 4 all-reduces (6 with full
    recompute; under SP an all-gather + reduce-scatter each, the same volume); under a TE recipe with SP the all-gathers
    move the quantized tensor (te_fp8.te_tp_gather_bytes); with plan.tp_overlap decomposed behind the attention and MLP
    linears' GEMMs (perf_terms.tp_overlap_layer_s)."""
    tp, sp, fp8 = arr["tp"], arr["sequence_parallel"], arr["fp8"] != FP8_CODE["none"]
    n = 4.0 + 2.0 * recompute_share.full_recompute_share(arr, model.num_layers / arr["pp"])
    bw, lat = _link(cluster, tp)
    tp_s = n * ring_s("all_reduce", tp, elems * c, bw, lat)
    if te and (fp8 & sp).any():  # SP under a TE recipe: each all-gather moves the quantized tensor (te_fp8.py)
        ag = ring_s("all_gather", tp, elems * te_tp_gather_bytes(arr["fp8"], c, sp), bw, lat)
        tp_s = np.where(fp8 & sp, n * (ag + ring_s("reduce_scatter", tp, elems * c, bw, lat)), tp_s)
    if arr["tp_overlap"].any():  # the SP collectives decomposed behind the linears' GEMMs (perf_terms)
        tp_s = np.where(arr["tp_overlap"], tp_overlap_layer_s(tp_s, attn_gemm, mlp_gemm, tp), tp_s)
    return tp_s


def _busiest_stage(
    arr: dict[str, np.ndarray],
    model: ModelSpec,
    train: TrainSpec,
    cluster: ClusterSpec,
    lt: dict[str, np.ndarray],
    ranks: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Per micro-batch compute, TP and CP seconds of the busiest of pipeline ranks 0, 1 and pp-1 (its layers, + the
    embedding on rank 0, + LM head and loss on rank pp-1), and its layer count: the slowest stage sets the pipeline's
    pace (Narayanan et al. 2021 Sec 2.2). Head: 3 passes of the V x h GEMM (2 FLOPs per MAC; Korthikanti et al. 2022
    Eq. 7's logit term; 4 when the loss is checkpointed) and the loss kernel's bytes per logit (perf_terms
    .LOSS_KERNELS); embedding: EMBEDDING_ACCESSES of b*s*h at HBM bandwidth."""
    tp, pp = arr["tp"], arr["pp"]
    c = DTYPE_BYTES[train.compute_dtype]
    peak = cluster.peak_flops(train.compute_dtype)
    tokens, h, V = lt["tokens"], model.hidden_size, model.vocab_size
    # the loss kernel the job runs (perf_terms.LOSS_KERNELS): its head GEMM passes and its bytes per logit
    loss = loss_kernel_codes(train.loss_kernel, get_profile(train.framework).loss_kernel(arr))
    head = tokens * 2.0 * loss_head_passes(loss) * V * h / tp / (
        peak * gemm_efficiency(cluster.matmul_efficiency, tokens, V / tp)
    ) + streaming_s(tokens * loss_bytes_per_token(model, c, tp, loss), cluster)  # whole logits / 1024-token chunks
    emb = memory_bound_s(tokens * h * c * EMBEDDING_ACCESSES, cluster)
    # train.mtp_num_layers: the last stage runs the output head and loss once more per MTP module (gpt_model.py
    # `_postprocess`); the stage holding a module its eh_proj GEMM (2h -> h, column-parallel) and its embedding
    # lookup; the module's transformer layer is in the stage's layer count (rank_params.rank_params)
    n_mtp = train.mtp_num_layers
    eh_proj = tokens * 6.0 * 2 * h * h / tp / (peak * gemm_efficiency(cluster.matmul_efficiency, tokens, h / tp)) + emb
    parts = {}
    for pos in ("first", "second", "last"):
        n_layers, rank, n_moe = ranks[f"layers_{pos}"], ranks[f"rank_{pos}"], ranks[f"moe_layers_{pos}"]
        ends = np.where(rank == 0, emb, 0.0) + np.where(rank == pp - 1, head * (1 + n_mtp), 0.0)
        ends = ends + ranks[f"mtp_{pos}"] * eh_proj
        compute = n_layers * lt["compute"] + ends
        if model.is_moe:  # the routed experts and the all-to-alls of this rank's MoE layers
            compute = compute + n_moe * lt["moe_compute"]
        parts[pos] = (compute, n_layers * lt["tp"], n_layers * lt["cp"], n_moe * lt["ep"], n_layers, n_moe, ends)
    totals = np.stack([sum(parts[q][:4]) for q in ("first", "second", "last")])
    busy = np.argmax(totals, axis=0)
    pick = [
        np.choose(busy, [np.broadcast_to(parts[q][i], busy.shape) for q in ("first", "second", "last")])
        for i in range(7)
    ]
    keys = ("compute", "tp", "cp", "ep", "layers", "moe_layers", "ends")  # ends: of compute, embedding + head + loss
    return dict(zip(keys, pick))


def _stage_ranks(arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec) -> dict[str, Any]:
    """The pipeline ranks' parameters and layers (rank_params.rank_params) under the layout's split: Megatron's embedding /
    loss accounting moves a layer off the end stages; nanotron's compute-balanced walk gives rank 0 the ceiling of its
    share (FrameworkProfile.pipeline_layers)."""
    return rank_params(
        model, arr["tp"], arr["pp"], arr["vpp"], arr["ep"], arr["etp"],
        pp_split=(arr["pp_split_embedding"], arr["pp_split_loss"]),
        layers_fn=get_profile(train.framework).pipeline_layers,
        mtp_num_layers=train.mtp_num_layers,
        layout=train_layout(train.pp_layout),
    )  # fmt: skip


def ends_compute_s(arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec) -> np.ndarray:
    """Of perf_arrays' compute_s, the busiest stage's embedding and LM head + loss (a scale-down replica times them
    apart on CPU ranks: autotune/predict/compose.py, bench_model/ends_timing.py)."""
    lt = _layer_terms(arr, model, train, cluster)
    lt["compute"] = lt["gemm"] + lt["attn"] + lt["mem"]
    ranks = _stage_ranks(arr, model, train)
    return arr["grad_accum_steps"] * _busiest_stage(arr, model, train, cluster, lt, ranks)["ends"]


def perf_arrays(
    arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec
) -> dict[str, np.ndarray]:
    """Vectorised step-time model. Keys: compute_s, tp_comm_s, cp_comm_s, pp_comm_s, dp_comm_s (exposed), bubble_s,
    optimizer_s, step_s, tokens_per_s, tokens_per_s_per_gpu, mfu (plus attention_s, memory_bound_s: parts of
    compute_s; dp_replicate_comm_s: HSDP's all-reduce across replicas before overlap, inside dp_comm_s)."""
    require_perf_fields(cluster)
    require_offload_fields(cluster, decoded("offload", np.unique(arr["offload"])))
    m, pp, vpp, z = arr["grad_accum_steps"], arr["pp"], arr["vpp"], arr["zero_stage"]
    num_gpus = arr["dp"] * arr["tp"] * pp * arr["cp"]
    lt = _layer_terms(arr, model, train, cluster)
    lt["compute"] = lt["gemm"] + lt["attn"] + lt["mem"]
    ranks = _stage_ranks(arr, model, train)
    stage = _busiest_stage(arr, model, train, cluster, lt, ranks)
    stage["fwd_layer"] = lt["compute"] / lt["passes"]
    stage["bwd_layer"] = lt["compute"] - stage["fwd_layer"]
    compute, tp_s, cp_s = m * stage["compute"], m * stage["tp"], m * stage["cp"]
    # Narayanan et al. 2021 Eq. 1 / Sec 2.2.2: (p-1)/(m v) of m stage times
    bubble = bubble_microbatches(pp, vpp) * (stage["compute"] + stage["tp"] + stage["cp"])
    if model.is_moe:  # expert-parallel all-to-alls on the critical path, like TP's collectives
        bubble = bubble + bubble_microbatches(pp, vpp) * stage["ep"]
    psi = np.maximum.reduce([ranks["first"], ranks["second"], ranks["last"]])  # parameters of the largest stage
    fsdp, replicate = fsdp_s(arr, model, train, cluster, ranks, stage)
    # the largest stage's dense block-linear weights (psi holds no routed experts; --fp8-param-gather gathers them quantized)
    lin = np.maximum.reduce([ranks[f"layers_{p}"] * ranks["layer_matmul"] for p in POSITIONS])
    # the routed experts' gradients on their own (expert-data-parallel) group, hidden with the dense ones behind the
    # whole stage's backward: its MoE layers' compute included (perf_dp.expert_ddp_s)
    psi_experts = np.maximum.reduce([np.asarray(ranks[f"expert_{p}"], dtype=np.float64) for p in POSITIONS])
    moe_fwd = stage["moe_layers"] * lt["moe_compute"] / lt["passes"] if model.is_moe else 0.0
    stage["fwd_window"] = stage["layers"] * stage["fwd_layer"] + moe_fwd
    stage["bwd_window"] = stage["layers"] * stage["bwd_layer"] + (
        stage["moe_layers"] * lt["moe_compute"] - moe_fwd if model.is_moe else 0.0
    )
    # [OVL] one chunk of the busiest stage: its forward / backward windows (layers and MoE compute) over vpp
    pp_s = pp_comm_s(arr, model, train, cluster, lt["tokens"], (stage["fwd_window"] / vpp, stage["bwd_window"] / vpp))
    dp_exposed = np.where(z >= 2, fsdp, ddp_s(arr, train, cluster, psi, stage, lin, psi_experts))
    opt = optimizer_s(arr, train, cluster, psi, psi_experts)
    ep_s = m * stage["ep"]
    step = compute + tp_s + cp_s + pp_s + dp_exposed + bubble + opt
    if arr["act_offload_layers"].any() or arr["moe_offload"].any():  # activation CPU offload (layers or MoE modules):
        # D2H after each forward, H2D before its backward,
        # hidden behind the micro-batch's compute (Transformer Engine's offload runs on its own stream); the rest shows
        from autotune.predict.memory import memory_arrays

        moved = memory_arrays(arr, model, train, cluster)["act_offloaded"]
        step = step + m * np.maximum(2.0 * host_device_s(moved, cluster) - stage["compute"], 0.0)
    if model.is_moe:
        step = step + ep_s
    host = m * host_step_s(arr, model, train, cluster, lt, stage)
    step = step + host
    tokens_per_s = train.global_batch_tokens / step
    peak = cluster.peak_flops(train.compute_dtype)
    return {
        "compute_s": compute,
        "tp_comm_s": tp_s,
        "cp_comm_s": cp_s,
        "ep_comm_s": ep_s,
        "pp_comm_s": pp_s,
        "dp_comm_s": dp_exposed,
        "dp_replicate_comm_s": np.where(z >= 2, replicate, 0.0),
        "bubble_s": bubble,
        "optimizer_s": opt,
        "host_s": host,
        "attention_s": m * stage["layers"] * lt["attn"],
        "memory_bound_s": m * stage["layers"] * lt["mem"],
        "step_s": step,
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_gpu": tokens_per_s / num_gpus,
        "mfu": train_flops_per_token(model, train) * tokens_per_s / (num_gpus * peak),
    }


def estimate_perf(plan: ParallelPlan, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec) -> PerfEstimate:
    r = perf_arrays(arrays_from_plans([plan]), model, train, cluster)
    keep = {f.name for f in dataclasses.fields(PerfEstimate)}
    return PerfEstimate(**{k: float(v[0]) for k, v in r.items() if k in keep})

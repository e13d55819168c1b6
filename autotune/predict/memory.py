"""Worst-rank memory model (docs/memory_model.md "Modelling assumptions"): bytes per component for one training step.

Every formula exists once, vectorised over candidate arrays (`memory_arrays`); `estimate_memory` is the scalar wrapper
that calls it with length-1 arrays. Notation: Psi = parameters on this rank after the TP/PP split, D = dp*cp (the
ZeRO/FSDP sharding group: context-parallel ranks hold identical parameters, torchtitan's "dp_shard_cp"; with HSDP
D = dp_shard*cp, `shard_group`),
t = tp, s = seq_len/cp (tokens per rank), b = micro-batch size, h = hidden, f = ffn hidden, a = heads, k = kv_dim.

Pipeline (Korthikanti Eq. 5 and its interleaving note; Narayanan et al. 2021 Sec 2.2): rank r of 1F1B holds
  min(pp - r, m) micro-batches in flight, interleaved 1F1B ((pp-r-1)*2 + (vpp-1)*pp + 1)/vpp (rank 0:
  pp*(1 + (pp-1)/(pp*vpp))); GPipe holds all m. Layers per rank follow bench_model's split (`layers_of_rank`) or
  the framework's own (FrameworkProfile.pipeline_layers: nanotron's compute-balanced walk).
  The worst rank is the largest of ranks 0 (embedding, most micro-batches), 1 (gets uneven-split extra layers first)
  and pp-1 (head, final norm, logits).
The terms themselves come from the framework profile that train.framework names (autotune/predict/frameworks/,
docs/frameworks.md); autotune's own trainer's accounting, derived term by term, is
autotune/predict/frameworks/bench_model.py. This module only puts them together: per pipeline position, the worst
rank, the host column, the reserved peak.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import OFFLOAD_CODE, RECOMPUTE_CODE, arrays_from_plans
from autotune.core.pp_layout import train_layout
from autotune.core.trial import MemoryEstimate
from autotune.core.types import DTYPE_BYTES, ClusterSpec, ParallelPlan, TrainSpec
from autotune.predict import moe, moe_dispatch, recompute_share
from autotune.predict.frameworks import get_profile
from autotune.predict.rank_params import (
    POSITIONS,
    largest_local_param,
    quantized_weight_delta,
    rank_params,
    shard_group,
)
from autotune.predict.reserved import allocator_cache, allocator_reserved
from autotune.predict.schedule import (
    accumulated_grad_share,
    interleaved_chunk_weight,
)


def _rank_memory(arr, model, train, psi, pos: str, layer_act, extras, prof) -> dict[str, np.ndarray]:
    pp, z, shard = arr["pp"], arr["zero_stage"], shard_group(arr)
    ms = prof.model_states(psi[pos], z, shard, train, arr["offload"])  # bench_model: model_state_arrays
    if model.is_moe:  # the experts' states, sharded over the expert-data-parallel group edp (autotune/predict/moe.py)
        edp = moe.expert_shard_group(arr["dp"] * arr["cp"] * arr["tp"] * pp, pp, arr["ep"], arr["etp"])
        ex = prof.expert_states(psi[f"expert_{pos}"], z, edp, shard, train, arr["offload"])
        ms = {k: ms[k] + ex[k] for k in ms}
    ms["params"] = ms["params"] + quantized_weight_delta(arr, psi, pos, extras["weight_dq"])
    # what the data-parallel wrapper keeps across the pipeline's micro-batches (FSDP2 under torch pipelining:
    # FrameworkProfile.pipeline_held); the held copy is the whole stage's, the FSDP2 root unit included
    held = prof.pipeline_held(psi[pos] + psi[f"expert_{pos}"], z, shard, pp, train)
    # bench_model: the FSDP2 root unit (embedding, norm, head) stays gathered all step, also in stage 3
    root = prof.root_copy(psi[f"root_{pos}"], z, train)
    copy = ms["compute_copy"] + np.where(held["compute_copy"] > 0, 0.0, root) + held["compute_copy"]
    inflight = prof.inflight(pp, arr["vpp"], arr["grad_accum_steps"], arr["pp_schedule"], psi[f"rank_{pos}"])
    saved, moe_act = layer_act["saved"], extras.get("moe_act", 0.0)
    if "saved_kept" in layer_act:  # plan.recompute_layers: the rank's recomputed share keeps inputs, the rest all
        share = recompute_share.full_recompute_share(arr, psi[f"layers_{pos}"])
        saved = share * saved + (1.0 - share) * layer_act["saved_kept"]
        if model.is_moe:
            moe_act = share * moe_act + (1.0 - share) * extras["moe_act_kept"]
    # interleaved 1F1B with chunks of unequal size: the chunks the warm-up runs most often weigh more
    weight = interleaved_chunk_weight(
        psi[f"chunks_{pos}"], pp, arr["vpp"], arr["grad_accum_steps"], arr["pp_schedule"], psi[f"rank_{pos}"]
    )
    act = psi[f"layers_{pos}"] * saved * inflight * weight + layer_act["transient"]
    if model.is_moe:  # an MoE layer keeps its routed tokens' tensors instead of the dense MLP's (moe.py)
        act = act + psi[f"moe_layers_{pos}"] * moe_act * inflight * weight
        act = act + prof.expert_cast_bytes(psi[f"expert_{pos}"], z, train) * inflight
    # plan.mlp_recompute (Megatron's mlp module): the rank's dense layers keep their MLP's input only; one layer's
    # MLP activations come back in its backward
    dense = psi[f"layers_{pos}"] - psi[f"moe_layers_{pos}"]
    act = act - dense * extras["mlp_rc"] * inflight * weight + np.where(dense > 0, extras["mlp_rc"], 0.0)
    # plan.act_offload_layers (Megatron --cpu-offloading-num-layers, pp = 1): the saved tensors of N of the rank's
    # layers live on the host from their forward to their backward; as a share of the per-layer terms above
    off = np.minimum(arr["act_offload_layers"], psi[f"layers_{pos}"]) / np.maximum(psi[f"layers_{pos}"], 1)
    offloaded = off * (act - layer_act["transient"])
    # plan.moe_offload (Megatron fine-grained activation offloading): each in-flight micro-batch's offloaded expert
    # inputs of the rank's MoE layers; `moved` is one micro-batch's (what perf prices as D2H and back)
    moved = psi[f"moe_layers_{pos}"] * extras.get("moe_offload", 0.0)
    offloaded = offloaded + moved * inflight
    act = act - offloaded
    act = act + np.where(psi[f"rank_{pos}"] == 0, extras["first_act"] * inflight, 0.0)
    is_last = psi[f"rank_{pos}"] == pp - 1
    head_n = prof.last_stage_inflight(pp, arr["grad_accum_steps"], arr["pp_schedule"])  # 1 but for all-forward engines
    # train.mtp_num_layers: the loss rank computes the head and loss once more per MTP module, each kept to its
    # backward (gpt_model.py `_postprocess` @ core_v0.16.1); a rank holding MTP modules keeps, per in-flight
    # micro-batch, the inputs of their enorm / hnorm (h each) and eh_proj (2h), sequence-sharded under SP
    heads = 1 + train.mtp_num_layers
    act = act + np.where(is_last, extras["head_act"] * head_n * heads, 0.0)
    act = act + psi[f"mtp_{pos}"] * extras["mtp_act"] * inflight
    # the schedule's kept outputs (torchtitan) and deferred output-layer wgrad buffers (Megatron)
    act = act + np.where(is_last & (pp > 1), extras["pp_outputs"], 0.0)
    # the pipeline engine's receive buffers and kept stage outputs (FrameworkProfile.pipeline_stage_buffers)
    act = act + prof.pipeline_stage_buffers(
        extras["hidden"], arr["grad_accum_steps"], inflight, psi[f"rank_{pos}"], pp, arr["vpp"], arr["recompute"]
    )
    logits = np.where(is_last, extras["logits"] * head_n * heads, 0.0)
    params = ms["params"] + copy
    # bench_model: the sum of every term; a profile whose peak is one phase or another says so (FrameworkProfile.allocated)
    alloc = prof.allocated(params, ms["grads"], ms["optimizer"], act, logits, extras["buffers"], layer_act["transient"])
    # held in every phase (outside the profile's choice of peak); under a one-round interleaved schedule only the
    # chunk whose backward runs first has its accumulator at the peak (schedule.accumulated_grad_share)
    share = accumulated_grad_share(pp, arr["vpp"], arr["grad_accum_steps"], arr["pp_schedule"], psi[f"layers_{pos}"])
    held = {**held, "grads": held["grads"] * share}
    alloc = alloc + held["grads"]
    # grads freed after every micro-batch's backward (FrameworkProfile.backward_only_grads; nanotron's bf16 .grad):
    # the forward's end holds everything but them; a backward's end holds them but not that micro-batch's layers'
    # activations nor its logits. The peak is the larger: the sum less min(those grads, what that backward freed)
    # (0 for the other profiles: alloc unchanged)
    bwd = prof.backward_only_grads(psi[pos] + psi[f"expert_{pos}"], train)
    freed = psi[f"layers_{pos}"] * saved + layer_act["transient"] + np.where(is_last, extras["logits"], 0.0)
    alloc = alloc - np.minimum(bwd, freed)
    return {
        "params": params,
        "compute_copy": copy,
        "grads": ms["grads"] + held["grads"],
        "optimizer": ms["optimizer"],
        "activations": act,
        "logits": logits,
        "allocated": alloc,
        "host": ms["host"] + offloaded,
        "act_offloaded": offloaded - moved * inflight + moved,  # per micro-batch (act_offload_layers: pp = 1)
    }


def _layer_activations(prof, arr: dict, model: ModelSpec, seq: Any, c: int, recompute: np.ndarray) -> dict:
    """One layer's saved / transient activation bytes under the recompute codes `recompute`: the profile's account,
    its compiled variant where plan.compile, less its FP8 saving."""
    mbs, tp, sp = arr["micro_batch_size"], arr["tp"], arr["sequence_parallel"]
    layer_act = prof.layer_activations(model, seq, mbs, tp, sp, recompute, c)
    if np.any(arr["compile"]):  # what torch.compile recomputes instead of saving (the profile's own account)
        comp = prof.compiled_layer_activations(model, seq, mbs, tp, sp, recompute, c)
        layer_act = {k: np.where(arr["compile"], comp[k], v) for k, v in layer_act.items()}
    # CP's per-layer saved K/V and mask (FrameworkProfile.context_parallel_saved): kept, or under full recompute
    # rebuilt with the layer in its backward (a transient of that one layer)
    cp_saved = prof.context_parallel_saved(model, seq, mbs, tp, arr["cp"], c)
    full = np.asarray(recompute) == RECOMPUTE_CODE["full"]
    # plan.mla_recompute (Megatron's mla_up_proj, FrameworkProfile.mla_recompute_saving): q, k, v made again in backward
    mla_cut = np.where(
        recompute_share.module_on(arr, "mla_recompute", recompute),
        prof.mla_recompute_saving(model, seq * mbs, tp, c),
        0.0,
    )
    # plan.norm_recompute (Megatron's layernorm module): the separate input norm's output made again in backward
    norm = recompute_share.module_on(arr, "norm_recompute", recompute)
    norm_cut = np.where(norm, prof.norm_recompute_saving(model, seq * mbs, tp, sp, c, arr["fp8"])[0], 0.0)
    layer_act = {
        **layer_act,
        "saved": layer_act["saved"] + np.where(full, 0.0, cp_saved) - mla_cut - norm_cut,
        "transient": layer_act["transient"] + np.where(full, cp_saved, 0.0),
    }
    return fp8_layer_activations(prof, layer_act, {**arr, "recompute": recompute}, model, seq, c)


def fp8_layer_activations(prof, layer_act: dict, arr: dict, model: ModelSpec, seq: Any, c: int) -> dict:
    """`layer_act` less what the profile's FP8 recipe does not save (`FrameworkProfile.fp8_layer_saving`; bench_model:
    torchao float8 under torch.compile, docs/memory_model.md "FP8 linears")."""
    if not np.any(np.asarray(arr["fp8"]) != 0):
        return layer_act
    tok = seq * np.asarray(arr["micro_batch_size"], dtype=np.float64)
    cut = prof.fp8_layer_saving(model, tok, arr["tp"], arr["sequence_parallel"], arr["recompute"], arr["compile"],
                                arr["fp8"], c)  # fmt: skip
    return {**layer_act, "saved": layer_act["saved"] - cut}


def memory_arrays(
    arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, profile=None
) -> dict[str, np.ndarray]:
    """Vectorised worst-rank memory for plan arrays (see `autotune.core.plan_arrays`). Keys: params (incl. compute_copy),
    compute_copy, grads, optimizer, activations, logits, buffers, overhead, allocated, step_temporaries (optimizer-step
    transients), backward_grads (the grads made in the first backward), cached_logits / cached_step / cached_grads
    (what the caching allocator keeps beyond the allocated peak, per class), allocator_reserved = allocator_peak (the
    caching allocator's reserved peak, what torch.cuda.max_memory_reserved reports), device_total = reserved (plus the overhead outside the allocator: what
    `fits` compares with the device; bytes), worst_pp_rank (the pipeline rank these numbers describe) and
    worst_pp_rank_layers (its transformer layers). `profile` (default: train.framework's) is the framework whose
    accounting applies (autotune/predict/frameworks/)."""
    prof = (get_profile(train.framework) if profile is None else profile).for_train(train)
    tp, cp, z, sp = arr["tp"], arr["cp"], arr["zero_stage"], arr["sequence_parallel"]
    c = DTYPE_BYTES[train.compute_dtype]
    pp_split = (arr["pp_split_embedding"], arr["pp_split_loss"])  # Megatron's pipeline-split accounting
    psi = rank_params(
        model, tp, arr["pp"], arr["vpp"], arr["ep"], arr["etp"], prof.moe_tp_replicated_params(model), pp_split,
        prof.pipeline_layers, train.mtp_num_layers, train_layout(train.pp_layout),
    )  # fmt: skip
    seq = train.seq_len / cp
    layer_act = _layer_activations(prof, arr, model, seq, c, arr["recompute"])
    if np.any(recompute_share.partial(arr)):  # plan.recompute_layers: the chunk's other layers keep everything
        kept = _layer_activations(prof, arr, model, seq, c, recompute_share.kept_recompute(arr))
        layer_act["saved_kept"] = kept["saved"]
        layer_act["transient"] = np.maximum(layer_act["transient"], kept["transient"])
    tok = seq * arr["micro_batch_size"]
    # the ring attention's exchanged K/V and accumulators, inside one layer at a time (FrameworkProfile hook)
    ring = prof.context_parallel_transient(model, tok, tp, cp, c)
    layer_act["transient"] = layer_act["transient"] + ring
    # bench_model (FrameworkProfile's defaults): head_act = the final RMSNorm's tensors ((4 + c)h, /t with SP) and
    # the head's gathered input (ch); logits = (8 + c) bytes per fp32 logit, chunked at pp=1; buffers = FSDP2's one
    # block's unsharded gradient + fp32 reduce buffer (+ two gathered blocks in stage 3)
    extras = {
        "first_act": prof.first_stage_activations(model, tok, tp, sp, c),
        "head_act": prof.head_activations(model, tok, tp, sp, c),
        "logits": prof.logits(model, tok, arr["pp"], tp, c),
        "buffers": prof.buffers(
            prof.buffer_unit_params(psi["layer"], psi["layer_experts"], z), z, arr["dp"] * cp, train
        )
        + prof.fsdp_gather_delta(psi["layer_matmul"], z, arr["fp8"], train)  # FP8 gathered units (megatron)
        + prof.context_parallel_buffers(seq, cp),  # a CP mask cached for every layer (bench_model)
        "pp_outputs": prof.pipeline_outputs(model, tok, arr["grad_accum_steps"], tp, c)
        + prof.deferred_wgrad_buffers(model, tok, arr["grad_accum_steps"], tp, sp, c, train),
        # one micro-batch's inter-stage activation: (mbs, s/cp, h), sequence-sharded under SP
        "hidden": tok * model.hidden_size * c / np.where(sp, tp, 1),
        "mtp_act": 4 * tok * model.hidden_size * c / np.where(sp, tp, 1),
        # bytes per block-linear weight beyond the compute dtype's (megatron: train.fp8_param_gather; 0 elsewhere)
        "weight_dq": prof.stored_weight_bytes(arr["fp8"], train, cluster) - c,
    }
    mlp = recompute_share.module_on(arr, "mlp_recompute")
    extras["mlp_rc"] = np.where(mlp, prof.mlp_recompute_saving(model, tok, tp, sp, c, arr["fp8"]), 0.0)
    if np.any(arr["compile"]):  # a framework that compiles its loss with the model (torchtitan)
        comp = prof.compiled_logits(model, tok, arr["pp"], tp, c)
        extras["logits"] = np.where(arr["compile"], comp, extras["logits"])
    dispatch_transient, dispatch_runtime = 0.0, 0.0
    if (
        model.is_moe
    ):  # plan.moe_dispatcher: allgather's gathered tokens, DeepEP's buffers (moe_dispatch.dispatcher_memory_bytes)
        dispatch_transient, dispatch_runtime = moe_dispatch.dispatcher_memory_bytes(
            model, arr["moe_dispatcher"], tok, tp, sp, arr["ep"], arr["etp"], c
        )
        extras["buffers"] = extras["buffers"] + dispatch_transient
        extras["moe_act"] = prof.moe_layer_activations(
            model, tok, tp, sp, arr["recompute"], c, arr["fp8"], arr["ep"], arr["etp"], arr["micro_batch_size"]
        )
        if train.moe_routing == "collapsed":  # the busiest EP rank's extra received copies (moe.py)
            extras["moe_act"] = extras["moe_act"] + moe.collapsed_expert_bytes(
                model, tok, tp, sp, arr["recompute"], c, arr["ep"], arr["etp"]
            )
        if "saved_kept" in layer_act:  # plan.recompute_layers: an MoE layer left alone keeps its routed tokens' tensors
            rc = recompute_share.kept_recompute(arr)
            extras["moe_act_kept"] = prof.moe_layer_activations(
                model, tok, tp, sp, rc, c, arr["fp8"], arr["ep"], arr["etp"], arr["micro_batch_size"]
            )
        full = arr["recompute"] == RECOMPUTE_CODE["full"]  # keeps the layer input only already
        saving = prof.moe_recompute_saving(model, tok, tp, sp, c, arr["fp8"], arr["etp"], arr["moe_recompute"])
        extras["moe_act"] = extras["moe_act"] - np.where(full, 0.0, saving)  # plan.moe_recompute (Megatron)
        # plan.norm_recompute (Megatron's layernorm module): an MoE layer's pre-MLP norm output made again in backward
        cut = prof.norm_recompute_saving(model, tok, tp, sp, c, arr["fp8"])[1]
        extras["moe_act"] = extras["moe_act"] - np.where(recompute_share.module_on(arr, "norm_recompute"), cut, 0.0)
        moved = prof.moe_offload_bytes(model, tok, tp, sp, c, arr["fp8"], arr["etp"], arr["moe_offload"])
        extras["moe_offload"] = np.where(full, 0.0, moved)  # plan.moe_offload: on the host forward to backward
    per = [_rank_memory(arr, model, train, psi, pos, layer_act, extras, prof) for pos in POSITIONS]
    worst = np.argmax(np.stack([p["allocated"] for p in per]), axis=0)
    res = {k: np.choose(worst, [p[k] for p in per]) for k in per[0]}
    res["buffers"] = extras["buffers"] * np.ones_like(res["allocated"])
    res["host"] = np.maximum.reduce([p["host"] for p in per])  # host bytes per GPU of the rank that needs most
    res["act_offloaded"] = np.maximum.reduce([p["act_offloaded"] for p in per])  # per step: D2H and back (perf)
    res["overhead"] = np.full_like(res["allocated"], float(cluster.runtime_overhead_bytes)) + dispatch_runtime
    local = np.choose(worst, [np.broadcast_to(psi[pos], worst.shape) for pos in POSITIONS])
    shard = shard_group(arr)
    # with the optimizer on the host, AdamW's temporaries are host memory (the ZeRO-1 gather stays on the device)
    states = np.where(arr["offload"] == OFFLOAD_CODE["none"], train.optimizer_states, 0)
    largest = largest_local_param(model, tp, arr["ep"], arr["etp"])
    res["step_temporaries"] = prof.step_temporaries(
        local, z, shard, arr, states, largest, train
    )  # the framework's step
    no_fp32 = np.asarray(arr["compile"], dtype=bool) & (not prof.compiled_loss_has_fp32_block())
    no_fp32 = no_fp32 | prof.loss_without_fp32_logits()  # a loss kernel that never makes fp32 logits (megatron "te")
    # gradients made in the first backward and held to the step's end (FrameworkProfile.grads_made_in_backward)
    res["backward_grads"] = res["grads"] * float(prof.grads_made_in_backward())
    # what the caching allocator keeps beyond the allocated peak, per class (reserved.py): cached_logits / _step / _grads
    cached = allocator_cache(res, arr, train, cluster, no_fp32, res["backward_grads"])
    res.update({f"cached_{k}": v for k, v in cached.items()})
    res["allocator_reserved"] = allocator_reserved(res["allocated"], cached, cluster)  # reserved.py
    return _peaks(res, psi, worst)


def _peaks(res: dict[str, np.ndarray], psi: dict[str, Any], worst: np.ndarray) -> dict[str, np.ndarray]:
    """The two numbers kept apart (docs/memory_model.md "Two peaks"): `allocator_peak`, what the framework prints and
    publishes (torch.cuda.max_memory_reserved, Megatron's memory report: the caching allocator's segments only), and
    `device_total`, what decides an OOM and `fits`: that peak plus the memory outside the allocator (`overhead`:
    CUDA context, NCCL communicators' buffers; cluster.runtime_overhead_bytes; PyTorch's cuBLAS workspaces come from the
    caching allocator, ATen/cuda/CublasHandlePool.cpp, so they are inside the peak). `reserved` is kept as the
    device total (the name the planner's ranking, P(fits) and the trial rows have always used)."""
    res["allocator_peak"] = res["allocator_reserved"]
    res["device_total"] = res["allocator_reserved"] + res["overhead"]
    res["reserved"] = res["device_total"]
    res["worst_pp_rank"] = np.choose(worst, [np.broadcast_to(psi[f"rank_{pos}"], worst.shape) for pos in POSITIONS])
    # the transformer layers that rank holds (all its virtual stages), under the framework's split
    res["worst_pp_rank_layers"] = np.choose(
        worst, [np.broadcast_to(psi[f"layers_{pos}"], worst.shape) for pos in POSITIONS]
    )
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

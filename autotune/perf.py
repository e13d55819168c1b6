"""Step-time model (docs/memory_model.md "Modelling assumptions"): roofline compute + alpha-beta communication per
axis + pipeline bubble. One vectorised implementation (`perf_arrays`); `estimate_perf` wraps it for one plan.

The knobs calibration refits live in ClusterSpec: `matmul_efficiency` (fraction of peak reached by large GEMMs),
`comm_efficiency` (fraction of link bandwidth NCCL reaches) and `dp_overlap` (fraction of data-parallel traffic hidden
behind backward compute). Everything else is a documented constant below.

compute_s  = flops_per_token * tokens_per_rank * recompute_factor * stage_imbalance / (peak(compute_dtype) * eff)
  model FLOPs: ModelSpec.flops_per_token (6N + causal attention term). recompute_factor: full recompute runs the
  forward twice, 8/6 of model FLOPs (Korthikanti et al. 2022 Eq. 7 vs full-recompute 4 passes); selective recompute
  (the two RMSNorms and SwiGLU gating, elementwise only) costs `SELECTIVE_OVERHEAD` (Korthikanti report 1.6-2.7% for theirs).
  eff = matmul_efficiency * m/(m + GEMM_M0) * n/(n + GEMM_N0): GEMM efficiency falls when a GEMM dimension shrinks
  (tile quantisation, launch and memory-bound tails): m = tokens per micro-batch per rank (b*s/cp), n = h/tp.
  stage_imbalance = ceil-split layers on the busiest rank * pp * vpp / (num_layers * vpp).
comm: alpha-beta with NCCL ring bus factors (NCCL docs, "Performance: algorithm bandwidth / bus bandwidth"):
  all-reduce 2(n-1)/n * bytes / bw + 2(n-1) alpha; all-gather / reduce-scatter (n-1)/n * bytes / bw + (n-1) alpha.
  bw = link bandwidth * comm_efficiency; the link is NVLink when the group fits in a node under the torchtitan mesh
  order (pp, dp, cp, tp; tp innermost), InfiniBand otherwise.
  TP (Megatron, Narayanan et al. 2021 Sec 3.2 / Korthikanti Sec 4.2.2): per layer and micro-batch 2 all-reduces of
    b*s*h*c in forward and 2 in backward (SP: all-gather + reduce-scatter, same volume); full recompute adds the
    forward's 2 again. Not overlapped.
  CP (ring attention): per layer forward, cp-1 exchanges of the local K and V chunk (2*b*(s/cp)*k/t*c); backward twice
    that (K/V and their gradients). Not overlapped (conservative).
  PP: per micro-batch and virtual stage, one activation b*s/cp*h(/t with SP)*c sent forward and one gradient back
    (Narayanan et al. 2021 Sec 2.2). Tied embeddings add, once per step, the all-reduce of the shared embedding/head
    gradient between the first and last stage (`tied_embedding_allreduce_s`).
  DP (group dp*cp, ZeRO stages as in autotune.memory and bench_model/parallel/data_parallel.py): stage 0-1 all-reduce
    grads (grad dtype) once per step (stage 1 also all-gathers the updated params, param dtype); stage 2 all-gathers
    params (compute dtype) and reduce-scatters grads (grad dtype, FSDP2 reduce_dtype) every micro-batch;
    stage 3 all-gathers twice (forward and backward) and reduce-scatters every micro-batch. Exposed part:
    max(dp_comm * (1 - dp_overlap), dp_comm - hideable compute), hideable = backward (stages 0-1, gradient buckets
    all-reduce as backward proceeds) or forward + backward (stages 2-3, FSDP prefetch).
bubble_s = (pp - 1)/(m * vpp) * (compute_s + tp_s + cp_s)  (Narayanan et al. 2021 Eq. 1 and Sec 2.2.2 interleaving;
  Huang et al. 2019, GPipe Sec 2.3: (K-1)/(M+K-1) of the step is idle, i.e. (K-1)/M of the ideal time). It holds for any
  m >= 1: with m < pp (GPipe; 1F1B needs m >= pp) the bubble exceeds the compute, e.g. pp=4, m=2 -> 1.5x.
step_s = compute + tp + cp + pp + exposed dp + bubble; MFU = model FLOPs per second / (num_gpus * peak).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from autotune.memory import layers_on_rank, rank_params
from autotune.plan_arrays import RECOMPUTE_CODE, arrays_from_plans
from autotune.types import DTYPE_BYTES, ClusterSpec, ModelSpec, ParallelPlan, PerfEstimate, TrainSpec

SELECTIVE_OVERHEAD = 0.03  # extra time of selective recompute (norm and SwiGLU re-runs); calibrated later
FULL_RECOMPUTE_FACTOR = 8.0 / 6.0  # one extra forward pass: 2 FLOPs/param/token on top of 6
GEMM_M0 = 256.0  # tokens per GEMM at which efficiency is halved by this term
GEMM_N0 = 128.0  # GEMM width (h/tp) at which efficiency is halved by this term


def _link(cluster: ClusterSpec, inner_span: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bandwidth bytes/s, latency s) of a group whose ranks are `inner_span` apart-or-less in the mesh order."""
    intra = inner_span <= cluster.gpus_per_node
    bw = np.where(intra, cluster.intra_node_bw_bytes_per_s, cluster.inter_node_bw_bytes_per_s) * cluster.comm_efficiency
    lat = np.where(intra, cluster.intra_node_latency_s, cluster.inter_node_latency_s)
    return bw, lat


def ring_s(kind: str, n: Any, nbytes: Any, bw: Any, lat: Any) -> np.ndarray:
    """Time of one NCCL ring collective over n ranks (0 when n == 1)."""
    n = np.asarray(n, dtype=np.float64)
    steps = 2 * (n - 1) if kind == "all_reduce" else (n - 1)
    return steps / np.maximum(n, 1) * np.asarray(nbytes) / bw + steps * lat


def _compute_s(arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec,
               num_gpus: np.ndarray) -> np.ndarray:
    tp, pp, cp, vpp = arr["tp"], arr["pp"], arr["cp"], arr["vpp"]
    # a step's model FLOPs split evenly over all ranks (TP splits each GEMM, PP the layers, dp*cp the tokens);
    # the busiest pipeline rank's extra layers enter through `imbalance`
    flops = model.flops_per_token(train.seq_len) * train.global_batch_tokens / num_gpus
    rc = arr["recompute"]
    factor = np.select([rc == RECOMPUTE_CODE["full"], rc == RECOMPUTE_CODE["selective"]],
                       [FULL_RECOMPUTE_FACTOR, 1.0 + SELECTIVE_OVERHEAD], 1.0)
    imbalance = layers_on_rank(model.num_layers, pp, vpp) * pp / model.num_layers
    m_dim = arr["micro_batch_size"] * train.seq_len / cp
    n_dim = model.hidden_size / tp
    eff = cluster.matmul_efficiency * m_dim / (m_dim + GEMM_M0) * n_dim / (n_dim + GEMM_N0)
    return flops * factor * imbalance / (cluster.peak_flops(train.compute_dtype) * eff)


def perf_arrays(arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec,
                cluster: ClusterSpec) -> dict[str, np.ndarray]:
    """Vectorised step-time model. Keys: compute_s, tp_comm_s, cp_comm_s, pp_comm_s, dp_comm_s (exposed), bubble_s,
    step_s, tokens_per_s, tokens_per_s_per_gpu, mfu."""
    dp, tp, pp, cp, vpp = arr["dp"], arr["tp"], arr["pp"], arr["cp"], arr["vpp"]
    m, mbs, z, sp = arr["grad_accum_steps"], arr["micro_batch_size"], arr["zero_stage"], arr["sequence_parallel"]
    num_gpus = dp * tp * pp * cp
    c = DTYPE_BYTES[train.compute_dtype]
    seq = train.seq_len / cp
    layers = layers_on_rank(model.num_layers, pp, vpp)
    compute = _compute_s(arr, model, train, cluster, num_gpus)

    act_bytes = mbs * seq * model.hidden_size * c
    bw, lat = _link(cluster, tp)
    ars_per_layer = np.where(arr["recompute"] == RECOMPUTE_CODE["full"], 6, 4)
    tp_s = m * layers * ars_per_layer * ring_s("all_reduce", tp, act_bytes, bw, lat)

    bw, lat = _link(cluster, tp * cp)
    kv_chunk = 2 * mbs * seq * model.kv_dim / tp * c
    cp_s = m * layers * 3 * (cp - 1) * (kv_chunk / bw + lat)

    bw, lat = _link(cluster, tp * cp * dp * pp)
    p2p_bytes = act_bytes / np.where(sp, tp, 1)
    pp_s = np.where(pp > 1, 2 * m * vpp * (p2p_bytes / bw + lat), 0.0)
    pp_s = pp_s + tied_embedding_allreduce_s(arr, model, train, cluster)

    dp_s = _dp_comm_s(arr, model, train, cluster)
    # DDP/ZeRO-1 hide the all-reduce behind backward (2/3 of compute); FSDP prefetch hides behind fwd and bwd
    hideable = np.where(z >= 2, compute, compute * 2.0 / 3.0)
    dp_exposed = np.maximum(dp_s * (1 - cluster.dp_overlap), dp_s - hideable)

    bubble = (pp - 1) / (m * vpp) * (compute + tp_s + cp_s)
    step = compute + tp_s + cp_s + pp_s + dp_exposed + bubble
    tokens_per_s = train.global_batch_tokens / step
    mfu = model.flops_per_token(train.seq_len) * tokens_per_s / (num_gpus * cluster.peak_flops(train.compute_dtype))
    return {"compute_s": compute, "tp_comm_s": tp_s, "cp_comm_s": cp_s, "pp_comm_s": pp_s, "dp_comm_s": dp_exposed,
            "bubble_s": bubble, "step_s": step, "tokens_per_s": tokens_per_s,
            "tokens_per_s_per_gpu": tokens_per_s / num_gpus, "mfu": mfu}


def _dp_comm_s(arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec) -> np.ndarray:
    dp, tp, pp, cp, vpp, z = arr["dp"], arr["tp"], arr["pp"], arr["cp"], arr["vpp"], arr["zero_stage"]
    m = arr["grad_accum_steps"]
    n = dp * cp
    ranks = rank_params(model, tp, pp, vpp)
    psi = np.maximum.reduce([ranks["first"], ranks["second"], ranks["last"]])
    c, g, p = (DTYPE_BYTES[x] for x in (train.compute_dtype, train.grad_dtype, train.param_dtype))
    bw, lat = _link(cluster, tp * cp * dp)
    ar = ring_s("all_reduce", n, psi * g, bw, lat)
    ag_p = ring_s("all_gather", n, psi * p, bw, lat)
    ag_c = ring_s("all_gather", n, psi * c, bw, lat)
    rs_g = ring_s("reduce_scatter", n, psi * g, bw, lat)  # FSDP2 reduce_dtype = fp32 (bench_model data_parallel.py)
    return np.select([z == 0, z == 1, z == 2], [ar, ar + ag_p, m * (ag_c + rs_g)], m * (2 * ag_c + rs_g))


def tied_embedding_allreduce_s(arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec,
                               cluster: ClusterSpec) -> np.ndarray:
    """Tied embeddings with pp > 1: once per step, after backward and before the optimizer, the first and last stage
    all-reduce their shares of the shared V x h gradient (Megatron-LM finalize_model_grads.py,
    `_allreduce_word_embedding_grads`; bench_model/parallel/pipeline.py). 2-rank ring all-reduce of the local shard:
    V*h/tp elements (vocab-parallel), /(dp*cp) from ZeRO stage 2 (gradients sharded), in grad dtype. Not overlapped.
    The two ranks are (pp-1)*dp*cp*tp apart: the link is chosen from the whole pipeline's span, as for p2p."""
    dp, tp, pp, cp, z = arr["dp"], arr["tp"], arr["pp"], arr["cp"], arr["zero_stage"]
    shard = np.where(z >= 2, dp * cp, 1)
    nbytes = model.vocab_size * model.hidden_size / tp / shard * DTYPE_BYTES[train.grad_dtype]
    bw, lat = _link(cluster, tp * cp * dp * pp)
    return np.where((pp > 1) & model.tie_embeddings, ring_s("all_reduce", 2, nbytes, bw, lat), 0.0)


def estimate_perf(plan: ParallelPlan, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec) -> PerfEstimate:
    r = perf_arrays(arrays_from_plans([plan]), model, train, cluster)
    return PerfEstimate(**{k: float(v[0]) for k, v in r.items()})

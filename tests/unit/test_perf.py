"""Performance model: hand-computed alpha-beta collectives, per-layer roofline (GEMM, attention, memory-bound),
busiest pipeline stage, p2p + schedule overhead, FSDP2 prefetch, MFU bookkeeping."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.core.model import ModelSpec
from autotune.core.types import DTYPE_BYTES, ClusterSpec, ParallelPlan, TrainSpec
from autotune.predict.perf import GEMM_M0, GEMM_N0, _link, estimate_perf, ring_s
from autotune.predict.perf_terms import (
    LOSS_KERNELS,
    adam_tensors_per_param,
    elementwise_bytes_per_token,
    fsdp_exposed_s,
    loss_bytes_per_token,
    loss_head_passes,
    loss_kernel_codes,
    optimizer_step_s,
    prefetch_exposed_s,
)

MODEL = ModelSpec(
    name="m", num_layers=8, hidden_size=1024, ffn_hidden_size=4096, num_heads=16, num_kv_heads=4, vocab_size=32000
)
TRAIN = TrainSpec(seq_len=2048, global_batch_size=64)
CLUSTER = ClusterSpec(
    name="c",
    device_memory_bytes=80 * 2**30,
    peak_flops_bf16=1e15,
    peak_flops_fp32=1e14,
    gpus_per_node=8,
    intra_node_bw_bytes_per_s=4e11,
    intra_node_latency_s=1e-5,
    inter_node_bw_bytes_per_s=5e10,
    inter_node_latency_s=2e-5,
    matmul_efficiency=0.5,
    comm_efficiency=1.0,
    dp_overlap=0.0,
    hbm_bw_bytes_per_s=2e12,
    memory_efficiency=0.5,
    attention_efficiency=0.25,
    pp_microbatch_overhead_s=1e-4,
)
HBM = 2e12 * 0.5  # bytes/s reached by memory-bound kernels in CLUSTER


def eff(m, n):
    return 0.5 * m / (m + GEMM_M0) * n / (n + GEMM_N0)


def layer_s(tokens, passes=3, ew_passes=3):
    """One layer, one rank, tp=1, by hand: GEMMs of 2h^2 + 2hk + 3hf = 15,204,352 weights, causal attention
    2*s*h FLOPs per token forward (PaLM App. B, halved for the mask), 54,272 elementwise bytes per token forward,
    which eager (uncompiled) Llama blocks move EAGER_LLAMA_BYTES_FACTOR = 2.8 times (perf_terms: unfused kernels)."""
    gemm = tokens * 2 * 15_204_352 * passes / (1e15 * eff(tokens, 1024))
    # at s = 2048 the causal kernel reaches 2048/(2048+207) * 2048/(2048+128) = 0.854780 of its asymptotic rate
    # (attention_terms.attention_shape_factor: FA3 Fig. 4 sequence curve, diagonal 128-key block)
    # FlashAttention's backward is 2.5 forwards (Dao 2023 Sec 4.1): passes + 0.5 forward-equivalents
    # head dim 1024/16 = 64: cuDNN's d = 64 rate is 413/595 of its d = 128 one (Shah et al. 2024 Fig. 4, 16k forward;
    # attention_terms.head_dim_factor)
    attn = tokens * 2 * 2048 * 1024 * (passes + 0.5) / (1e15 * 0.25 * 0.854780 * 413 / 595)
    mem = tokens * 54_272 * 2.8 * ew_passes / HBM
    return gemm + attn + mem


# bytes per logit of bench_model's loss kernels (perf_terms.LOSS_KERNELS, c = 2): pp > 1 the unfused cross entropy
# on the stage's fp32 logits (2c + 6*4), pp = 1 tp = 1 eager the in-place fused chain (2c + 10*4)
LOSS_BYTES = {"unfused": 2 * 2 + 24, "fused_eager": 2 * 2 + 40, "fused": 3 * 2, "checkpointed": 3 * 2 + 40}


def head_s(tokens, kernel="fused_eager", passes=3):
    """LM head GEMM 2*V*h per token per pass (3: fwd + bwd; 4 when checkpointed) + the loss over V logits."""
    gemm = tokens * 2 * passes * 32000 * 1024 / (1e15 * eff(tokens, 32000))
    return gemm + tokens * 32000 * LOSS_BYTES[kernel] / HBM


def test_ring_collectives_nccl_bus_factor():
    # NCCL ring: all-reduce 2(n-1)/n * S / B + 2(n-1) alpha = 1.5 * 0.1 s + 6e-5 s; all-gather half the bytes term
    assert float(ring_s("all_reduce", 4, 1e9, 1e10, 1e-5)) == pytest.approx(0.15 + 6e-5)
    assert float(ring_s("all_gather", 4, 1e9, 1e10, 1e-5)) == pytest.approx(0.075 + 3e-5)
    assert float(ring_s("all_reduce", 1, 1e9, 1e10, 1e-5)) == 0


def test_elementwise_bytes_hand_count():
    # Llama (perf_terms docstring): RoPE 2c(h+k) + SwiGLU 3cf sharded by TP; norms 2(4+c)h + residuals 6ch replicated
    h, k, f = 1024, 256, 4096
    sharded, replicated = 2 * 2 * (h + k) + 3 * 2 * f, 2 * 6 * h + 6 * 2 * h
    assert sharded + replicated == 54_272
    assert float(elementwise_bytes_per_token(MODEL, 2, 1, False)) == 54_272
    assert float(elementwise_bytes_per_token(MODEL, 2, 4, False)) == sharded / 4 + replicated
    assert float(elementwise_bytes_per_token(MODEL, 2, 4, True)) == (sharded + replicated) / 4  # SP splits the norms
    gpt = ModelSpec(
        name="g",
        num_layers=2,
        hidden_size=1024,
        ffn_hidden_size=4096,
        num_heads=16,
        num_kv_heads=16,
        vocab_size=1000,
        block="gpt",
    )
    assert float(elementwise_bytes_per_token(gpt, 2, 1, False)) == 2 * 2 * 4096 + 4 * 2 * 1024 + 6 * 2 * 1024
    # decoupled head_dim: RoPE rotates every query head, q = 16 heads x 128 = 2048 wide on h 1024 (Qwen3-style)
    wide = dataclasses.replace(MODEL, head_dim=128)
    q, kw = 16 * 128, wide.num_kv_heads * 128
    assert (wide.hidden_size, wide.num_heads) == (1024, 16)
    assert float(elementwise_bytes_per_token(wide, 2, 1, False)) == 2 * 2 * (q + kw) + 3 * 2 * f + replicated


def test_loss_and_optimizer_bytes():
    # loss: (2c + 6*4) bytes per logit, vocab split by TP; AdamW: 7 fp32 tensor accesses per updated parameter
    assert float(loss_bytes_per_token(MODEL, 2, 2)) == 16000 * 28
    assert float(optimizer_step_s(1e9, 8, 0, 4, CLUSTER)) == pytest.approx(1e9 * 28 / HBM)
    assert float(optimizer_step_s(1e9, 8, 1, 4, CLUSTER)) == pytest.approx(1e9 / 8 * 28 / HBM)  # ZeRO-1 shards it
    # torch/optim/adam.py _single_tensor_adam (non-capturable): mul_ 2 + lerp_ 3 + mul_ 2 + addcmul_ 3 + sqrt 2 + div 2
    # + add_ 2 + addcdiv_ 4 = 20 accesses: bench_model's AdamW; Megatron / torchtitan / DeepSpeed run a fused kernel (7)
    assert adam_tensors_per_param("bench_model") == 20 and adam_tensors_per_param("megatron") == 7


def test_single_gpu_is_compute_plus_memory_bound():
    # 1 GPU, pp=1: per micro-batch 8 layers + embedding (4 c h bytes per token) + head; plus the optimizer step
    plan = ParallelPlan(micro_batch_size=4, grad_accum_steps=16)
    p = estimate_perf(plan, MODEL, TRAIN, CLUSTER)
    t = 4 * 2048
    per_mb = 8 * layer_s(t) + t * 1024 * 2 * 4 / HBM + head_s(t)
    assert p.compute_s == pytest.approx(16 * per_mb)
    opt = MODEL.num_params() * 80 / HBM  # bench_model: torch's unfused AdamW, 20 fp32 accesses per parameter
    assert p.tp_comm_s == p.cp_comm_s == p.pp_comm_s == p.dp_comm_s == p.bubble_s == 0
    assert p.step_s == pytest.approx(16 * per_mb + opt)
    # MFU stays model FLOPs (6N + causal attention) over peak, whatever the memory-bound time
    assert p.mfu == pytest.approx(MODEL.flops_per_token(2048) * 64 * 2048 / p.step_s / 1e15)


def test_recompute_passes():
    # full recompute: GEMMs and attention 4 forward-equivalents instead of 3 (Korthikanti 2022 Eq. 7 vs 8), elementwise
    # re-run once; selective re-runs only the elementwise ops (bench_model keeps mm and SDPA outputs)
    base = {"micro_batch_size": 1, "grad_accum_steps": 64}
    t = 2048
    ends = t * 1024 * 8 / HBM + head_s(t)
    full = estimate_perf(ParallelPlan(**base, recompute="full"), MODEL, TRAIN, CLUSTER)
    sel = estimate_perf(ParallelPlan(**base, recompute="selective"), MODEL, TRAIN, CLUSTER)
    assert full.compute_s == pytest.approx(64 * (8 * layer_s(t, 4, 4) + ends))
    assert sel.compute_s == pytest.approx(64 * (8 * layer_s(t, 3, 4) + ends))


def test_compiled_selective_reruns_swiglu_only():
    # bench_model's compiled selective is one checkpoint around SwiGLU (bench_model/parallel/recompute.py
    # apply_selective_compiled): the step grows by the product silu(w1 x) * (w3 x) rebuilt from the saved w1 / w3
    # outputs, 2c read + c written per FFN element (f = 4096 here), not by a pass over the block's elementwise ops as
    # eager selective; H200 2026-11-29: -0.9% / -0.3% tok/s against compiled none (h200_bench_model_2026-11-29.csv)
    base = {"micro_batch_size": 1, "grad_accum_steps": 64, "compile": True}
    cluster = dataclasses.replace(CLUSTER, compile_memory_traffic_factor=0.5)
    none = estimate_perf(ParallelPlan(**base), MODEL, TRAIN, cluster)
    sel = estimate_perf(ParallelPlan(**base, recompute="selective"), MODEL, TRAIN, cluster)
    assert sel.compute_s - none.compute_s == pytest.approx(64 * 8 * 2048 * 3 * 2 * 4096 / HBM)
    megatron = dataclasses.replace(TRAIN, framework="megatron")  # re-runs its recompute_modules only: no pass at all
    m_none = estimate_perf(ParallelPlan(**base), MODEL, megatron, cluster)
    m_sel = estimate_perf(ParallelPlan(**base, recompute="selective"), MODEL, megatron, cluster)
    assert m_sel.compute_s == pytest.approx(m_none.compute_s)


def test_pipeline_busiest_stage_has_the_head():
    # pp=2: 4 layers each; rank 1 also runs LM head + loss (more than rank 0's embedding), so it sets the pace.
    # bubble (pp-1)/vpp of one stage time per micro-batch (Narayanan 2021 Eq. 1 x m); boundaries: m*vpp + pp - 1,
    # each 2 p2p transfers of b*s*h*c over NVLink + the schedule overhead
    m, t = 32, 2 * 2048
    p = estimate_perf(ParallelPlan(pp=2, micro_batch_size=2, grad_accum_steps=m), MODEL, TRAIN, CLUSTER)
    stage = 4 * layer_s(t) + head_s(t, "unfused")
    assert p.compute_s == pytest.approx(m * stage)
    assert p.bubble_s == pytest.approx(stage)
    boundary = 2 * (t * 1024 * 2 / 4e11 + 1e-5) + 1e-4
    assert p.pp_comm_s == pytest.approx((m + 1) * boundary)
    inter = estimate_perf(
        ParallelPlan(pp=2, vpp=2, micro_batch_size=2, grad_accum_steps=m, pp_schedule="interleaved_1f1b"),
        MODEL,
        TRAIN,
        CLUSTER,
    )
    assert inter.bubble_s == pytest.approx(stage / 2)
    assert inter.pp_comm_s == pytest.approx((2 * m + 1) * boundary)


def test_tp_comm_per_layer_all_reduces():
    # tp=2, mbs=1, m=64: per layer and micro-batch 4 all-reduces of b*s*h*2 bytes over NVLink (tp <= gpus_per_node)
    p = estimate_perf(ParallelPlan(tp=2, micro_batch_size=1, grad_accum_steps=64), MODEL, TRAIN, CLUSTER)
    one = 2 * 1 / 2 * (2048 * 1024 * 2) / 4e11 + 2 * 1e-5
    assert p.tp_comm_s == pytest.approx(64 * 8 * 4 * one)
    full = estimate_perf(
        ParallelPlan(tp=2, micro_batch_size=1, grad_accum_steps=64, recompute="full"), MODEL, TRAIN, CLUSTER
    )
    assert full.tp_comm_s == pytest.approx(64 * 8 * 6 * one)  # full recompute repeats the forward's 2


def test_rail_optimised_inter_node_bandwidth():
    # a group spanning nodes with all 8 GPUs of each node: 8 NICs -> 8 * 50 GB/s, capped at NVLink's 400 GB/s;
    # one GPU per node (stride 8, e.g. dp under tp=8): one NIC
    bw, _ = _link(CLUSTER, 16, 1)
    assert float(bw) == 4e11
    bw, _ = _link(CLUSTER, 32, 2)
    assert float(bw) == 2e11
    bw, lat = _link(CLUSTER, 64, 8)
    assert float(bw) == 5e10 and float(lat) == 2e-5


def test_fsdp_prefetch_hand_computed():
    # 4 blocks, gather 1 s, reduce-scatter 2 s, forward 3 s, backward 2 s per block. Stage 3, fully hidden overlap:
    # forward: first gather exposed (1) + 3 * max(0, 1 - 3) = 1; backward: 4 * max(0, 1 + 2 - 2) = 4
    assert float(fsdp_exposed_s(4, 1.0, 2.0, 3.0, 2.0, 3, 1.0)) == 5.0
    # no overlap at all: forward 1 + 3 * 1, backward 4 * 3
    assert float(fsdp_exposed_s(4, 1.0, 2.0, 3.0, 2.0, 3, 0.0)) == 16.0
    # stage 2: backward only reduce-scatters: 4 * max(0, 2 - 2) = 0
    assert float(fsdp_exposed_s(4, 1.0, 2.0, 3.0, 2.0, 2, 1.0)) == 1.0
    assert float(prefetch_exposed_s(5.0, 2.0, 0.5)) == 3.0 + 1.0


def test_ddp_all_reduce_hides_behind_last_backward():
    # dp=16 (2 nodes, all 8 GPUs each: 400 GB/s) all-reduces fp32 grads once per step behind the last micro-batch's
    # backward (2/3 of its layers' compute); dp_overlap = 0: all of it is exposed
    plan = ParallelPlan(dp=16, micro_batch_size=1, grad_accum_steps=4)
    exposed = estimate_perf(plan, MODEL, TRAIN, CLUSTER).dp_comm_s
    # the ring's bandwidth term; latency: NCCL's tree beats the ring's 2*15 inter-node hops (6e-4 s): a chain of the
    # 8 NVLink ranks per node both ways, 2*7*1e-5, + 2*log2(2 nodes)*2e-5 = 1.8e-4 s (collectives.dp_all_reduce_s),
    # paid once per collective: bench_model all-reduces each of the 8 blocks' FSDP2 units and the root unit on its
    # own (bench_model/parallel/data_parallel.py), 9 all-reduces of the same total bytes; a framework profile without
    # a count (Megatron's here) prices one bucketed all-reduce
    bandwidth = float(ring_s("all_reduce", 16, MODEL.num_params() * 4, 4e11, 0.0))
    full_ar = bandwidth + 9 * 1.8e-4
    assert exposed == pytest.approx(full_ar)
    megatron = dataclasses.replace(TRAIN, framework="megatron")
    assert estimate_perf(plan, MODEL, megatron, CLUSTER).dp_comm_s == pytest.approx(bandwidth + 1.8e-4)
    hidden = estimate_perf(plan, MODEL, TRAIN, dataclasses.replace(CLUSTER, dp_overlap=1.0)).dp_comm_s
    assert hidden == pytest.approx(max(full_ar - 8 * layer_s(2048) * 2 / 3, 0.0))


def test_missing_preset_field_is_named():
    bare = dataclasses.replace(CLUSTER, hbm_bw_bytes_per_s=None)
    with pytest.raises(ValueError, match=r"cluster.hbm_bw_bytes_per_s is not set"):
        estimate_perf(ParallelPlan(), MODEL, TRAIN, bare)


def test_outputs_consistent():
    plan = ParallelPlan(
        dp=2, tp=2, pp=2, cp=2, micro_batch_size=1, grad_accum_steps=32, zero_stage=3, sequence_parallel=True
    )
    p = estimate_perf(plan, MODEL, TRAIN, CLUSTER)
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.predict.perf import perf_arrays

    opt = float(perf_arrays(arrays_from_plans([plan]), MODEL, TRAIN, CLUSTER)["optimizer_s"][0])
    parts = p.compute_s + p.tp_comm_s + p.cp_comm_s + p.pp_comm_s + p.dp_comm_s + p.bubble_s + opt
    assert p.step_s == pytest.approx(parts)
    assert p.tokens_per_s == pytest.approx(64 * 2048 / p.step_s)
    assert p.tokens_per_s_per_gpu == pytest.approx(p.tokens_per_s / 16)
    assert p.mfu == pytest.approx(MODEL.flops_per_token(2048) * p.tokens_per_s / (16 * 1e15))
    assert p.cp_comm_s > 0 and p.pp_comm_s > 0 and p.tp_comm_s > 0 and p.dp_comm_s > 0


def test_gpipe_bubble_with_fewer_microbatches_than_stages():
    # Narayanan et al. 2021 Eq. 1 ((p-1)/m of the ideal time; GPipe Sec 2.3: (K-1)/(M+K-1) of the step) holds for any
    # m >= 1: pp=4 with m=2 GPipe micro-batches idles 3/2 of the compute time, the same total tokens in m=64 only 3/64.
    few = estimate_perf(
        ParallelPlan(pp=4, micro_batch_size=32, grad_accum_steps=2, pp_schedule="gpipe"), MODEL, TRAIN, CLUSTER
    )
    assert few.bubble_s == pytest.approx(1.5 * few.compute_s)
    many = estimate_perf(ParallelPlan(pp=4, micro_batch_size=1, grad_accum_steps=64), MODEL, TRAIN, CLUSTER)
    assert few.step_s > many.step_s  # the bubble outweighs the larger micro-batches' GEMM efficiency here


def test_tied_embedding_allreduce_between_first_and_last_stage():
    # Tied, pp=2, dp=tp=1: one 2-rank all-reduce of the fp32 V*h gradient = 32000*1024*4 = 131,072,000 bytes over
    # NVLink (span 2 <= 8): 2(n-1)/n = 1 -> 131,072,000 / 4e11 + 2 * 1e-5 s, added to the pipeline communication.
    tied = dataclasses.replace(MODEL, tie_embeddings=True)
    plan = ParallelPlan(pp=2, micro_batch_size=1, grad_accum_steps=64)
    extra = estimate_perf(plan, tied, TRAIN, CLUSTER).pp_comm_s - estimate_perf(plan, MODEL, TRAIN, CLUSTER).pp_comm_s
    assert extra == pytest.approx(131_072_000 / 4e11 + 2e-5)
    # ZeRO-2 over dp=2 shards the gradient: each rank all-reduces its half with its peer; tp=2 halves it again
    z2 = ParallelPlan(dp=2, tp=2, pp=2, zero_stage=2, micro_batch_size=1, grad_accum_steps=32)
    extra = estimate_perf(z2, tied, TRAIN, CLUSTER).pp_comm_s - estimate_perf(z2, MODEL, TRAIN, CLUSTER).pp_comm_s
    assert extra == pytest.approx(131_072_000 / 4 / 4e11 + 2e-5)
    assert estimate_perf(ParallelPlan(micro_batch_size=1, grad_accum_steps=64), tied, TRAIN, CLUSTER).pp_comm_s == 0


def test_pipeline_reduce_scatters_fsdp_gradients_once_per_step():
    """pp > 1 runs torch.distributed.pipelining, which keeps FSDP2's gradient sync off and the blocks gathered after
    every micro-batch's backward and reduce-scatters once after the last (torch/distributed/pipelining/stage.py
    backward_maybe_with_nosync, perform_reduce_grad): ZeRO-2's traffic does not grow with m; ZeRO-3 gathers each block
    again in every backward. At pp = 1 (bench_model's own loop) both gather and reduce-scatter every micro-batch."""

    def dp_s(zero: int, m: int, pp: int = 2) -> float:
        plan = ParallelPlan(dp=8, pp=pp, zero_stage=zero, micro_batch_size=1, grad_accum_steps=m)
        return estimate_perf(plan, MODEL, dataclasses.replace(TRAIN, global_batch_size=8 * m), CLUSTER).dp_comm_s

    # dp 8 inside one node (mesh order pp, dp, cp, tp): 400 GB/s, 1e-5 s; one block: 15,206,400 parameters (its GEMM
    # weights and 2 norms), gathered in the compute dtype, reduce-scattered in the gradient dtype; dp_overlap = 0
    ag = float(ring_s("all_gather", 8, 15_206_400 * DTYPE_BYTES[TRAIN.compute_dtype], 4e11, 1e-5))
    rs = float(ring_s("reduce_scatter", 8, 15_206_400 * DTYPE_BYTES[TRAIN.grad_dtype], 4e11, 1e-5))
    assert dp_s(2, 8) == pytest.approx(dp_s(2, 4))
    assert dp_s(3, 8) - dp_s(3, 4) == pytest.approx(4 * 4 * ag)  # 4 more micro-batches x the stage's 4 blocks
    # pp = 1: every micro-batch gathers and reduce-scatters all 8 blocks (and the root unit)
    assert dp_s(2, 8, pp=1) - dp_s(2, 4, pp=1) > 4 * 8 * (ag + rs)


def test_loss_kernel_passes_and_bytes_by_hand():
    # bench_model's loss kernels (bench_model/loss.py lm_loss; perf_terms.LOSS_KERNELS): at pp 1 tp 1 the fused linear
    # cross-entropy, eager (the in-place chain, 2c + 10*4 bytes per logit) or compiled (Inductor's reduction + one
    # pointwise pass over the bf16 logits, 3c); at tp 2 the checkpointed chunks (4 head GEMM passes, 3c + 10*4); at
    # pp 2 the unfused cross entropy on the stage's fp32 logits (2c + 6*4). TrainSpec.loss_kernel overrides the pick
    # (llm-foundry's rows: flash-attn's fused cross entropy)
    from autotune.core.errors import SpecError
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.predict.frameworks import get_profile

    plans = [
        ParallelPlan(micro_batch_size=1, grad_accum_steps=64),
        ParallelPlan(micro_batch_size=1, grad_accum_steps=64, compile=True),
        ParallelPlan(tp=2, micro_batch_size=1, grad_accum_steps=64),
        ParallelPlan(pp=2, micro_batch_size=1, grad_accum_steps=64),
    ]
    codes = get_profile("bench_model").loss_kernel(arrays_from_plans(plans))
    assert [LOSS_KERNELS[i] for i in codes] == ["fused_eager", "fused", "checkpointed", "unfused"]
    # torchtitan compiles its loss with the model at tp 1 (2025 on; its 9dec370 rows set train.loss_kernel=unfused)
    titan = [LOSS_KERNELS[i] for i in get_profile("torchtitan").loss_kernel(arrays_from_plans(plans))]
    assert titan == ["unfused", "fused", "unfused", "unfused"]
    assert [LOSS_KERNELS[i] for i in get_profile("megatron").loss_kernel(arrays_from_plans(plans))] == ["unfused"] * 4
    assert list(loss_head_passes(codes)) == [3, 3, 4, 3]
    assert list(loss_bytes_per_token(MODEL, 2, 1, codes)) == [32000 * b for b in (44, 6, 46, 28)]
    assert list(loss_kernel_codes("fused", codes)) == [1, 1, 1, 1]
    # end to end: the step's difference between the eager and the job-set fused loss is the bytes' difference
    t = 2048
    eager = estimate_perf(plans[0], MODEL, TRAIN, CLUSTER)
    fused = estimate_perf(plans[0], MODEL, dataclasses.replace(TRAIN, loss_kernel="fused"), CLUSTER)
    assert eager.compute_s - fused.compute_s == pytest.approx(64 * (head_s(t) - head_s(t, "fused")))
    with pytest.raises(SpecError, match=r"train.loss_kernel='liger' must be one of unfused, fused, fused_eager"):
        TrainSpec(seq_len=8, global_batch_size=1, loss_kernel="liger")

"""Performance model: hand-computed alpha-beta collectives, bubble, compute roofline, MFU bookkeeping."""
from __future__ import annotations

import dataclasses

import pytest

from autotune.perf import GEMM_M0, GEMM_N0, estimate_perf, ring_s
from autotune.types import ClusterSpec, ModelSpec, ParallelPlan, TrainSpec

MODEL = ModelSpec(name="m", num_layers=8, hidden_size=1024, ffn_hidden_size=4096, num_heads=16, num_kv_heads=4,
                  vocab_size=32000)
TRAIN = TrainSpec(seq_len=2048, global_batch_size=64)
CLUSTER = ClusterSpec(name="c", device_memory_bytes=80 * 2**30, peak_flops_bf16=1e15, peak_flops_fp32=1e14,
                      gpus_per_node=8, intra_node_bw_bytes_per_s=4e11, intra_node_latency_s=1e-5,
                      inter_node_bw_bytes_per_s=5e10, inter_node_latency_s=2e-5, matmul_efficiency=0.5,
                      comm_efficiency=1.0, dp_overlap=0.0)


def test_ring_collectives_nccl_bus_factor():
    # NCCL ring: all-reduce 2(n-1)/n * S / B + 2(n-1) alpha = 1.5 * 0.1 s + 6e-5 s; all-gather half the bytes term
    assert float(ring_s("all_reduce", 4, 1e9, 1e10, 1e-5)) == pytest.approx(0.15 + 6e-5)
    assert float(ring_s("all_gather", 4, 1e9, 1e10, 1e-5)) == pytest.approx(0.075 + 3e-5)
    assert float(ring_s("all_reduce", 1, 1e9, 1e10, 1e-5)) == 0


def test_single_gpu_is_pure_compute():
    # 1 GPU: no communication, no bubble. compute = flops/token * tokens / (peak * eff(m, n))
    plan = ParallelPlan(micro_batch_size=4, grad_accum_steps=16)
    p = estimate_perf(plan, MODEL, TRAIN, CLUSTER)
    m, n = 4 * 2048, 1024
    eff = 0.5 * m / (m + GEMM_M0) * n / (n + GEMM_N0)
    expected = MODEL.flops_per_token(2048) * 64 * 2048 / (1e15 * eff)
    assert p.compute_s == pytest.approx(expected)
    assert p.tp_comm_s == p.cp_comm_s == p.pp_comm_s == p.dp_comm_s == p.bubble_s == 0
    assert p.step_s == pytest.approx(expected)
    assert p.mfu == pytest.approx(eff)  # with only compute, MFU equals the GEMM efficiency


def test_pipeline_bubble_narayanan_eq1():
    # bubble = (pp - 1) / (m * vpp) * (compute + tp + cp): pp=4, m=8 -> 3/8; interleaved vpp=2 -> 3/16
    plain = estimate_perf(ParallelPlan(pp=4, micro_batch_size=1, grad_accum_steps=64), MODEL, TRAIN, CLUSTER)
    assert plain.bubble_s == pytest.approx(3 / 64 * plain.compute_s)
    inter = estimate_perf(ParallelPlan(pp=4, vpp=2, micro_batch_size=1, grad_accum_steps=64,
                                       pp_schedule="interleaved_1f1b"), MODEL, TRAIN, CLUSTER)
    assert inter.bubble_s == pytest.approx(3 / 128 * inter.compute_s)


def test_tp_comm_per_layer_all_reduces():
    # tp=2, mbs=1, m=64: per layer and micro-batch 4 all-reduces of b*s*h*2 bytes over NVLink (tp <= gpus_per_node)
    p = estimate_perf(ParallelPlan(tp=2, micro_batch_size=1, grad_accum_steps=64), MODEL, TRAIN, CLUSTER)
    one = 2 * 1 / 2 * (2048 * 1024 * 2) / 4e11 + 2 * 1e-5
    assert p.tp_comm_s == pytest.approx(64 * 8 * 4 * one)
    # full recompute repeats the forward's 2 all-reduces
    full = estimate_perf(ParallelPlan(tp=2, micro_batch_size=1, grad_accum_steps=64, recompute="full"),
                         MODEL, TRAIN, CLUSTER)
    assert full.tp_comm_s == pytest.approx(64 * 8 * 6 * one)
    assert full.compute_s == pytest.approx(p.compute_s * 8 / 6)


def test_dp_uses_inter_node_link_and_overlap_knob():
    # dp=16 spans 2 nodes: all-reduce of fp32 grads over InfiniBand; dp_overlap hides part of it
    plan = ParallelPlan(dp=16, micro_batch_size=1, grad_accum_steps=4)
    exposed = estimate_perf(plan, MODEL, TRAIN, CLUSTER).dp_comm_s
    full_ar = float(ring_s("all_reduce", 16, MODEL.num_params() * 4, 5e10, 2e-5))
    assert exposed == pytest.approx(full_ar)  # dp_overlap = 0
    half = estimate_perf(plan, MODEL, TRAIN, dataclasses.replace(CLUSTER, dp_overlap=0.5)).dp_comm_s
    assert half < exposed and half >= 0.5 * exposed - 1e-12


def test_outputs_consistent():
    plan = ParallelPlan(dp=2, tp=2, pp=2, cp=2, micro_batch_size=1, grad_accum_steps=32, zero_stage=3,
                        sequence_parallel=True)
    p = estimate_perf(plan, MODEL, TRAIN, CLUSTER)
    parts = p.compute_s + p.tp_comm_s + p.cp_comm_s + p.pp_comm_s + p.dp_comm_s + p.bubble_s
    assert p.step_s == pytest.approx(parts)
    assert p.tokens_per_s == pytest.approx(64 * 2048 / p.step_s)
    assert p.tokens_per_s_per_gpu == pytest.approx(p.tokens_per_s / 16)
    assert p.mfu == pytest.approx(MODEL.flops_per_token(2048) * p.tokens_per_s / (16 * 1e15))
    assert p.cp_comm_s > 0 and p.pp_comm_s > 0 and p.tp_comm_s > 0


def test_gpipe_bubble_with_fewer_microbatches_than_stages():
    # Narayanan et al. 2021 Eq. 1 ((p-1)/m of the ideal time; GPipe Sec 2.3: (K-1)/(M+K-1) of the step) holds for any
    # m >= 1: pp=4 with m=2 GPipe micro-batches idles 3/2 of the compute time, the same total tokens in m=64 only 3/64.
    few = estimate_perf(ParallelPlan(pp=4, micro_batch_size=32, grad_accum_steps=2, pp_schedule="gpipe"),
                        MODEL, TRAIN, CLUSTER)
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

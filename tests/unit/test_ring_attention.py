"""torch's ring attention (autotune/predict/ring_attention.py) against hand counts of
torch/distributed/tensor/experimental/_attention.py @ f2127dbdb01fc9319ce42b92d60344d19cbd0137:
`_SDPAMerger.step` / `_merge_one` (forward), `_templated_ring_attention_backward` (backward), `_AllGatherRotater` /
`_AllToAllRotater` (communication, waited one step after it is issued)."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan
from autotune.predict.frameworks import PROFILES
from autotune.predict.perf import perf_arrays
from autotune.predict.perf_terms import attention_shape_factor, memory_bound_s
from autotune.predict.ring_attention import (
    allgather_mask_comm_s,
    ring_backward_accum_bytes,
    ring_comm_exposed_s,
    ring_forward_merge_bytes,
)


def test_forward_merge_bytes_by_hand():
    # cp = 4, bf16 (c = 2), 1000 local output elements, rank 3 (every step i >= 1 on the whole block):
    # 3 steps x (block.to(float32): 2 read + 4 written; out - block_out: 8 + 4; sigmoid(...) * diff: 4 + 4;
    # out - prod: 8 + 4) = 3 x 38, + results()' cast back 4 + 2 = 120 bytes per element
    assert float(ring_forward_merge_bytes(1000, 4, 2)) == pytest.approx(1000 * (3 * 38 + 6))
    assert float(ring_forward_merge_bytes(1000, 1, 2)) == 0.0  # no ring without CP


def test_backward_accum_bytes_by_hand():
    # cp = 4, c = 2, 1000 dQ elements, 250 per dK and dV (rank 3):
    # dQ: zeros_like fp32 4 + 4 steps of grad_query += bf16 (4 + 2 read, 4 written = 10) + .to(bf16) 4 + 2 = 50
    # dK (and dV): zeros 4 + step 0's += 10 + 3 x (_partial_update: += on half 5 + torch.cat 8)
    #   + 4 sends' torch.cat 8 + final cast 6 = 4 + 10 + 39 + 32 + 6 = 91
    assert float(ring_backward_accum_bytes(1000, 250, 4, 2)) == pytest.approx(1000 * 50 + 2 * 250 * 91)
    assert float(ring_backward_accum_bytes(1000, 250, 1, 2)) == 0.0


def test_comm_exposed_beyond_one_ring_step_by_hand():
    # 250 K (and V) elements, bf16, cp = 4, 1000 B/s, no latency, one forward's attention 4 s (1 s per ring step,
    # 2.5 s per backward step): all-gather of 4 x 1000 B = 3/4 x 4000 / 1000 = 3 s, hidden 1 s in the forward, 2.5 s
    # in the backward; dK/dV fp32 send 2000 B = 2 s, hidden behind a backward step but the last (2 s)
    args = (250, 4, 2, 1000.0, 0.0, 4.0)
    assert float(ring_comm_exposed_s(*args, 1.0)) == pytest.approx((3 - 1) + (3 - 2.5) + 0 + 2)
    assert float(ring_comm_exposed_s(*args, 2.0)) == pytest.approx(2 * (3 - 1) + (3 - 2.5) + 2)  # full recompute
    assert float(ring_comm_exposed_s(250, 1, 2, 1000.0, 0.0, 4.0, 1.0)) == 0.0


def test_torchtitan_cp_prices_the_ring_at_the_width_sdpa_sees():
    from autotune.spec.config import load_config

    cfg = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])
    model, cluster = cfg.model, cfg.cluster
    assert {n: PROFILES[n].context_parallel_attention() for n in ("torchtitan", "bench_model", "megatron")} == {
        "torchtitan": "torch_ring",
        "bench_model": "allgather_mask",
        "megatron": "p2p",
    }
    plan = ParallelPlan(dp=1, cp=2, micro_batch_size=1, zero_stage=3)
    arr = arrays_from_plans([plan])
    out = {}
    for repeat in (False, True):
        train = dataclasses.replace(cfg.train, framework="torchtitan", seq_len=8192, sdpa_repeat_kv=repeat)
        out[repeat] = perf_arrays(arr, model, train, cluster)
    # only dK/dV's accumulation widens: kv_dim (1024) -> q_dim (4096) on 4096 local tokens
    tokens, c = 4096, 2
    extra = ring_backward_accum_bytes(tokens * 4096, tokens * 4096, 2, c)
    extra = extra - ring_backward_accum_bytes(tokens * 4096, tokens * 1024, 2, c)
    per_step = model.num_layers * float(memory_bound_s(extra, cluster))
    diff = float(out[True]["memory_bound_s"][0] - out[False]["memory_bound_s"][0])
    assert diff == pytest.approx(per_step, rel=1e-6)
    assert float(out[True]["cp_comm_s"][0]) > float(out[False]["cp_comm_s"][0]) > 0.0


def test_bench_model_cp_gathers_on_the_critical_path_and_runs_the_whole_masked_block():
    # bench_model/parallel/context_parallel.py @ 589f8f65: `_AllGatherSeq` gathers K and V (async_op=False) and
    # reduce-scatters dK, dV in backward. 100 K elements, bf16, cp = 4, 1000 B/s, 1 ms hop: each collective moves
    # 3/4 x 4 x 100 x 2 = 600 B (0.6 s) + 3 hops (0.003 s); 2 gathers per forward pass + 2 reduce-scatters
    one = 0.6 + 3 * 0.001
    assert float(allgather_mask_comm_s(100, 4, 2, 1000.0, 0.001, 1.0)) == pytest.approx(4 * one)
    assert float(allgather_mask_comm_s(100, 4, 2, 1000.0, 0.001, 2.0)) == pytest.approx(6 * one)  # full recompute
    from autotune.spec.config import load_config

    cfg = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])
    train = dataclasses.replace(cfg.train, framework="bench_model", seq_len=8192)
    one_rank, two = (
        perf_arrays(arrays_from_plans([ParallelPlan(cp=n)]), cfg.model, train, cfg.cluster) for n in (1, 2)
    )
    # the explicit mask computes every tile: s/cp x s at twice the causal FLOPs; per rank the causal work halves
    # with cp = 2, so the masked block's attention time equals the whole causal sequence's on one rank
    shape_ratio = float(attention_shape_factor(8192) / attention_shape_factor(4096))  # the kernel sees s/cp chunks
    assert float(two["attention_s"][0]) == pytest.approx(float(one_rank["attention_s"][0]) * 2 * 0.5 * shape_ratio)

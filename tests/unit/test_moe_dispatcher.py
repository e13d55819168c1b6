"""plan.moe_dispatcher: which frameworks offer which dispatcher (rules), each dispatcher's communication and memory
against hand-computed values (sources in autotune/predict/moe.py)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan
from autotune.layouts.rules import check_plan
from autotune.predict import moe, moe_dispatch
from autotune.predict.memory import estimate_memory
from autotune.predict.perf import perf_arrays
from autotune.spec.config import load_config

DSV3 = load_config(["model=deepseek-v3", "cluster=h100-sxm-80gb", "train.framework=megatron"])
PLAN = ParallelPlan(dp=32, pp=8, ep=32, zero_stage=1, micro_batch_size=1, grad_accum_steps=32, recompute="full")


def test_distinct_ranks_and_deepep_buffers_by_hand():
    """DeepSeek-V3, E 256, k 8: over ep 8 (32 experts a rank) a token's 8 experts land on 8 (1 - prod_{i<8}
    (224 - i)/(256 - i)) = 5.2947 ranks; ep 1: one. DeepEP buffers, h 7168 (hidden bytes 14,336 + 2,048 meta):
    ep 8 = 10 channels x 8 ranks x 256 tokens x 16,384 = 335,544,320 bytes; ep 64 adds RDMA 10 x 8 x 128 x
    16,400 x 2 + 1 MiB at 288 NVLink tokens."""
    m = DSV3.model
    miss = np.prod([(224 - i) / (256 - i) for i in range(8)])
    assert float(moe_dispatch.distinct_ranks_per_token(m, 8)) == pytest.approx(8 * (1 - miss), rel=1e-12)
    assert float(moe_dispatch.distinct_ranks_per_token(m, 1)) == pytest.approx(1.0)
    assert float(moe_dispatch.deepep_buffer_bytes(7168, 8)) == 10 * 8 * 256 * 16384 == 335_544_320
    assert float(moe_dispatch.deepep_buffer_bytes(7168, 64)) == 10 * 8 * 288 * 16384 + 10 * 8 * 128 * 16400 * 2 + 2**20


def test_dispatchers_move_what_they_should():
    """Same layout, ep 32 over 4 H100 nodes: DeepEP sends a token once per destination node over the network (at most
    the 4 nodes of its 4 expert groups) and once per destination rank over NVLink, so its EP time is below
    alltoall's; allgather moves every rank's tokens to every rank (ep x the tokens): more bytes than k copies when
    ep > k."""
    m, t, c = DSV3.model, DSV3.train, DSV3.cluster
    plans = [ParallelPlan(**{**PLAN.__dict__, "moe_dispatcher": d}) for d in ("alltoall", "allgather", "deepep")]
    ep = perf_arrays(arrays_from_plans(plans), m, t, c)["ep_comm_s"]
    assert ep[2] < ep[0]
    # HybridEP exchanges the same bytes hierarchically: the same EP time; its buffers are not modelled (0 runtime)
    hyb = ParallelPlan(**{**PLAN.__dict__, "moe_dispatcher": "hybridep"})
    assert float(perf_arrays(arrays_from_plans([hyb]), m, t, c)["ep_comm_s"][0]) == pytest.approx(float(ep[2]))
    alltoall_mem = estimate_memory(plans[0], m, t, c).overhead_bytes
    assert estimate_memory(hyb, m, t, c).overhead_bytes == pytest.approx(alltoall_mem)
    assert float(moe_dispatch.allgather_bytes(1, 7168, 2, 32)) == 32 * 7168 * 2 > 8 * 7168 * 2


def test_node_limited_domains_by_hand():
    """DeepSeek-V3 (E 256, k 8, 8 groups of 32 experts, 4 chosen; arXiv 2412.19437 Sec 2.1.2: "at most M = 4 nodes").
    8 nodes (one group each): 8 (1 - C(7,4)/C(8,4)) = 8 (1 - 35/70) = 4 nodes, below the 8 (1 - prod_{i<8}
    (224 - i)/(256 - i)) = 5.29 without the limit. 4 nodes (two groups each): 4 (1 - C(6,4)/C(8,4)) = 4 (1 - 15/70)
    = 3.143 against 4 (1 - prod (192 - i)/(256 - i)) = 3.61. 16 nodes (a group spans 2): at most 4 x 16/8 = 8, the
    unlimited 16 (1 - prod (240 - i)/(256 - i)) = 6.60 is smaller. No groups (Qwen3-30B-A3B, E 128, k 8, 8 nodes):
    8 (1 - prod (112 - i)/(128 - i))."""
    m = DSV3.model
    assert (m.moe_router_num_groups, m.moe_router_group_topk) == (8, 4)
    d = [float(moe_dispatch.distinct_domains_per_token(m, n)) for n in (8, 4, 16, 1)]
    assert d[0] == pytest.approx(4.0, rel=1e-12)
    assert d[1] == pytest.approx(4 * (1 - 15 / 70), rel=1e-12)
    assert d[2] == pytest.approx(16 * (1 - np.prod([(240 - i) / (256 - i) for i in range(8)])), rel=1e-12)
    assert d[3] == pytest.approx(1.0)
    qwen = load_config(["model=qwen3-30b-a3b"]).model
    want = 8 * (1 - np.prod([(112 - i) / (128 - i) for i in range(8)]))
    assert float(moe_dispatch.distinct_domains_per_token(qwen, 8)) == pytest.approx(want, rel=1e-12)


def test_hierarchical_dispatch_seconds_by_hand():
    """One DeepEP dispatch of 4096 tokens of DeepSeek-V3 (h 7168, bf16) over ep 32 on 4 H100 nodes (preset: NVLink
    450 GB/s, NIC 50 GB/s per GPU, comm_efficiency eff, latencies 5 / 10 us). Per copy 4096 x 7168 x 2 bytes.
    Network: 3.143 destination nodes per token (test above), 3/4 of them remote; NVLink: 7.134 destination ranks
    (8 (1 - prod (248 - i)/(256 - i)) over 32 ranks of 8 experts), 7/8 of them not on the forwarding GPU. The NIC is
    the bottleneck: 2.357 copies at 50 GB/s against 6.24 at 450. Plus 31 inter-node latencies. Within one NVL72
    domain (GB200, ep 64) nothing crosses the network: 63/64 of the distinct ranks over NVLink."""
    m, c = DSV3.model, DSV3.cluster
    copy = 4096 * 7168 * 2
    nodes = 4 * (1 - 15 / 70)
    ranks = 32 * (1 - np.prod([(248 - i) / (256 - i) for i in range(8)]))
    net = copy * nodes * 3 / 4 / (c.inter_node_bw_bytes_per_s * c.comm_efficiency)
    nvl = copy * ranks * 7 / 8 / (c.intra_node_bw_bytes_per_s * c.comm_efficiency)
    assert net > nvl
    got = float(moe_dispatch.hierarchical_dispatch_s(m, 4096, 7168, 2, 32, 1, c))
    assert got == pytest.approx(net + 31 * c.inter_node_latency_s, rel=1e-12)
    # against alltoall: 8 copies, 24/32 of them to other nodes, through the same NIC
    a2a = float(moe.a2a_s(4096 * 8, 7168, 2, 32, 1, c))
    assert a2a == pytest.approx(
        copy * 8 * 24 / 32 / (c.inter_node_bw_bytes_per_s * c.comm_efficiency) + 31e-5, rel=1e-9
    )
    gb = load_config(["model=deepseek-v3", "cluster=gb200-nvl72"]).cluster
    ranks64 = 64 * (1 - np.prod([(252 - i) / (256 - i) for i in range(8)]))
    want = copy * ranks64 * 63 / 64 / (gb.intra_node_bw_bytes_per_s * gb.comm_efficiency) + 63 * gb.intra_node_latency_s
    assert float(moe_dispatch.hierarchical_dispatch_s(m, 4096, 7168, 2, 64, 1, gb)) == pytest.approx(want, rel=1e-12)


def test_dispatcher_memory():
    """DeepEP's buffers join the runtime overhead (outside the caching allocator); allgather's gathered tokens of
    the EP group are a transient buffer: ep x tokens x h x c = 32 x 4096 x 7168 x 2 bytes."""
    m, t, c = DSV3.model, DSV3.train, DSV3.cluster
    mem = {d: estimate_memory(ParallelPlan(**{**PLAN.__dict__, "moe_dispatcher": d}), m, t, c) for d in
           ("alltoall", "allgather", "deepep")}  # fmt: skip
    assert mem["deepep"].overhead_bytes - mem["alltoall"].overhead_bytes == pytest.approx(
        float(moe_dispatch.deepep_buffer_bytes(7168, 32))
    )
    assert mem["allgather"].buffers_bytes - mem["alltoall"].buffers_bytes == pytest.approx(32 * 4096 * 7168 * 2)


def test_who_offers_which_dispatcher():
    qwen = load_config(["model=qwen3-30b-a3b", "cluster=h100-sxm-80gb"])
    plan = ParallelPlan(dp=8, ep=8, zero_stage=1, micro_batch_size=1, grad_accum_steps=64)

    def reason(framework: str, d: str) -> str | None:
        train = dataclasses.replace(qwen.train, framework=framework)
        return check_plan(ParallelPlan(**{**plan.__dict__, "moe_dispatcher": d}), qwen.model, train, qwen.cluster)

    for d in ("alltoall", "allgather", "deepep", "hybridep"):  # Megatron offers all four
        assert reason("megatron", d) is None
    assert "all-to-all only" in reason("bench_model", "deepep") and "all-to-all only" in reason(
        "bench_model", "hybridep"
    )
    assert "no all-gather" in reason("torchtitan", "allgather")
    for d in ("deepep", "hybridep"):  # torchtitan expert_parallel_comm_backend: standard | deepep | hybridep
        assert "moe_dispatcher" not in (reason("torchtitan", d) or "")
    assert "all-to-all only" in reason("deepspeed", "allgather") and "all-to-all only" in reason("nanotron", "deepep")


def test_trainer_refuses_other_dispatchers_in_one_line():
    from bench_model.trainer_moe import check_moe_trial

    model = load_config(["model=tiny-moe"]).model
    spec = SimpleNamespace(model=model, plan=ParallelPlan(dp=2, ep=2, moe_dispatcher="deepep"))
    with pytest.raises(SpecError, match="moe_dispatcher=deepep: bench_model dispatches with all-to-all only"):
        check_moe_trial(spec)


def test_synchronous_dispatch_hides_nothing():
    """bench_model's all_to_all_single blocks its compute stream and Megatron without --overlap-moe-expert-parallel-
    comm dispatches on it too: the EP time is all exposed, the same for both; Megatron with plan.ep_overlap hides
    part of it behind another micro-batch's compute (tests/unit/test_ep_overlap.py checks the amount)."""
    q = load_config(["model=qwen3-30b-a3b", "cluster=h100-sxm-80gb"])
    plan = ParallelPlan(dp=16, ep=16, zero_stage=1, micro_batch_size=1, grad_accum_steps=32)
    ep = {
        (f, o): perf_arrays(
            arrays_from_plans([dataclasses.replace(plan, ep_overlap=o)]),
            q.model,
            dataclasses.replace(q.train, framework=f),
            q.cluster,
        )["ep_comm_s"][0]
        for f, o in (("bench_model", False), ("megatron", False), ("megatron", True))
    }
    assert ep[("bench_model", False)] == pytest.approx(ep[("megatron", False)])
    assert ep[("megatron", False)] > ep[("megatron", True)] > 0

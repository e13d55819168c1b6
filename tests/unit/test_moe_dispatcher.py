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
from autotune.predict import moe
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
    assert float(moe.distinct_ranks_per_token(m, 8)) == pytest.approx(8 * (1 - miss), rel=1e-12)
    assert float(moe.distinct_ranks_per_token(m, 1)) == pytest.approx(1.0)
    assert float(moe.deepep_buffer_bytes(7168, 8)) == 10 * 8 * 256 * 16384 == 335_544_320
    assert float(moe.deepep_buffer_bytes(7168, 64)) == 10 * 8 * 288 * 16384 + 10 * 8 * 128 * 16400 * 2 + 2**20


def test_dispatchers_move_what_they_should():
    """Same layout, ep 32 over 4 nodes: DeepEP sends a token once per destination rank (7.1 of the 8 copies at ep
    32), so its all-to-all time is below alltoall's by that ratio; allgather moves every rank's tokens to every rank
    (ep x the tokens): more bytes than k copies when ep > k."""
    m, t, c = DSV3.model, DSV3.train, DSV3.cluster
    plans = [ParallelPlan(**{**PLAN.__dict__, "moe_dispatcher": d}) for d in ("alltoall", "allgather", "deepep")]
    ep = perf_arrays(arrays_from_plans(plans), m, t, c)["ep_comm_s"]
    ratio = float(moe.distinct_ranks_per_token(m, 32)) / 8
    assert 0.8 < ratio < 0.95 and ep[2] < ep[0]
    # the raw all-to-all (before overlap with compute) scales with the copies it moves
    a2a = [float(moe.a2a_s(moe.dispatch_copies(m, d, 4096, 32), 7168, 2, 32, 1, c)) for d in (0, 2)]
    assert a2a[1] / a2a[0] == pytest.approx(ratio, rel=0.01)  # + the same ep-1 latencies on both
    assert float(moe.allgather_bytes(1, 7168, 2, 32)) == 32 * 7168 * 2 > 8 * 7168 * 2


def test_dispatcher_memory():
    """DeepEP's buffers join the runtime overhead (outside the caching allocator); allgather's gathered tokens of
    the EP group are a transient buffer: ep x tokens x h x c = 32 x 4096 x 7168 x 2 bytes."""
    m, t, c = DSV3.model, DSV3.train, DSV3.cluster
    mem = {d: estimate_memory(ParallelPlan(**{**PLAN.__dict__, "moe_dispatcher": d}), m, t, c) for d in
           ("alltoall", "allgather", "deepep")}  # fmt: skip
    assert mem["deepep"].overhead_bytes - mem["alltoall"].overhead_bytes == pytest.approx(
        float(moe.deepep_buffer_bytes(7168, 32))
    )
    assert mem["allgather"].buffers_bytes - mem["alltoall"].buffers_bytes == pytest.approx(32 * 4096 * 7168 * 2)


def test_who_offers_which_dispatcher():
    qwen = load_config(["model=qwen3-30b-a3b", "cluster=h100-sxm-80gb"])
    plan = ParallelPlan(dp=8, ep=8, zero_stage=1, micro_batch_size=1, grad_accum_steps=64)

    def reason(framework: str, d: str) -> str | None:
        train = dataclasses.replace(qwen.train, framework=framework)
        return check_plan(ParallelPlan(**{**plan.__dict__, "moe_dispatcher": d}), qwen.model, train, qwen.cluster)

    for d in ("alltoall", "allgather", "deepep"):  # Megatron offers all three
        assert reason("megatron", d) is None
    assert "all-to-all only" in reason("bench_model", "deepep")
    assert "no all-gather" in reason("torchtitan", "allgather") and "moe_dispatcher" not in (
        reason("torchtitan", "deepep") or ""
    )
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

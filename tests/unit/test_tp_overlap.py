"""plan.tp_overlap (TP communication overlap): its rules, its cost term against hand-computed values, its exports and
the trainer's one-line refusal where torch's async TP cannot run (CPU / gloo)."""

import datetime
import functools

import numpy as np
import pytest
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from autotune.core.errors import SpecError, UsageError
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.interop import render, unmapped
from autotune.layouts.rules import check_plan, rejections
from autotune.predict.perf import estimate_perf
from autotune.predict.perf_terms import TP_OVERLAP_EFFICIENCY, tp_overlap_exposed_s, tp_overlap_layer_s
from autotune.spec.config import load_config
from bench_model.parallel.tensor_parallel import enable_async_tp

SEVENTY_B = ["model=llama-3.1-70b", "cluster=h100-sxm-80gb", "train.global_batch_size=64"]


def _plan(**kw) -> ParallelPlan:
    base = dict(dp=1, tp=8, micro_batch_size=1, grad_accum_steps=64, sequence_parallel=True, compile=True)
    return ParallelPlan(**{**base, **kw})


def _rule_id(plan: ParallelPlan, framework: str = "bench_model") -> str | None:
    cfg = _config(framework)
    return rejections(arrays_from_plans([plan]), cfg.model, cfg.train, cfg.cluster)[0][0]


@functools.cache
def _config(framework: str):
    return load_config([*SEVENTY_B, f"train.framework={framework}"])


def test_rules_need_tp_sp_and_compile_where_the_framework_does():
    assert _rule_id(_plan(tp=1, dp=8, grad_accum_steps=8, sequence_parallel=False, tp_overlap=True)) == (
        "tp_overlap_needs_tp"
    )
    assert _rule_id(_plan(sequence_parallel=False, tp_overlap=True)) == "tp_overlap_needs_sp"
    # torch async TP is Inductor's pass: bench_model and torchtitan 0.2.2 (maybe_enable_async_tp raises) need compile
    for fw in ("bench_model", "torchtitan"):
        assert _rule_id(_plan(compile=False, tp_overlap=True), fw) == "tp_overlap_needs_compile", fw
    # Megatron's --tp-comm-overlap (TE userbuffers) and nanotron's async column linears involve no compile; the
    # SP requirement stays (Megatron-LM validate_args)
    for fw in ("megatron", "nanotron"):
        assert _rule_id(_plan(compile=False, tp_overlap=True), fw) is None, fw
        assert _rule_id(_plan(sequence_parallel=False, tp_overlap=True), fw) == "tp_overlap_needs_sp", fw
    assert _rule_id(_plan(tp_overlap=True)) is None


def test_exposed_time_of_a_decomposed_collective_by_hand():
    """Wang et al. 2023 collective matmul: exposed = max(C - (n-1)/n G, (1 - eta) C), eta = 0.8.
    C=1, G=4, n=4: GEMM hides 3 > C, so (1-0.8)*1 = 0.2.  C=1, G=0.8, n=4: 1 - 0.6 = 0.4.  n=1: no collective."""
    assert TP_OVERLAP_EFFICIENCY == 0.8
    got = tp_overlap_exposed_s(np.array([1.0, 1.0, 0.0]), np.array([4.0, 0.8, 5.0]), np.array([4, 4, 1]))
    np.testing.assert_allclose(got, [0.2, 0.4, 0.0])
    # a layer: the halves of C = 2 behind attention (G=0.5) and MLP (G=3) GEMMs at n = 2:
    # max(1 - 0.25, 0.2) + max(1 - 1.5, 0.2) = 0.75 + 0.2
    np.testing.assert_allclose(tp_overlap_layer_s(2.0, 0.5, 3.0, 2), 0.95)


def test_overlap_removes_only_tp_time_and_by_the_efficiency_when_gemms_are_long():
    cfg = _config("bench_model")
    m, t, c = cfg.model, cfg.train, cfg.cluster
    plain, over = (estimate_perf(_plan(tp_overlap=o), m, t, c) for o in (False, True))
    assert over.compute_s == plain.compute_s and over.dp_comm_s == plain.dp_comm_s
    # Llama-3.1-70B at tp=8, seq 8192: each block's GEMMs (attention: 2h(h+kv) = 2*8192*(8192+1024) params) take
    # longer than 8/7 of its half of the TP traffic, so both halves keep exactly (1 - eta) of their time
    np.testing.assert_allclose(over.tp_comm_s, (1 - TP_OVERLAP_EFFICIENCY) * plain.tp_comm_s, rtol=1e-12)
    assert over.tokens_per_s_per_gpu > plain.tokens_per_s_per_gpu


def test_exports_write_each_targets_switch():
    cfg = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])
    plan = ParallelPlan(
        dp=4, tp=2, zero_stage=3, micro_batch_size=2, grad_accum_steps=64, sequence_parallel=True, tp_overlap=True
    )
    job = (cfg.model, cfg.train, cfg.cluster, plan)
    megatron = render("megatron", *job).splitlines()
    assert "--tp-comm-overlap" in megatron and "--sequence-parallel" in megatron  # a bare switch, not "... True"
    assert "enable_async_tensor_parallel = true" in render("torchtitan", *job)
    assert "tp_linear_async_communication: true" in render("nanotron", *job)
    # accelerate lists it in the file as NOT MAPPED, with the table's why
    assert any(u.startswith("plan.tp_overlap") for u in unmapped("accelerate", *job)), unmapped("accelerate", *job)
    with pytest.raises(
        UsageError, match=r"^--format=deepspeed: plan.tp=2: the DeepSpeed engine has no tensor parallel"
    ):
        unmapped("deepspeed", *job)  # the DeepSpeed engine has no TP at all: refused, not written (issue 28)


@pytest.fixture
def one_rank_mesh():
    """A real one-rank gloo process group and its 1-D mesh (the refusal must not need more)."""
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    try:
        yield init_device_mesh("cpu", (1,), mesh_dim_names=("tp",))
    finally:
        dist.destroy_process_group()


def test_trainer_refuses_async_tp_on_cpu_in_one_line(one_rank_mesh):
    with pytest.raises(SpecError, match=r"^plan.tp_overlap=true on device cpu: torch async TP needs CUDA") as e:
        enable_async_tp(one_rank_mesh, "cpu", compile=True)
    assert "\n" not in str(e.value)
    with pytest.raises(SpecError, match=r"plan.tp_overlap=true with plan.compile=false: .*tp_overlap_needs_compile"):
        enable_async_tp(one_rank_mesh, "cpu", compile=False)


def test_default_plan_is_unchanged_by_the_field():
    cfg = load_config(["model=tiny"])
    plan = ParallelPlan(dp=2, micro_batch_size=1, grad_accum_steps=4)
    assert plan.tp_overlap is False
    assert check_plan(plan, cfg.model, TrainSpec(seq_len=cfg.train.seq_len, global_batch_size=8), cfg.cluster) is None

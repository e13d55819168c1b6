"""plan.ep_overlap (Megatron's EP communication overlap, combined 1F1B): its rules, its cost terms against
hand-computed values, its exports, the trainer's one-line refusal and the reference rows it is mapped on; and the
streaming roofline (perf_terms.streaming_s) of the optimizer step and the expert casts."""

import dataclasses
import functools
from types import SimpleNamespace

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan
from autotune.interop import render, unmapped
from autotune.layouts.rules import rejections
from autotune.predict import moe
from autotune.predict.perf import perf_arrays
from autotune.predict.perf_terms import memory_bound_s, streaming_s
from autotune.spec.config import load_config

QWEN = ["model=qwen3-30b-a3b", "cluster=h100-sxm-80gb", "train.global_batch_size=256"]


@functools.cache
def _config(framework: str):
    return load_config([*QWEN, f"train.framework={framework}"])


def _plan(**kw) -> ParallelPlan:
    base = dict(dp=8, ep=8, zero_stage=1, micro_batch_size=1, grad_accum_steps=32, ep_overlap=True)
    return ParallelPlan(**{**base, **kw})


def _rule_id(plan: ParallelPlan, framework: str = "megatron") -> str | None:
    cfg = _config(framework)
    return rejections(arrays_from_plans([plan]), cfg.model, cfg.train, cfg.cluster)[0][0]


def test_rules_are_megatrons_asserts():
    """Megatron-Core TransformerConfig.__post_init__ (@ d98e8a64): EP > 1, alltoall/flex dispatcher, no full or
    moe-module recompute, virtual stages with PP; and only Megatron has the overlap."""
    assert _rule_id(_plan()) is None
    assert _rule_id(_plan(ep=1)) == "ep_overlap_needs_ep"
    assert _rule_id(_plan(moe_dispatcher="allgather")) == "ep_overlap_dispatcher"
    assert _rule_id(_plan(moe_dispatcher="deepep")) is None  # flex + DeepEP
    assert _rule_id(_plan(recompute="full")) == "ep_overlap_no_layer_recompute"
    assert _rule_id(_plan(recompute="selective", moe_recompute="moe")) == "ep_overlap_no_layer_recompute"
    assert _rule_id(_plan(recompute="selective", moe_recompute="moe_act")) is None
    assert _rule_id(_plan(dp=4, ep=4, pp=2, grad_accum_steps=64)) == "ep_overlap_pp_needs_vpp"
    assert _rule_id(_plan(dp=4, ep=4, pp=2, vpp=2, grad_accum_steps=64, pp_schedule="interleaved_1f1b")) is None
    for fw in ("bench_model", "torchtitan"):
        assert _rule_id(_plan(), fw) == "ep_overlap_needs_megatron", fw


def test_unpaired_share_by_hand():
    """combined 1F1B without PP: the first forward and the last backward alone, 1 of m. Interleaved PP on rank 0:
    warm-up (pp-1)*2 + (vpp-1)*pp + 1 of m*vpp chunks: pp 4, vpp 3 -> 6 + 8 + 1 = 15 of 24 at m = 8; all at m = 2."""
    got = moe.ep_overlap_unpaired(np.array([1, 4, 4]), np.array([1, 3, 3]), np.array([32, 8, 2]))
    np.testing.assert_allclose(got, [1 / 32, 15 / 24, 1.0])


def test_exposed_all_to_all_by_hand():
    """C = 10 s of all-to-all, u = 0.25 unpaired, overlap 0.8 (0.2 of the overlapped part lost to contention):
    behind G = 6 s of the other micro-batch's layer 0.25*10 + 0.75*(4 + 0.2*6) = 6.4; behind G = 12:
    2.5 + 0.75*(0 + 0.2*10) = 4.0; without the overlap all 10; with perfect overlap (1.0) and G = 6: 2.5 + 0.75*4 = 5.5."""
    c, g = np.array([10.0, 10.0, 10.0]), np.array([6.0, 12.0, 6.0])
    np.testing.assert_allclose(moe.ep_overlap_exposed_s(c, g, [1, 1, 0], 0.25, 0.8), [6.4, 4.0, 10.0])
    np.testing.assert_allclose(moe.ep_overlap_exposed_s(10.0, 6.0, 1, 0.25, 1.0), 5.5)


def test_overlap_hides_all_but_the_unpaired_micro_batch_when_compute_is_longer():
    """Qwen3-30B-A3B, ep 8 inside one H100 node: a layer's all-to-alls (~128 MB over NVLink) are shorter than its
    compute, so with the overlap the unpaired first/last micro-batch's remain (1/m) and the contention share
    (1 - dp_overlap) of the other m - 1. The rest of the step does not move."""
    cfg = _config("megatron")
    off, on = (
        perf_arrays(arrays_from_plans([_plan(ep_overlap=o)]), cfg.model, cfg.train, cfg.cluster) for o in (False, True)
    )
    assert float(off["ep_comm_s"][0]) > 0
    kept = 1 / 32 + (31 / 32) * (1 - cfg.cluster.dp_overlap)
    np.testing.assert_allclose(on["ep_comm_s"], off["ep_comm_s"] * kept, rtol=1e-12)
    for term in ("compute_s", "dp_comm_s", "optimizer_s"):
        np.testing.assert_allclose(on[term], off[term], rtol=1e-12)


def test_exports():
    cfg = _config("megatron")
    job = (cfg.model, cfg.train, cfg.cluster, _plan())
    assert "--overlap-moe-expert-parallel-comm" in render("megatron", *job).splitlines()  # a bare switch
    assert any(u.startswith("plan.ep_overlap") for u in unmapped("torchtitan", *job)), unmapped("torchtitan", *job)


def test_trainer_refuses_in_one_line():
    from bench_model.trainer_moe import check_moe_trial

    model = load_config(["model=tiny-moe"]).model
    spec = SimpleNamespace(model=model, plan=ParallelPlan(dp=2, ep=2, ep_overlap=True))
    with pytest.raises(SpecError, match=r"^plan.ep_overlap=true: bench_model dispatches on the compute stream") as e:
        check_moe_trial(spec)
    assert "\n" not in str(e.value)


def test_reference_rows_carry_the_recipes_switch():
    """Megatron-Bridge perf recipes @ 067f987d: qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx on, the 16-GPU H100 FP8-CS
    config off; Megatron-MoE-ModelZoo's H100 table: r030 "+1f1b overlap" on, r029 (same layout) off."""
    from autotune.fitting.nemo_runs import load_nemo_rows
    from autotune.fitting.public_moe_runs import load_public_moe

    nemo, _ = load_nemo_rows()
    on = {(r.model.name, r.cluster, r.plan.fp8) for r in nemo if r.plan.ep_overlap}
    off = {(r.model.name, r.cluster, r.plan.fp8) for r in nemo if not r.plan.ep_overlap and r.model.is_moe}
    assert ("qwen3-30b-a3b", "gb200-nvl72", "mxfp8") in on
    assert ("qwen3-30b-a3b", "h100-sxm-80gb", "tensorwise") in off and ("kimi-k2", "gb300-nvl72", "mxfp8") in off
    assert not any(r.plan.ep_overlap for r in nemo if not r.model.is_moe)
    public, _ = load_public_moe()
    rows = {r.row: r for r in public}  # ReferenceRun.row: the table's line index; r029 / r030 are lines 9 / 10
    assert rows[10].plan.ep_overlap and not rows[9].plan.ep_overlap
    assert rows[10].plan == dataclasses.replace(rows[9].plan, ep_overlap=True)


def test_streaming_roofline_by_hand():
    """1 GB at 4.8 TB/s: stream_efficiency 0.7 -> 1e9 / 3.36e12 s; a preset without it keeps memory_efficiency."""
    c = _config("megatron").cluster
    c7 = dataclasses.replace(c, hbm_bw_bytes_per_s=4.8e12, stream_efficiency=0.7)
    np.testing.assert_allclose(streaming_s(1e9, c7), 1e9 / (4.8e12 * 0.7))
    none = dataclasses.replace(c, stream_efficiency=None)
    np.testing.assert_allclose(streaming_s(1e9, none), memory_bound_s(1e9, none))

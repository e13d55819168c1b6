"""HSDP (`plan.dp_shard`): plan checks, constraint rule ids, planner canonical rows, memory and communication
checked by hand, OOM-pruning order, candidate ids of plain-FSDP layouts unchanged, layout label.

Memory by hand, Llama-3.1-8B (8,030,261,248 parameters, search_spaces/model/llama-3.1-8b.yaml) with bench_model's
mixed precision (fp32 params, fp32 grads, 2 fp32 AdamW states): ZeRO-3 on 64 GPUs shards grads over dp*cp = 64 ranks,
32 * 8,030,261,248 / 64 = 125,472,832 * 4 = 501,891,328 bytes; HSDP with dp_shard = 8 (8 replicas of an 8-GPU node,
Zhao et al. 2023 "PyTorch FSDP" Sec 3.2.2) over 8 ranks only: 8,030,261,248 * 4 / 8 = 4,015,130,624 bytes of grads
and twice that, 8,030,261,248 bytes, of AdamW state."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.labels import layout_label
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan, candidate_id
from autotune.layouts.planner import enumerate_arrays, enumerate_candidates
from autotune.layouts.rules import check_plan, rejections, require_well_formed
from autotune.predict.memory import estimate_memory
from autotune.predict.perf import perf_arrays, ring_s
from autotune.search.oom_pruning import dominance_reason
from autotune.spec.config import load_config

P8B = 8_030_261_248


def _cfg(*extra: str):
    return load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb", *extra])


def test_dp_shard_equal_to_dp_is_plain_fsdp_and_stored_as_the_default():
    assert ParallelPlan(dp=8, zero_stage=3, dp_shard=8).dp_shard == 0
    assert ParallelPlan(dp=8, zero_stage=3, dp_shard=8) == ParallelPlan(dp=8, zero_stage=3)
    assert ParallelPlan(dp=8, zero_stage=3, dp_shard=2).dp_shard_size == 2
    assert ParallelPlan(dp=8, zero_stage=3).dp_shard_size == 8


@pytest.mark.parametrize(
    "kw, needle",
    [
        (dict(dp=8, zero_stage=3, dp_shard=3), "plan.dp_shard=3 does not divide plan.dp=8"),
        (dict(dp=8, zero_stage=1, dp_shard=2), "plan.dp_shard=2 requires plan.zero_stage >= 2"),
    ],
)
def test_bad_dp_shard_names_field_value_and_rule(kw, needle):
    """Across fields: the rule table (autotune.layouts.rules), which the exporters and the trainer apply too."""
    plan = ParallelPlan(grad_accum_steps=_cfg().train.global_batch_size // 8, **kw)
    with pytest.raises(SpecError, match=needle):
        require_well_formed(plan, _cfg().train)


def test_negative_dp_shard_is_refused_by_the_plan_itself():
    with pytest.raises(SpecError, match="plan.dp_shard=-1 must be an integer >= 0"):
        ParallelPlan(dp=8, zero_stage=3, dp_shard=-1)


def _rules_of(plans, cfg, space=None):
    return rejections(arrays_from_plans(plans), cfg.model, cfg.train, cfg.cluster, space or cfg.space)[0].tolist()


def test_constraint_rule_ids():
    cfg = _cfg()
    gbs = cfg.train.global_batch_size
    arr = arrays_from_plans([ParallelPlan(dp=8, zero_stage=3, grad_accum_steps=gbs // 8)])
    # rows the planner can produce before the rules run: a size that does not divide dp, HSDP at ZeRO-1
    arr_bad = {k: v.copy() for k, v in arr.items()}
    arr_bad = {k: np.concatenate([v, v, v]) for k, v in arr_bad.items()}
    arr_bad["dp_shard"][:] = [3, 2, 4]
    arr_bad["zero_stage"][:] = [3, 1, 3]
    rules, reasons = rejections(arr_bad, cfg.model, cfg.train, cfg.cluster, cfg.space)
    assert rules.tolist() == ["dp_shard_divides_dp", "dp_shard_needs_fsdp", None]
    assert reasons[0] == "plan.dp_shard=3 does not divide plan.dp=8"
    # the shard group stays inside an 8-GPU node unless the space allows otherwise
    wide = ParallelPlan(dp=16, tp=2, zero_stage=3, dp_shard=8, grad_accum_steps=gbs // 16)
    assert _rules_of([wide], cfg) == ["dp_shard_within_node"]
    assert "dp_shard*cp*tp=8*1*2=16 exceeds gpus_per_node=8" in check_plan(
        wide, cfg.model, cfg.train, cfg.cluster, cfg.space
    )
    relaxed = _cfg("space.dp_shard_within_node=false")
    assert _rules_of([wide], relaxed) == [None]


def test_planner_rows_are_canonical():
    """space.dp_shard=[0, 2, 8] on 8 GPUs: dp=8 keeps 0 (= 8, plain FSDP) and 2 for ZeRO 2/3, one row (0) for ZeRO
    0/1; a size that does not divide dp is dropped (the rule dp_shard_divides_dp covers plans built elsewhere)."""
    cfg = _cfg("space.dp_shard=[0,2,8]", "space.tp=[1]", "space.pp=[1]", "space.cp=[1]", "space.micro_batch_size=[1]")
    arr = enumerate_arrays(cfg.space, cfg.train, 8)
    pairs = sorted(set(zip(arr["zero_stage"].tolist(), arr["dp_shard"].tolist())))
    assert pairs == [(0, 0), (1, 0), (2, 0), (2, 2), (3, 0), (3, 2)]
    # a size that divides no dp of 8 GPUs leaves only ZeRO 0/1 rows (stored 0); 4 appears only where it divides dp
    df = enumerate_candidates(load_config(["model=tiny", "space.dp_shard=[3]"]), 8)
    assert len(df) and (df["dp_shard"] == 0).all() and (df["zero_stage"] < 2).all()
    arr = enumerate_arrays(load_config(["model=tiny", "space.dp_shard=[0,4]"]).space, cfg.train, 8)
    hybrid = arr["dp_shard"] == 4
    assert hybrid.any() and (arr["dp"][hybrid] == 8).all()


def test_candidate_ids_of_plain_fsdp_do_not_change():
    """dp_shard = 0 leaves the hash as before the field existed (docs/extending.md "Candidate ids"): the id of this
    layout was computed on main before dp_shard was added."""
    cfg = load_config(["model=tiny"])
    plan = ParallelPlan(dp=8, zero_stage=3, micro_batch_size=1, grad_accum_steps=cfg.train.global_batch_size // 8)
    hsdp = ParallelPlan(**{**plan.to_dict(), "dp_shard": 2})
    assert candidate_id(plan, cfg.model, cfg.train) == "051fcc309d8a"  # main before dp_shard, same layout
    assert candidate_id(plan, cfg.model, cfg.train) == candidate_id(
        ParallelPlan(**{**plan.to_dict(), "dp_shard": 8}), cfg.model, cfg.train
    )
    assert candidate_id(hsdp, cfg.model, cfg.train) != candidate_id(plan, cfg.model, cfg.train)


def test_memory_hsdp_shards_states_over_dp_shard_by_hand():
    cfg = _cfg()
    gas = cfg.train.global_batch_size // 64
    fsdp = estimate_memory(ParallelPlan(dp=64, zero_stage=3, grad_accum_steps=gas), cfg.model, cfg.train, cfg.cluster)
    hsdp = estimate_memory(
        ParallelPlan(dp=64, zero_stage=3, grad_accum_steps=gas, dp_shard=8), cfg.model, cfg.train, cfg.cluster
    )
    assert cfg.model.num_params() == P8B
    assert fsdp.grads_bytes == 501_891_328 == P8B * 4 / 64
    assert hsdp.grads_bytes == 4_015_130_624 == P8B * 4 / 8
    assert hsdp.optimizer_bytes == 8_030_261_248 == 2 * P8B * 4 / 8
    assert fsdp.activations_bytes == hsdp.activations_bytes  # only the states move
    # with CP the shard group is dp_shard*cp (context-parallel ranks hold the same parameters)
    cp2 = estimate_memory(
        ParallelPlan(dp=32, cp=2, zero_stage=3, grad_accum_steps=gas * 2, dp_shard=4), cfg.model, cfg.train, cfg.cluster
    )
    assert cp2.grads_bytes == P8B * 4 / 8


def test_perf_hsdp_gathers_in_the_node_and_all_reduces_across_replicas_by_hand():
    """dp_overlap = 0 (nothing hidden): stage 2 exposes, per micro-batch, every block's all-gather and reduce-scatter
    on the shard group of 8 (NVLink) and the root unit's; once per step (bench_model reduces across replicas only on
    the last micro-batch) each block's and the root's 1/8 gradient shard all-reduced across the 8 replicas (NCCL
    ring costs, NCCL docs "Performance": all-gather (n-1)/n * B / bw + (n-1) alpha, all-reduce twice that)."""
    cfg = _cfg("cluster.dp_overlap=0.0")
    c = cfg.cluster
    gas = cfg.train.global_batch_size // 64
    arr = arrays_from_plans([ParallelPlan(dp=64, zero_stage=2, grad_accum_steps=gas, dp_shard=8)])
    res = perf_arrays(arr, cfg.model, cfg.train, cfg.cluster)
    m = cfg.model
    layer, root = m.layer_params(), m.embedding_params() + m.head_params() + m.hidden_size
    nv = (c.intra_node_bw_bytes_per_s * c.comm_efficiency, c.intra_node_latency_s)
    # replicas are 8 ranks apart: one GPU (one NIC) per node in each ring (autotune/predict/perf.py _link)
    ib = (min(c.inter_node_bw_bytes_per_s * 1, c.intra_node_bw_bytes_per_s) * c.comm_efficiency, c.inter_node_latency_s)

    def ag(n, b, link):
        return (n - 1) / n * b / link[0] + (n - 1) * link[1]

    per_mb = m.num_layers * (ag(8, layer * 2, nv) + ag(8, layer * 4, nv)) + ag(8, root * 2, nv) + ag(8, root * 4, nv)
    # all-reduce = twice the all-gather's bandwidth term; latency: NCCL's tree across the 8 nodes (one rank each),
    # 2*log2(8) = 6 hops, beats the ring's 2*7 (autotune/predict/collectives.py dp_all_reduce_s)
    per_step = sum(2 * ag(8, b, (ib[0], 0.0)) + 6 * ib[1] for b in [layer * 4 / 8] * m.num_layers + [root * 4 / 8])
    assert res["dp_comm_s"][0] == pytest.approx(gas * per_mb + per_step, rel=1e-9)
    assert res["dp_replicate_comm_s"][0] == pytest.approx(per_step, rel=1e-9)
    plain = arrays_from_plans([ParallelPlan(dp=64, zero_stage=2, grad_accum_steps=gas)])
    assert perf_arrays(plain, cfg.model, cfg.train, cfg.cluster)["dp_replicate_comm_s"][0] == 0.0
    assert ring_s("all_reduce", 1, 1e9, 1.0, 1.0) == 0.0  # plain FSDP: one replica, no all-reduce term


def test_oom_order_lower_dp_shard_needs_more():
    oom = dict(ParallelPlan(dp=64, zero_stage=3, grad_accum_steps=4, dp_shard=16).to_dict())
    smaller = dict(oom, dp_shard=8)
    plain = dict(oom, dp_shard=0)
    assert dominance_reason(oom, smaller) == "dp_shard 8 < 16"
    assert dominance_reason(oom, plain) is None  # 0 = all 64 ranks: the largest group, needs less
    assert dominance_reason(plain, dict(oom)) is not None


def test_oom_mask_ranks_zero_as_all_of_dp():
    import pandas as pd

    from autotune.search.oom_pruning import dominated_mask

    oom = ParallelPlan(dp=64, zero_stage=3, grad_accum_steps=4, dp_shard=16).to_dict()
    rows = pd.DataFrame([dict(oom, dp_shard=v) for v in (0, 8, 16, 32)])
    assert dominated_mask(rows, oom).tolist() == [False, True, True, False]


def test_label_names_hsdp():
    assert layout_label(ParallelPlan(dp=8, zero_stage=3, dp_shard=4)).endswith(" hsdp4")
    assert "hsdp" not in layout_label(ParallelPlan(dp=8, zero_stage=3))

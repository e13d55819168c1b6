"""plan.ep / plan.etp: the per-field checks, the MoE layout rules (autotune.layouts.moe_rules), the folded expert mesh,
and probe-memory on expert-parallel layouts (fake process group)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan
from autotune.layouts.moe_rules import check_moe_plan, moe_rejections
from autotune.spec.config import load_config

MOE = load_config(["model=tiny-moe"]).model  # 8 experts of width 64
DENSE = load_config(["model=tiny"]).model


@pytest.mark.parametrize("field", ["ep", "etp"])
@pytest.mark.parametrize("value", [0, -2, True])
def test_ep_fields_must_be_integers_at_least_one(field, value):
    with pytest.raises(SpecError, match=rf"plan.{field}={value!r} must be an integer >= 1"):
        ParallelPlan(**{field: value})


def test_edp_is_the_folded_remainder():
    # world 16 = pp2 x dp4 x tp2; per stage 8 ranks = edp x ep x etp = 2 x 2 x 2
    assert ParallelPlan(pp=2, dp=4, tp=2, sequence_parallel=True, ep=2, etp=2).edp == 2


CASES = [
    (DENSE, dict(dp=2, ep=2), "ep_dense_model", "ep=2, etp=1 need a mixture-of-experts model"),
    (MOE, dict(dp=3, ep=3), "ep_divides_experts", "ep=3 does not divide num_experts=8"),
    (MOE, dict(dp=3, etp=3), "etp_divides_moe_ffn", "etp=3 does not divide moe_ffn_hidden_size=64"),
    (MOE, dict(dp=2, ep=4), "moe_fold", "ep*etp=4*1=4 does not divide the ranks of a pipeline stage dp*cp*tp=2*1*1=2"),
    (MOE, dict(dp=2, tp=2, ep=2), "moe_needs_sp", "ep=2, etp=1 with tp=2 require sequence_parallel=true"),
]


@pytest.mark.parametrize("model, kw, rule, message", CASES, ids=[c[2] for c in CASES])
def test_each_rule_rejects_with_its_id_and_reason(model, kw, rule, message):
    plan = ParallelPlan(**kw)
    failing = [r for r, mask in moe_rejections(arrays_from_plans([plan]), model) if bool(np.asarray(mask)[0])]
    assert failing[0] == rule
    with pytest.raises(SpecError, match=rf"^plan: {re.escape(message)}.*\[{rule}\]$"):
        check_moe_plan(plan, model)


@pytest.mark.parametrize(
    "kw",
    [
        dict(dp=8, ep=8),
        dict(dp=2, tp=2, sequence_parallel=True, ep=4),  # ep over dp x tp ranks (folding)
        dict(dp=4, ep=2, etp=2),
        dict(dp=2, tp=2),  # tp without SP is fine while the experts are not split
        dict(pp=2, dp=2, ep=2),
    ],
)
def test_valid_moe_layouts_pass(kw):
    check_moe_plan(ParallelPlan(**kw), MOE)


def test_rules_are_vectorised_over_many_plans():
    plans = [ParallelPlan(dp=d, ep=e) for d in (1, 2, 4, 8) for e in (1, 2, 4, 8)]
    fold = dict(moe_rejections(arrays_from_plans(plans), MOE))["moe_fold"]
    assert fold.tolist() == [p.ep > p.dp for p in plans]


_BUILD = """
import json, sys, torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from autotune.core.types import ParallelPlan
from bench_model.parallel.mesh import build_meshes, build_expert_meshes
dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=16)
plan = ParallelPlan(**json.loads(sys.argv[1]))
m = build_meshes(plan, "cpu", 16)
e = build_expert_meshes(plan, "cpu", m.world)
seq = None if e.seq_group is None else dist.get_process_group_ranks(e.seq_group)
print(json.dumps([e.edp.mesh.tolist(), e.ep.mesh.tolist(), e.etp.mesh.tolist(), seq]))
"""


def test_expert_mesh_folds_the_stage_with_etp_innermost():
    """Rank 0 of pp2 x dp2 x cp2 x tp2 (SP) with ep2, etp2: stage 0 is ranks 0-7 viewed as (edp 2, ep 2, etp 2),
    so etp pairs adjacent ranks, ep strides 2 and edp 4; the sequence group is cp x tp = ranks 0-3 (cp, tp inner)."""
    plan = dict(pp=2, dp=2, cp=2, tp=2, sequence_parallel=True, ep=2, etp=2)
    out = subprocess.run([sys.executable, "-c", _BUILD, json.dumps(plan)], capture_output=True, text=True, check=True)
    edp, ep, etp, seq = json.loads(out.stdout.strip().splitlines()[-1])
    assert (edp, ep, etp, seq) == ([0, 4], [0, 2], [0, 1], [0, 1, 2, 3])


def _probe(*overrides) -> dict:
    from autotune.results.trialfile import make_spec
    from bench_model.memory_probe import probe_memory

    cfg = load_config(["model=tiny-moe", "train.precision=fp32", "train.global_batch_size=4", *overrides])
    return probe_memory(make_spec(cfg, cfg.plan(2)))


def test_probe_memory_runs_expert_parallel_layouts():
    """tiny-moe on a fake world of 2 with ep=2. Dense parameters 485,440 - 3 MoE layers x 8 experts x 12,288 =
    190,528; each rank holds 4 of the 8 experts: 3 x 4 x 12,288 = 147,456. ZeRO-0: AdamW's 2 fp32 states of all
    local parameters, 8 x 337,984 = 2,703,872 bytes. ZeRO-3: the dense part sharded over dp=2 (every dim 0 even, no
    padding) and the experts over edp = 2/2 = 1: 8 x (95,264 + 147,456) = 1,941,760 bytes."""
    z0 = _probe("plan.ep=2", "plan.zero_stage=0")
    z3 = _probe("plan.ep=2", "plan.zero_stage=3")
    assert z0["mem_optimizer_bytes"] == 2_703_872
    assert z3["mem_optimizer_bytes"] == 1_941_760
    assert z0["mem_params_bytes"] >= 4 * 337_984 and z0["mem_activations_bytes"] > 0

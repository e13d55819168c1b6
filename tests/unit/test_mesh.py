"""bench_model's device meshes: every submesh slice lists its dims in ascending mesh-dim order on every torch >= 2.6.

torch >= 2.10 validates a slice on its CuTe layout: the rank strides of the sliced dims must be non-increasing. In
torch 2.11 a size-1 dim keeps the row-major stride of the root mesh and a flattened dim whose sizes multiply to 1
coalesces to stride 0 (CuTe coalesce), so `world["dp_cp", "unit"]` at dp = cp = 1, tp = 8 was (0, 8): "Mesh dim
indices should be in ascending order" (measured on an H200 with torch 2.11, docs/memory_model.md). torch 2.13 drops
size-1 dims from layouts and accepts it, so the rule is checked here on the 2.11 layout directly, and the meshes are
also built for real on torch's "fake" process-group backend (rank 0 of a world of 8; no communication needed)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autotune.core.types import ParallelPlan
from bench_model.parallel.mesh import hsdp_dims

PLANS = [
    dict(dp=1, tp=8, sequence_parallel=True),
    dict(dp=4, tp=2),
    dict(dp=4, cp=2),
    dict(dp=8),
    dict(dp=1, cp=8),
    dict(dp=1, cp=2, tp=4),
    dict(dp=2, cp=2, tp=2),
    dict(dp=2, pp=2, tp=2),
    dict(dp=1, pp=8),
]


def _strides_torch_2_11(plan: ParallelPlan) -> dict[str, int]:
    """Rank stride of each named dim in torch 2.11's layout of the mesh (pp, dp, cp, unit=1, tp), row-major; the
    flattened dp_cp takes the stride of its innermost dim larger than 1, or 0 when dp*cp == 1 (coalesced to 1:0)."""
    sizes = {"pp": plan.pp, "dp": plan.dp, "cp": plan.cp, "unit": 1, "tp": plan.tp}
    strides, run = {}, 1
    for name in reversed(list(sizes)):
        strides[name], run = run, run * sizes[name]
    strides["dp_cp"] = 0 if plan.dp * plan.cp == 1 else strides["cp" if plan.cp > 1 else "dp"]
    return strides


@pytest.mark.parametrize("kw", PLANS, ids=lambda kw: "-".join(f"{k}{v}" for k, v in kw.items()))
def test_hsdp_slice_is_in_ascending_mesh_dim_order(kw):
    plan = ParallelPlan(**kw)
    strides = _strides_torch_2_11(plan)
    dims = hsdp_dims(plan)
    assert [strides[d] for d in dims] == sorted((strides[d] for d in dims), reverse=True), dims
    # the replicate dim spans exactly the dp x cp ranks
    assert {"dp": plan.dp, "cp": plan.cp, "dp_cp": plan.dp * plan.cp}[dims[0]] == plan.dp * plan.cp


def test_the_previous_slice_fails_the_rule_at_tp8():
    """The rule above is the one that rejected the old ("dp_cp", "unit") slice on torch 2.11 at dp = cp = 1, tp = 8."""
    strides = _strides_torch_2_11(ParallelPlan(dp=1, tp=8))
    assert (strides["dp_cp"], strides["unit"]) == (0, 8)


_BUILD = """
import json, sys, warnings, torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from autotune.core.types import ParallelPlan
from torch.distributed.device_mesh import DeviceMesh
from bench_model.parallel.mesh import build_meshes
dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
slices, getitem = [], DeviceMesh.__getitem__
def recording_getitem(self, names):  # every slice build_meshes asks for
    slices[-1].append([names] if isinstance(names, str) else list(names))
    return getitem(self, names)
DeviceMesh.__getitem__ = recording_getitem
out = []
for kw in json.loads(sys.argv[1]):
    slices.append([])
    m = build_meshes(ParallelPlan(**kw), "cpu", 8)
    out.append([m.hsdp.mesh.tolist(), m.dp_cp.mesh.tolist(), m.tp.mesh.tolist(), slices[-1]])
print(json.dumps(out))
"""


def test_build_meshes_on_a_fake_world_of_8():
    r = subprocess.run([sys.executable, "-c", _BUILD, json.dumps(PLANS)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    for kw, (hsdp, dp_cp, tp, slices) in zip(PLANS, json.loads(r.stdout.strip().splitlines()[-1])):
        plan = ParallelPlan(**kw)
        strides = _strides_torch_2_11(plan)
        for names in slices:  # the slices build_meshes really made, checked against torch 2.11's rule
            assert [strides[d] for d in names] == sorted((strides[d] for d in names), reverse=True), (kw, names)
        # rank 0's groups, rank = ((pp*dp + dp)*cp + cp)*tp + tp: dp x cp ranks are multiples of tp; tp ranks adjacent
        assert hsdp == [[i * plan.tp] for i in range(plan.dp * plan.cp)], kw
        assert dp_cp == [i * plan.tp for i in range(plan.dp * plan.cp)] and tp == list(range(plan.tp)), kw


HSDP_PLANS = [
    dict(dp=8, zero_stage=3, dp_shard=4),
    dict(dp=4, tp=2, zero_stage=2, dp_shard=2),
    dict(dp=2, cp=2, tp=2, zero_stage=3, dp_shard=1),
    dict(dp=4, cp=2, zero_stage=3, dp_shard=2),
]

_BUILD_HSDP = """
import json, sys, torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from autotune.core.types import ParallelPlan
from bench_model.parallel.mesh import build_meshes
dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
out = []
for kw in json.loads(sys.argv[1]):
    m = build_meshes(ParallelPlan(**kw), "cpu", 8)
    out.append([m.fsdp_mesh.mesh.tolist(), list(m.fsdp_mesh.mesh_dim_names), m.dp_cp.mesh.tolist(), m.dp_rank])
print(json.dumps(out))
"""


def test_hsdp_meshes_shard_inside_replicate_across():
    """HSDP (dp_shard > 0): rank 0's FSDP mesh is 2-D (dp_replicate, dp_shard*cp), the shard group the adjacent
    dp_shard*cp data-parallel ranks (ranks tp apart, same node), the replicas dp_shard*cp*tp ranks apart."""
    r = subprocess.run(
        [sys.executable, "-c", _BUILD_HSDP, json.dumps(HSDP_PLANS)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
    for kw, (fsdp, names, dp_cp, dp_rank) in zip(HSDP_PLANS, json.loads(r.stdout.strip().splitlines()[-1])):
        plan = ParallelPlan(**kw)
        shard, reps = plan.dp_shard * plan.cp, plan.dp // plan.dp_shard
        want = [[(i * shard + j) * plan.tp for j in range(shard)] for i in range(reps)]
        assert fsdp == want, kw
        assert names[0] == "dp_replicate", kw
        assert dp_cp == [i * plan.tp for i in range(plan.dp * plan.cp)] and dp_rank == 0, kw

"""The world as one DeviceMesh ("pp", "dp", "cp", "unit", "tp"), picotron-style: rank = ((pp*dp + dp)*cp + cp)*tp + tp,
so TP neighbours are adjacent ranks (same node) and PP is the outermost axis. "unit" is a size-1 axis that lets ZeRO
stages 0/1 run FSDP2 as HSDP with (replicate = dp*cp, shard = 1), i.e. DDP semantics. "dp_cp" is dp and cp flattened:
the data-parallel group over which parameters are replicated/sharded and gradients reduced (torchtitan's dp_shard_cp).

HSDP (plan.dp_shard > 0, ZeRO 2/3): dp splits into ("dp_replicate", "dp_shard") with the shard group inner (adjacent
ranks, so it stays inside a node), torchtitan's layout; `fsdp` is then the 2-D (dp_replicate, dp_shard*cp) mesh FSDP2
shards over its second dim and replicates over its first. Rank order is unchanged (dp = replicate*dp_shard + shard).

MoE models (`build_expert_meshes`): the same ranks folded as ("pp", "edp", "ep", "etp"), etp innermost, a second root
mesh over the world (Megatron-Core's parallel folding: the expert mesh need not align with dp/cp/tp); pp is the
outermost axis of both, so a stage's ranks are the same in both views. Only 1-D slices of it are taken. `seq_group`:
the ranks holding parts of the same sequences (cp, and tp under sequence parallelism), for the MoE balance loss's
per-sequence counts; None when a rank holds whole sequences."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from autotune.core.errors import SpecError
from autotune.core.types import ParallelPlan

AXES = ("pp", "dp", "cp", "unit", "tp")
EXPERT_AXES = ("pp", "edp", "ep", "etp")


@dataclass(frozen=True)
class ExpertMeshes:
    edp: DeviceMesh  # 1-D: the ranks holding the same expert slice (gradients/optimizer states of the experts)
    ep: DeviceMesh  # 1-D: token dispatch
    etp: DeviceMesh  # 1-D: the ranks splitting each expert's FFN width
    seq_group: dist.ProcessGroup | None = None


@dataclass(frozen=True)
class Meshes:
    world: DeviceMesh
    pp: DeviceMesh
    tp: DeviceMesh
    cp: DeviceMesh
    dp_cp: DeviceMesh  # 1-D, dp*cp ranks
    hsdp: DeviceMesh  # 2-D (dp_cp, unit): FSDP2 replicate x shard(=1)
    fsdp: DeviceMesh | None = None  # ZeRO 2/3 mesh: dp_cp (None), or 2-D (dp_replicate, dp_shard*cp) with HSDP
    expert: ExpertMeshes | None = None  # MoE models: the folded (edp, ep, etp) view (build_expert_meshes)

    @property
    def pp_rank(self) -> int:
        return self.pp.get_local_rank()

    @property
    def dp_rank(self) -> int:
        if "dp" not in (self.world.mesh_dim_names or ()):  # HSDP world: dp = dp_replicate x dp_shard
            return self.dp_cp.get_local_rank() // self.cp.size()
        return self.world.get_local_rank("dp")

    @property
    def fsdp_mesh(self) -> DeviceMesh:
        return self.dp_cp if self.fsdp is None else self.fsdp

    @property
    def cp_rank(self) -> int:
        return self.cp.get_local_rank()


def build_meshes(plan: ParallelPlan, device_type: str, world_size: int) -> Meshes:
    if plan.world_size != world_size:
        raise SpecError(
            f"plan dp({plan.dp}) * tp({plan.tp}) * pp({plan.pp}) * cp({plan.cp}) = {plan.world_size} "
            f"!= world_size({world_size})"
        )
    if plan.dp_shard and plan.zero_stage >= 2:
        return _hsdp_meshes(plan, device_type)
    world = init_device_mesh(device_type, (plan.pp, plan.dp, plan.cp, 1, plan.tp), mesh_dim_names=AXES)
    dp_cp = world["dp", "cp"]._flatten("dp_cp")  # private but stable since torch 2.5; torchtitan relies on it
    with warnings.catch_warnings():  # slicing a flattened dim with another one warns of a future deprecation
        warnings.simplefilter("ignore", UserWarning)
        hsdp = world[hsdp_dims(plan)]
    return Meshes(world=world, pp=world["pp"], tp=world["tp"], cp=world["cp"], dp_cp=dp_cp, hsdp=hsdp)


HSDP_AXES = ("pp", "dp_replicate", "dp_shard", "cp", "unit", "tp")


def _hsdp_meshes(plan: ParallelPlan, device_type: str) -> Meshes:
    """The world with dp split into (dp_replicate, dp_shard), and the 2-D FSDP mesh (dp_replicate, dp_shard*cp)."""
    shape = (plan.pp, plan.dp // plan.dp_shard, plan.dp_shard, plan.cp, 1, plan.tp)
    world = init_device_mesh(device_type, shape, mesh_dim_names=HSDP_AXES)
    dp_cp = world["dp_replicate", "dp_shard", "cp"]._flatten("dp_cp")
    with warnings.catch_warnings():  # slicing a flattened dim with another one warns of a future deprecation
        warnings.simplefilter("ignore", UserWarning)
        if plan.cp == 1:
            fsdp = world["dp_replicate", "dp_shard"]
        else:
            world["dp_shard", "cp"]._flatten("dp_shard_cp")
            fsdp = world["dp_replicate", "dp_shard_cp"]
    # `hsdp` (FSDP-as-DDP for ZeRO 0/1) is unused at stages 2/3: the FSDP mesh stands in, no extra slice
    return Meshes(world=world, pp=world["pp"], tp=world["tp"], cp=world["cp"], dp_cp=dp_cp, hsdp=fsdp, fsdp=fsdp)


def hsdp_dims(plan: ParallelPlan) -> tuple[str, str]:
    """Names of the (replicate, shard) mesh dims for FSDP2-as-DDP, in ascending mesh-dim order (non-increasing rank strides) on every torch.
    A slice must list dims with non-increasing rank strides (torch >= 2.10 checks the CuTe layouts; older torch the
    dim indices). When dp or cp is 1, dp_cp is the other root dim, so slice that: a flattened dim of size 1 has
    stride 0 in torch 2.11's layout algebra, which put ("dp_cp", "unit") out of order for dp = cp = 1 and tp > 1.
    With dp, cp > 1 the flattened dim has cp's stride, tp, the same as the size-1 "unit" after it."""
    if plan.cp == 1:
        return ("dp", "unit")
    if plan.dp == 1:
        return ("cp", "unit")
    return ("dp_cp", "unit")


def build_expert_meshes(plan: ParallelPlan, device_type: str, world: DeviceMesh) -> ExpertMeshes:
    """The folded MoE view of the world (module docstring); `world` is the dense world mesh (its inner cp/unit/tp dims
    give the sequence groups). Every rank must call it (it creates process groups)."""
    edp = plan.world_size // (plan.pp * plan.ep * plan.etp)
    shape = (plan.pp, edp, plan.ep, plan.etp)
    mesh = init_device_mesh(device_type, shape, mesh_dim_names=EXPERT_AXES)
    seq_tp = plan.tp if plan.sequence_parallel else 1
    seq_group = None
    if plan.cp * seq_tp > 1:
        # cp, unit, tp are the innermost dims of both world layouts; without SP the tp ranks share their tokens
        ranks = world.mesh.reshape(-1, plan.cp, plan.tp)
        ranks = ranks.reshape(-1, plan.cp * plan.tp) if seq_tp > 1 else ranks.transpose(1, 2).reshape(-1, plan.cp)
        seq_group, _ = dist.new_subgroups_by_enumeration(ranks.tolist())
    return ExpertMeshes(edp=mesh["edp"], ep=mesh["ep"], etp=mesh["etp"], seq_group=seq_group)

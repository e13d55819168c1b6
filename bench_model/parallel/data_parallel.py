"""Data parallelism by ZeRO stage (Rajbhandari et al. 2020, "ZeRO", Sec 5) over the flattened dp x cp group
(N = dp*cp ranks; CP ranks hold identical parameters and see different tokens, so they join gradient reduction; this is
torchtitan's dp_shard_cp). Every stage uses FSDP2 `fully_shard` per transformer block plus one root unit (embedding,
final norm, head), so all stages share one code path, one mixed-precision policy and per-block communication overlapped
with compute. Exactly what one rank holds, with P = this rank's parameters after TP/PP (fp32):

  stage 0  DDP semantics. FSDP2 as HSDP on mesh (replicate=N, shard=1): full P params, full P grads (fp32), full AdamW
           state (2P fp32). Gradients are all-reduced (mean) once per optimizer step, per block, overlapped with backward
           (no sync on earlier gradient-accumulation micro-batches).
  stage 1  As stage 0 for params and grads (all-reduced), but AdamW state is sharded: each rank keeps an fp32 slice of
           ceil(numel/N) elements of every parameter (the slice it updates) plus 2 state tensors of that size, i.e.
           P/N master slice + 2P/N state. After the update one flat all-gather refreshes the full parameters.
  stage 2  FSDP2 fully_shard over N with reshard_after_forward=False: params sharded at rest (P/N), gathered per
           block for forward and kept gathered until backward (so a full gathered copy of every block on this rank
           is alive from its forward until its backward: peak ~P in compute dtype during the step), grads
           reduce-scattered (mean) to P/N after every micro-batch, AdamW state 2P/N.
  stage 3  As stage 2 with reshard_after_forward=True: each block's gathered params are freed after its forward and
           re-gathered in backward; at most the current block (plus the one FSDP prefetches) is gathered at a time.

HSDP (plan.dp_shard, stages 2/3): the same with FSDP2 on the 2-D mesh (replicate = dp/dp_shard, shard = dp_shard*cp):
states are sharded over the shard group only (P/(dp_shard*cp)); gradients are reduce-scattered in the shard group every
micro-batch and all-reduced across the replicas once per step, on the last micro-batch (Zhao et al. 2023, "PyTorch
FSDP", Sec 3.2.2; FSDP2 set_requires_all_reduce).

Mixed precision (train.precision=bf16): parameters, gradients after reduction and AdamW state are fp32; FSDP2 casts the
gathered parameters to bf16 for compute (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)), so activations
are bf16 and the gathered-parameter buffers are bf16 (P*2 bytes per gathered block). fp32: everything fp32. Root unit
(embedding, final norm, output head) is gathered for the whole step (reshard_after_forward=False) in every stage.
With N == 1 and fp32 no wrapper is applied (nothing to reduce or cast)."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor

try:  # public from torch 2.6
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
except ImportError:  # pragma: no cover - torch < 2.6
    from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard

from bench_model.parallel.collectives import _all_gather_flat
from bench_model.parallel.expert_parallel import moe_modules
from bench_model.parallel.mesh import Meshes
from bench_model.parallel.offload import HOST, cpu_offload_policy

# ZeRO1AdamW all-gathers the updated slices bucket by bucket, each bucket's receive buffer at most this many bytes
# (or one parameter's, when a parameter is larger). One flat receive buffer of the whole local model (4 Psi bytes in
# fp32) made the step's transient block larger than foreach AdamW's own at dp*cp = 2, so ZeRO-1's reserved peak came
# out above ZeRO-0's (autotune/predict/reserved.py `step_temporaries`). 256 MiB: the order of Megatron-Core's buckets,
# whose distributed optimizer also gathers per bucket (megatron/core/distributed/distributed_data_parallel.py:
# bucket_size defaults to max(40M, 1M x dp) parameters, 160 MB of fp32 at dp <= 40).
GATHER_BUCKET_BYTES = 256 * 2**20


def gather_buckets(chunks: list[int], n: int, itemsize: int, cap: int | None = None) -> list[tuple[int, int]]:
    """[start, end) index ranges of consecutive parameters whose all-gather receive buffer (n x their chunks x
    itemsize bytes) stays within `cap` (default GATHER_BUCKET_BYTES); a parameter larger than the cap is a bucket
    of its own."""
    cap = GATHER_BUCKET_BYTES if cap is None else cap
    out, start, size = [], 0, 0
    for i, c in enumerate(chunks):
        if i > start and size + n * c * itemsize > cap:
            out.append((start, i))
            start, size = i, 0
        size += n * c * itemsize
    if chunks:
        out.append((start, len(chunks)))
    return out


def needs_fsdp(num_dp_ranks: int, precision: str) -> bool:
    return num_dp_ranks > 1 or precision == "bf16"


def apply_data_parallel(
    model: nn.Module,
    meshes: Meshes,
    zero_stage: int,
    precision: str,
    offload: str = "none",
    device_type: str = "cpu",
    expert_grad_divisor: int = 1,
) -> None:
    """offload="params": FSDP2 CPUOffloadPolicy on every unit (bench_model/parallel/offload.py). Stages 2-3 shard
    over meshes.fsdp_mesh: dp*cp, or with HSDP the 2-D (dp_replicate, dp_shard*cp) mesh.

    Routed experts of MoE layers (bench_model.parallel.expert_parallel) differ across ep/etp ranks, so they never
    join the dense groups: at stages 2/3 each layer's experts get their own fully_shard on the edp mesh (first, so
    the block's unit leaves them out) with the gradient divided by `expert_grad_divisor` instead of the mesh size
    (torchtitan's efsdp wrapping); at stages 0/1 they are ignored here and reduced by finalize_expert_grads."""
    mesh = meshes.hsdp if zero_stage in (0, 1) else meshes.fsdp_mesh
    mp = MixedPrecisionPolicy(
        param_dtype=torch.bfloat16 if precision == "bf16" else torch.float32, reduce_dtype=torch.float32
    )
    extra = {}
    if offload == "params":
        extra["offload_policy"] = cpu_offload_policy(torch.device(device_type))
    experts = [m.experts for m in moe_modules(model)]
    if experts and zero_stage >= 2:
        for ex in experts:
            fully_shard(ex, mesh=meshes.expert.edp, reshard_after_forward=(zero_stage == 3), mp_policy=mp, **extra)
            ex.set_gradient_divide_factor(float(expert_grad_divisor))
            if meshes.expert.edp.size() > 1:
                # SUM then divide: gloo has no PREMUL_SUM. Not on a 1-rank mesh: torch 2.13's single-rank path
                # divides by the factor and then post-divides by it again (measured: gradients 1/4 at factor 4)
                ex.set_force_sum_reduction_for_comms(True)
    elif experts:
        extra["ignored_params"] = {p for ex in experts for p in ex.parameters()}
    for block in model.layers.values():
        fully_shard(block, mesh=mesh, reshard_after_forward=(zero_stage == 3), mp_policy=mp, **extra)
    fully_shard(model, mesh=mesh, reshard_after_forward=False, mp_policy=mp, **extra)


def experts_use_fsdp(zero_stage: int, num_dp_ranks: int, precision: str) -> bool:
    """Whether apply_data_parallel shards the routed experts (else finalize_expert_grads reduces them)."""
    return zero_stage >= 2 and needs_fsdp(num_dp_ranks, precision)


def set_gradient_sync(parts: list[nn.Module], zero_stage: int, last_microbatch: bool) -> None:
    """Stages 0/1 reduce once per step (DDP no_sync); stages 2/3 reduce-scatter every micro-batch (grads sharded)."""
    for part in parts:
        if hasattr(part, "set_requires_gradient_sync"):
            part.set_requires_gradient_sync(last_microbatch or zero_stage >= 2)
            if zero_stage >= 2 and hasattr(part, "set_requires_all_reduce"):
                # HSDP: reduce-scatter every micro-batch, all-reduce across replicas once, on the last (FSDP2
                # accumulates the partial reduce output meanwhile; its docstring names this use). No-op on a 1-D mesh.
                part.set_requires_all_reduce(last_microbatch)


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t


class ZeRO1AdamW:
    """AdamW with optimizer state sharded over `group` (ZeRO stage 1). AdamW is elementwise, so updating slices with
    `torch.optim.AdamW` gives the same numbers as the unsharded optimizer. Gradients must already be reduced."""

    def __init__(self, params: list[nn.Parameter], group: dist.ProcessGroup, host: bool = False, **adamw_kwargs):
        """host=True (plan.offload=optimizer): the fp32 slices and their AdamW state live in host memory; gradient
        slices are copied there before the step, the updated slices back for the all-gather (ZeRO-Offload)."""
        self.params = [p for p in params if p.requires_grad]
        self.device = _local(self.params[0]).device if self.params else HOST
        self.host = host
        self.group, self.n, self.rank = group, dist.get_world_size(group), dist.get_rank(group)
        self.slices: list[tuple[int, int, int]] = []  # (start, end, chunk) into each flattened local parameter
        shards = []
        for p in self.params:
            numel = _local(p).numel()
            chunk = math.ceil(numel / self.n)
            start, end = min(self.rank * chunk, numel), min((self.rank + 1) * chunk, numel)
            self.slices.append((start, end, chunk))
            piece = _local(p).detach().reshape(-1)[start:end]
            shards.append(nn.Parameter(piece.to(HOST, copy=True) if host else piece.clone()))
        self.shards = shards
        self.inner = torch.optim.AdamW(shards, **adamw_kwargs)
        self.param_groups = self.inner.param_groups

    @torch.no_grad()
    def step(self) -> None:
        for p, shard, (start, end, _) in zip(self.params, self.shards, self.slices):
            g = _local(p.grad).reshape(-1)[start:end] if p.grad is not None else None
            shard.grad = g.to(HOST, copy=True) if self.host and g is not None else g  # D2H when offloaded
        self.inner.step()
        self._all_gather()

    @torch.no_grad()
    def _all_gather(self) -> None:
        chunks = [c for _, _, c in self.slices]
        if not chunks:
            return
        for lo, hi in gather_buckets(chunks, self.n, self.shards[0].element_size()):
            self._all_gather_bucket(self.params[lo:hi], self.shards[lo:hi], chunks[lo:hi])

    def _all_gather_bucket(self, params: list, shards: list, chunks: list[int]) -> None:
        send = torch.zeros(sum(chunks), dtype=shards[0].dtype, device=self.device)  # H2D when offloaded
        offset = 0
        for shard, c in zip(shards, chunks):
            send[offset : offset + shard.numel()] = shard
            offset += c
        recv = torch.empty(self.n * send.numel(), dtype=send.dtype, device=send.device)
        _all_gather_flat(recv, send, group=self.group)  # rank-major; gloo wants a flat output
        recv = recv.view(self.n, send.numel())
        offset = 0
        for p, c in zip(params, chunks):
            local = _local(p)
            local.view(-1).copy_(recv[:, offset : offset + c].reshape(-1)[: local.numel()])
            offset += c

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None
        for s in self.shards:
            s.grad = None

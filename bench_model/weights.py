"""Deterministic initialisation of a parallelised (DTensor) model: every rank draws the *full* fp32 value of each
parameter from the per-name seeded generator of bench_model.model.full_init_tensor and keeps its own shard. Replicate ->
Shard redistribution is a local slice (no communication), so the result equals the single-device init in every layout.
With tied embeddings the last pipeline stage's own head weight is drawn as "tok_embeddings.weight", the matrix it ties to
(bench_model.parallel.pipeline). Routed experts sharded by expert parallelism draw the full stacked tensor and keep
their (ep, etp) slice first (`_full_value`)."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.tensor import DTensor, Replicate

from bench_model.model import canonical_name, full_init_tensor


@torch.no_grad()
def init_parameters(module: nn.Module, seed: int, num_layers: int, device: torch.device) -> None:
    tied = module.spec.tie_embeddings
    for name, p in module.named_parameters():
        seed_name = name
        if tied and canonical_name(name) == "output.weight":  # a stage's own copy of the tied embedding
            seed_name = "tok_embeddings.weight"
        full = _full_value(module, name, seed_name, tuple(p.shape), seed, num_layers).to(device=device, dtype=p.dtype)
        if isinstance(p, DTensor):
            src = DTensor.from_local(full, p.device_mesh, [Replicate()] * p.device_mesh.ndim, run_check=False)
            p.to_local().copy_(src.redistribute(p.device_mesh, p.placements).to_local())
        else:
            p.copy_(full)
    module.init_buffers(device)


def _full_value(
    module: nn.Module, name: str, seed_name: str, shape: tuple[int, ...], seed: int, num_layers: int
) -> torch.Tensor:
    """The value parameter `name` starts from before any DTensor sharding: the full tensor seeded by `seed_name`, or
    for the routed experts under expert parallelism this rank's (ep, etp) slice of it (bench_model.moe.ExpertShard)."""
    owner_name, _, leaf = name.rpartition(".")
    shard = getattr(module.get_submodule(owner_name), "shard", None) if owner_name else None
    if shard is None:
        return full_init_tensor(seed_name, shape, seed, num_layers)
    return shard.take(leaf, full_init_tensor(seed_name, shard.full_shapes[leaf], seed, num_layers))

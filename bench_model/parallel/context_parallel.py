"""Context parallelism: the sequence is cut into 2*cp chunks and cp rank i holds chunks i and 2cp-1-i, so every rank gets
the same amount of causal-attention work (the load-balanced layout of Megatron-LM's CP and Llama 3, Dubey et al. 2024
Sec 3.3.2). Attention is exact: each rank all-gathers K and V over the cp group and applies an explicit causal mask on
*global* positions (query at position p sees keys at positions <= p). The all-gather is differentiable: its backward
reduce-scatters the K/V gradients (all-reduce + slice on gloo, which has no reduce-scatter). RoPE uses the same global
positions (the model's rope table is built for `rope_positions`). Works on CPU/gloo and CUDA/NCCL; torch's experimental
`context_parallel` is CUDA-only."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from autotune.core.errors import SpecError
from bench_model.model import _SDPA_HAS_GQA
from bench_model.parallel.collectives import _all_gather_flat, _reduce_scatter_flat


def cp_positions(seq_len: int, cp: int, cp_rank: int) -> torch.Tensor:
    """Global token positions held by `cp_rank`, in local order: chunk i then chunk 2cp-1-i."""
    if seq_len % (2 * cp):
        raise SpecError(f"train.seq_len={seq_len} must be divisible by 2*plan.cp={2 * cp} for load-balanced CP")
    c = seq_len // (2 * cp)
    a, b = cp_rank, 2 * cp - 1 - cp_rank
    return torch.cat([torch.arange(a * c, (a + 1) * c), torch.arange(b * c, (b + 1) * c)])


class _AllGatherSeq(torch.autograd.Function):
    """(B, H, S_loc, D) -> (B, H, cp*S_loc, D), rank-major along the sequence dim; backward sums gradients across ranks
    and returns this rank's slice."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group, n = group, dist.get_world_size(group)
        x = x.contiguous()
        out = torch.empty((n * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
        _all_gather_flat(out, x, group=group)  # (n*B, H, S, D): gloo wants dim 0 stacked
        return out.view(n, *x.shape).movedim(0, 2).flatten(2, 3)  # (n, B, H, S, D) -> (B, H, n*S, D)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        group, n = ctx.group, dist.get_world_size(ctx.group)
        b, h, ns, d = grad.shape
        g = grad.reshape(b, h, n, ns // n, d).movedim(2, 0).contiguous()  # (n, B, H, S, D)
        if dist.get_backend(group) == "nccl":
            out = torch.empty_like(g[0])
            _reduce_scatter_flat(out, g, group=group)
            return out, None
        dist.all_reduce(g, group=group)
        return g[dist.get_rank(group)].clone(), None


class ContextParallelAttention:
    """Replaces `Attention.sdpa`; holds the global positions of local queries and of the gathered keys."""

    def __init__(self, cp_mesh: DeviceMesh, seq_len: int):
        cp, rank = cp_mesh.size(), cp_mesh.get_local_rank()
        self.group = cp_mesh.get_group()
        self.q_pos = cp_positions(seq_len, cp, rank)
        self.k_pos = torch.cat([cp_positions(seq_len, cp, r) for r in range(cp)])
        self._mask: torch.Tensor | None = None

    def mask(self, device: torch.device) -> torch.Tensor:
        if self._mask is None or self._mask.device != device:
            self._mask = (self.k_pos[None, :] <= self.q_pos[:, None]).to(device)  # (S_loc, cp*S_loc), True = attend
        return self._mask

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        k = _AllGatherSeq.apply(k, self.group)
        v = _AllGatherSeq.apply(v, self.group)
        if q.shape[1] != k.shape[1]:
            if _SDPA_HAS_GQA:
                return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask(q.device), enable_gqa=True)
            rep = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask(q.device))


def apply_context_parallel(model: nn.Module, cp_mesh: DeviceMesh) -> None:
    """Swap every block's attention core and point RoPE at this rank's global positions (before `init_buffers`)."""
    attn = ContextParallelAttention(cp_mesh, model.seq_len)
    model.rope_positions = attn.q_pos
    for block in model.layers.values():
        block.attention.sdpa = attn

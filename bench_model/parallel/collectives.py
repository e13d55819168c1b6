"""Single-tensor collectives under their current names (torch 2.13 renamed all_gather_into_tensor ->
all_gather_single and reduce_scatter_tensor -> reduce_scatter_single; torch 2.6 has only the old names)."""

from __future__ import annotations

import torch.distributed as dist

_all_gather_flat = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_flat = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

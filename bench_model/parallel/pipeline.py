"""Pipeline parallelism with torch.distributed.pipelining: manual stage split of the Llama (layers keyed by global
index, so a stage is the full model with the other layers deleted), one PipelineStage per virtual stage, and the
GPipe / 1F1B (Narayanan et al. 2021, PipeDream-Flush) / interleaved 1F1B (Narayanan et al. 2021, Megatron-LM Sec 2.2)
schedules with n_microbatches = grad_accum_steps.

Stage placement: num_stages = pp*vpp; rank r of the pp group holds stages r, r+pp, ..., r+(vpp-1)*pp (loop order, as
the interleaved schedule expects). Layers: each stage gets floor(L/S); the L mod S extra layers go to the middle stages
first (1, 2, ..., S-2), then stage 0, then stage S-1, so the first stage (embedding) and the last stage (final norm +
output head + loss) take fewer layers when S does not divide L.

Tied embeddings (model.tie_embeddings, e.g. Llama-3.2-1B/3B) across stages, as Megatron-LM does it (Narayanan et al.
2021; megatron/core/distributed/finalize_model_grads.py, `_allreduce_word_embedding_grads`): stage 0 holds the
embedding, the last stage holds the output head as its own copy of the same matrix, initialised identically (both are
seeded by the name "tok_embeddings.weight", bench_model.weights). After backward each copy has only its own stage's
share of the shared weight's gradient; one all-reduce (sum) between the first and last pipeline rank of the same
(dp, cp, tp) coordinates makes both the full gradient, so both optimizer steps apply the same update and the copies stay
equal. Under TP both are Shard(0) over the vocabulary and under FSDP both are dim-0 shards over the same dp*cp mesh, so
the two ranks hold the same slice and the local shards are all-reduced directly."""

from __future__ import annotations

import copy
import inspect

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

from autotune.core.errors import SpecError
from bench_model.parallel.mesh import Meshes

_SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "interleaved_1f1b": ScheduleInterleaved1F1B}
_HAS_SCALE_GRADS = "scale_grads" in inspect.signature(Schedule1F1B.__init__).parameters


def layer_split(num_layers: int, num_stages: int) -> list[list[int]]:
    """Global layer indices of each stage."""
    if num_stages > num_layers:
        raise SpecError(f"plan.pp*vpp={num_stages} must be <= model.num_layers={num_layers}")
    counts = [num_layers // num_stages] * num_stages
    order = list(range(1, num_stages - 1)) + [0, num_stages - 1]
    for i in range(num_layers % num_stages):
        counts[order[i]] += 1
    out, start = [], 0
    for c in counts:
        out.append(list(range(start, start + c)))
        start += c
    return out


def stage_indices(pp: int, vpp: int, pp_rank: int) -> list[int]:
    return [pp_rank + k * pp for k in range(vpp)]


def build_stage_module(full: nn.Module, stage: int, num_stages: int, layers: list[int]) -> nn.Module:
    """A deep copy of the (meta) model holding only `layers`; embedding only on stage 0, norm + head only on the last
    (with tied embeddings the last stage's head weight is then its own parameter, no longer shared)."""
    part = copy.deepcopy(full)
    keep = {str(i) for i in layers}
    for key in list(part.layers.keys()):
        if key not in keep:
            del part.layers[key]
    if stage != 0:
        part.tok_embeddings = None
    if stage != num_stages - 1:
        part.norm, part.output = None, None
    return part


def tied_embedding_group(meshes: Meshes) -> dist.ProcessGroup | None:
    """The 2-rank group {first, last pipeline rank} of this rank's (dp, cp, tp) coordinates (Megatron's embedding
    group); None on middle pipeline ranks. Every rank must call it (it creates all the groups)."""
    ranks = meshes.world.mesh  # (pp, dp, cp, unit, tp) global ranks
    pairs = torch.stack([ranks[0], ranks[-1]], dim=-1).reshape(-1, 2).tolist()
    group, _ = dist.new_subgroups_by_enumeration(pairs)
    return group


@torch.no_grad()
def allreduce_tied_embedding_grads(parts: list[nn.Module], group: dist.ProcessGroup) -> None:
    """Sum the shared embedding/head gradient of the first and last stage (Megatron-LM finalize_model_grads.py,
    `_allreduce_word_embedding_grads`); call after the schedule's backward (grads already reduced over dp*cp and
    scaled by 1/n_microbatches on both stages) and before the optimizer step."""
    from torch.distributed.tensor import DTensor

    params = [
        m.weight
        for part in parts
        for m in (part.tok_embeddings, part.output)
        if m is not None and m.weight.grad is not None
    ]
    assert len(params) == 1, f"expected one tied embedding gradient on this rank, found {len(params)}"
    param = params[0]
    grad = param.grad
    if isinstance(grad, DTensor):
        if grad.placements != param.placements:  # DTensor's embedding backward leaves a Replicate grad under TP
            grad = param.grad = grad.redistribute(param.device_mesh, param.placements)  # a local slice, no comm
        local = grad.to_local()
    else:
        local = grad
    buf = local if local.is_contiguous() else local.contiguous()
    dist.all_reduce(buf, group=group)
    if buf is not local:
        local.copy_(buf)


def build_schedule(
    parts: list[nn.Module],
    stages: list[int],
    num_stages: int,
    meshes: Meshes,
    pp_schedule: str,
    n_microbatches: int,
    loss_fn,
    device: torch.device,
):
    pipe_stages = [
        PipelineStage(part, idx, num_stages, device, group=meshes.pp.get_group()) for part, idx in zip(parts, stages)
    ]
    cls = _SCHEDULES[pp_schedule]
    kwargs = {"scale_grads": True} if _HAS_SCALE_GRADS else {}
    if not _HAS_SCALE_GRADS:  # older torch sums micro-batch gradients: average in the loss instead
        base = loss_fn
        loss_fn = lambda out, tgt: base(out, tgt) / n_microbatches  # noqa: E731
    if cls is ScheduleInterleaved1F1B:
        return cls(pipe_stages, n_microbatches=n_microbatches, loss_fn=loss_fn, **kwargs)
    if len(pipe_stages) != 1:
        raise SpecError(
            f"plan.pp_schedule={pp_schedule!r} runs one stage per rank; vpp={len(pipe_stages)} needs interleaved_1f1b"
        )
    return cls(pipe_stages[0], n_microbatches=n_microbatches, loss_fn=loss_fn, **kwargs)


def losses_are_scaled() -> bool:
    """True when the per-micro-batch losses the schedule returns were divided by n_microbatches (torch < 2.6)."""
    return not _HAS_SCALE_GRADS

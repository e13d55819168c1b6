"""Pipeline schedule facts every memory profile shares: which layers a pipeline rank holds under bench_model's
split, and how many micro-batches' activations a rank keeps at its peak under each schedule."""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.plan_arrays import SCHEDULE_CODE


def layers_of_rank(num_layers: int, pp: Any, vpp: Any, rank: Any, embed: Any = False, loss: Any = False) -> np.ndarray:
    """Layers held by pipeline rank `rank` under bench_model's split (bench_model/parallel/pipeline.py): each of the
    S = pp*vpp stages gets floor(L/S); the L mod S extra layers go to stages 1..S-2 first, then stage 0, then S-1.
    Rank r holds stages r, r+pp, ..., r+(vpp-1)*pp. With Megatron's pipeline-split accounting (`embed`: plan.
    pp_split_embedding, `loss`: pp_split_loss; megatron/core/transformer/transformer_block.py get_num_layers_to_build)
    every stage gets (L + embed + loss)/S slots, the embedding taking one of stage 0's and the loss one of stage S-1's."""
    return sum(chunk_layers_of_rank(num_layers, pp, vpp, rank, embed, loss))


def chunk_layers_of_rank(
    num_layers: int, pp: Any, vpp: Any, rank: Any, embed: Any = False, loss: Any = False
) -> list[np.ndarray]:
    """`layers_of_rank` per model chunk: element k is the layers of stage rank + k*pp (0 where k >= vpp)."""
    pp, vpp, rank = np.asarray(pp), np.asarray(vpp), np.asarray(rank)
    e, lo = np.asarray(embed, dtype=np.int64), np.asarray(loss, dtype=np.int64)
    stages = pp * vpp
    base, extra = num_layers // stages, num_layers % stages
    slots = (num_layers + e + lo) // stages
    accounted = (e + lo) > 0
    shape = np.broadcast(pp, vpp, rank, e, lo).shape
    chunks = []
    for k in range(int(np.max(vpp, initial=1))):
        j = rank + k * pp
        middle = (j >= 1) & (j <= stages - 2) & (j <= extra)
        first = (j == 0) & (extra >= stages - 1) & (stages > 1)
        megatron = np.maximum(slots - e * (j == 0) - lo * (j == stages - 1), 0)  # even split: rule pp_split_divides
        layers = np.where(k < vpp, np.where(accounted, megatron, base + (middle | first)), 0)
        chunks.append(np.broadcast_to(layers, shape).astype(np.int64))
    return chunks


def interleaved_held(pp: Any, vpp: Any, rank: Any) -> Any:
    """Virtual micro-batches (chunk forwards) pipeline rank `rank` holds at its interleaved-1F1B peak, before the
    cap at m vpp: its warm-up (pp - rank - 1) 2 + (vpp - 1) pp and the first steady-state forward (Megatron-Core
    schedules.py `get_num_warmup_microbatches`; torch's Interleaved1F1B `warmup_steps`)."""
    return (pp - rank - 1) * 2 + (vpp - 1) * pp + 1


def interleaved_chunk_weight(chunks: list[Any], pp: Any, vpp: Any, m: Any, schedule: Any, rank: Any) -> np.ndarray:
    """The layer-micro-batches a rank holds at its interleaved-1F1B peak over what `inflight_microbatches` assumes
    (every chunk 1/vpp of the rank's layers): sum_c n_c L_c / (sum_c n_c x sum_c L_c / vpp). Megatron-Core's schedule
    (megatron/core/pipeline_parallel/schedules.py @ core_v0.16.1 `forward_backward_pipelining_with_interleaving`:
    num_warmup_microbatches (pp - rank - 1) x 2 + (vpp - 1) x pp, at most m x vpp; virtual micro-batch v runs model
    chunk (v mod pp vpp) div pp, groups of pp micro-batches per chunk; backwards start from the last chunk) holds the
    first W + 1 virtual micro-batches at its peak; torch's Interleaved1F1B orders its steps the same way. With the
    embedding / loss accounted in the split (or a layout) the chunks differ: rank 0's first chunk, which the warm-up
    runs most often, holds a layer fewer. 1 for every other schedule and for equal chunks."""
    pp, vpp, m, r = (np.asarray(x, dtype=np.int64) for x in (pp, vpp, m, rank))
    layers = np.stack([np.asarray(c, dtype=np.float64) for c in np.broadcast_arrays(*chunks)], axis=-1)
    shape = np.broadcast(pp, vpp, m, r, np.asarray(schedule), layers[..., 0]).shape
    pp, vpp, m, r, sch = (np.broadcast_to(x, shape) for x in (pp, vpp, m, r, np.asarray(schedule)))
    layers = np.broadcast_to(layers, (*shape, layers.shape[-1]))
    held = np.minimum(interleaved_held(pp, vpp, r), m * vpp)
    out = np.ones(shape)
    inter = (sch == SCHEDULE_CODE["interleaved_1f1b"]) & (vpp > 1)
    for key in set(zip(pp[inter].tolist(), vpp[inter].tolist(), held[inter].tolist())):
        p, v, w = key
        counts = np.bincount((np.arange(w) % (p * v)) // p, minlength=layers.shape[-1]).astype(np.float64)
        at = inter & (pp == p) & (vpp == v) & (held == w)
        total = layers[at].sum(axis=-1)
        real = (layers[at] * counts).sum(axis=-1)
        out[at] = np.where(total > 0, real / np.maximum(w * total / v, 1e-12), 1.0)
    return out


def layers_on_rank(num_layers: int, pp: Any, vpp: Any, embed: Any = False, loss: Any = False) -> np.ndarray:
    """The most layers any pipeline rank holds (for compute balance)."""
    ranks = (0, np.minimum(1, np.asarray(pp) - 1), np.asarray(pp) - 1)
    return np.maximum.reduce([layers_of_rank(num_layers, pp, vpp, r, embed, loss) for r in ranks])


def bubble_microbatches(pp: Any, vpp: Any) -> np.ndarray:
    """Pipeline bubble of a (interleaved) 1F1B step in units of one micro-batch's stage time: (pp - 1)/vpp
    (Narayanan et al. 2021 Eq. 1 and Sec 2.2.2: bubble fraction (p-1)/(m v) of the m stage times)."""
    return (np.asarray(pp, dtype=np.float64) - 1.0) / np.asarray(vpp, dtype=np.float64)


def inflight_microbatches(pp: Any, vpp: Any, m: Any, schedule: Any, rank: Any = 0) -> np.ndarray:
    """Micro-batches whose activations pipeline rank `rank` holds at its peak, in units of all its layers.
    1F1B (PipeDream-Flush): pp - rank warm-up forwards. Interleaved 1F1B (Megatron-LM's schedule, which torch's
    Interleaved1F1B follows): (pp - rank - 1)*2 + (vpp - 1)*pp + 1 chunk forwards of 1/vpp of the rank's layers; for
    rank 0 that is pp*(1 + (pp-1)/(pp*vpp)), Korthikanti et al. 2022's note to Eq. 5. GPipe: all m."""
    pp, vpp, m, sch, r = (np.asarray(x, dtype=np.float64) for x in (pp, vpp, m, schedule, rank))
    inter = np.where(sch == SCHEDULE_CODE["interleaved_1f1b"], interleaved_held(pp, vpp, r) / vpp, pp - r)
    n = np.where(sch == SCHEDULE_CODE["gpipe"], m, np.minimum(inter, m))
    return np.where(pp == 1, 1.0, n)


def accumulated_grad_share(pp: Any, vpp: Any, m: Any, schedule: Any, layers: Any) -> np.ndarray:
    """Share of a pipeline rank's unsharded, accumulated gradients (FrameworkProfile.pipeline_held "grads": FSDP2
    under torch.distributed.pipelining) that are alive at its peak. Each virtual stage's FSDP2 unit allocates its
    accumulator at that stage's first micro-batch backward (FSDPParam.to_accumulated_grad_if_needed) and
    reduce-scatters it, resharding the stage, after that stage's last one (torch/distributed/pipelining/stage.py
    `backward_maybe_with_nosync(..., last_backward)` in the torch of Dec 2024; 2.13's `_PipelineScheduleRuntime` runs
    the same as the REDUCE_GRAD action after each stage's last backward). Under Interleaved1F1B with one round of
    micro-batches (pp <= m < 2 pp: torch's number_of_rounds = m // pp) a rank runs its chunks' backwards one chunk
    after the other, last chunk first, so at its peak (the last chunk's first backward, every chunk's activations
    still in flight) only that chunk's accumulator exists: the largest chunk's layers, ceil(L / vpp) of the rank's
    L. With two or more rounds every chunk has accumulated before the last round (1), as under 1F1B and GPipe (one
    stage per rank, 1). Measured on CPU with torch 2.13, pp 2 x dp 2, two stages per rank, FSDP2 and full recompute
    (benchmarks/pp_grad_release.py, docs/memory_model.md "Pipeline engine": at m = pp the peak holds the running
    chunk's accumulator alone; at m = 2 pp all)."""
    pp, vpp, m, layers = (np.asarray(x, dtype=np.float64) for x in (pp, vpp, m, layers))
    one_round = (np.asarray(schedule) == SCHEDULE_CODE["interleaved_1f1b"]) & (vpp > 1) & (m < 2 * pp)
    largest = np.ceil(layers / np.maximum(vpp, 1.0)) / np.maximum(layers, 1.0)
    return np.where(one_round, np.minimum(largest, 1.0), 1.0)

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
    pp, vpp, rank = np.asarray(pp), np.asarray(vpp), np.asarray(rank)
    e, lo = np.asarray(embed, dtype=np.int64), np.asarray(loss, dtype=np.int64)
    stages = pp * vpp
    base, extra = num_layers // stages, num_layers % stages
    slots = (num_layers + e + lo) // stages
    accounted = (e + lo) > 0
    total = np.zeros(np.broadcast(pp, vpp, rank, e, lo).shape, dtype=np.int64)
    for k in range(int(np.max(vpp, initial=1))):
        j = rank + k * pp
        middle = (j >= 1) & (j <= stages - 2) & (j <= extra)
        first = (j == 0) & (extra >= stages - 1) & (stages > 1)
        megatron = np.maximum(slots - e * (j == 0) - lo * (j == stages - 1), 0)  # even split: rule pp_split_divides
        total = total + np.where(k < vpp, np.where(accounted, megatron, base + (middle | first)), 0)
    return total


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
    inter = np.where(sch == SCHEDULE_CODE["interleaved_1f1b"], ((pp - r - 1) * 2 + (vpp - 1) * pp + 1) / vpp, pp - r)
    n = np.where(sch == SCHEDULE_CODE["gpipe"], m, np.minimum(inter, m))
    return np.where(pp == 1, 1.0, n)

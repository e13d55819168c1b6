"""nanotron's pipeline split: which pipeline rank holds which block (docs/frameworks.md "nanotron").

nanotron does not split the decoder layers evenly. `build_model` (huggingface/nanotron branch bench_cluster @ a27e8fe8,
src/nanotron/models/base.py:215-237) walks the model's PipelineBlocks in order (token embedding, the L decoder layers,
final norm, lm_head, cast_to_fp32, loss) with the cumulative cost of `get_block_compute_costs` (models/llama.py:812-823):
a decoder layer costs 4 n_heads d_qkv h + 3 f h (d_qkv = h // n_heads), lm_head V h, every other block 0. Threshold r is
total (r + 1) / pp; a block goes to the current rank, and the rank moves on once the block's cumulative cost passes the
current threshold. So rank 0 takes the ceiling of its share, the lm_head's cost takes layers off the last ranks, and at
a large pp the zero-cost blocks after the lm_head can each land one rank further on, or ranks are left with no block.
bench_cluster copies the same walk to skip layouts that leave a rank empty (bench_cluster/create_configs.py @ f55b5e5
`is_enough_layers_for_pp`). Example, bench_cluster's llama-1B (h 2048, f 4096, 24 layers, 32 heads, V 50,257) at pp 4:
7, 7, 6, 4 decoder layers where an even split gives 6 each.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec


@lru_cache(maxsize=256)
def _walk(num_layers: int, layer_cost: int, head_cost: int, pp: int) -> tuple[tuple[int, ...], int]:
    """Decoder layers per rank and the number of ranks left without any block, for one pipeline degree."""
    costs = [0] + [layer_cost] * num_layers + [0, head_cost, 0, 0]  # embedding, layers, norm, lm_head, cast, loss
    cumulative = np.cumsum(costs)
    thresholds = [cumulative[-1] * ((r + 1) / pp) for r in range(pp)]  # as models/base.py computes them
    layers, held, rank = [0] * pp, [False] * pp, 0
    for i, cost in enumerate(cumulative):
        held[rank] = True
        layers[rank] += 1 if 1 <= i <= num_layers else 0
        if cost > thresholds[rank]:
            rank = min(rank + 1, pp - 1)  # nanotron asserts rank < pp; the last threshold is the total, never passed
    return tuple(layers), pp - sum(held)


def _costs(model: ModelSpec) -> tuple[int, int]:
    d_qkv = model.hidden_size // model.num_heads
    layer = 4 * model.num_heads * d_qkv * model.hidden_size + 3 * model.ffn_hidden_size * model.hidden_size
    return layer, model.vocab_size * model.hidden_size


def _per_pp(model: ModelSpec, pp: Any, value) -> np.ndarray:
    """`value(walk, mask)` filled in for every pipeline degree in `pp` (few distinct ones), the walk computed once each."""
    pp_a = np.asarray(pp, dtype=np.int64)
    out = np.zeros(pp_a.shape, dtype=np.int64)
    layer, head = _costs(model)
    for p in np.unique(pp_a).tolist():
        mask = pp_a == p
        out[mask] = value(_walk(model.num_layers, layer, head, int(p)), mask)
    return out


def nanotron_layers_of_rank(model: ModelSpec, pp: Any, rank: Any) -> np.ndarray:
    """Decoder layers nanotron's split gives pipeline rank `rank` of `pp` (module docstring); vectorised."""
    pp_a, rank_a = np.broadcast_arrays(np.asarray(pp, dtype=np.int64), np.asarray(rank, dtype=np.int64))
    return _per_pp(model, pp_a, lambda walk, mask: np.asarray(walk[0])[np.clip(rank_a[mask], 0, len(walk[0]) - 1)])


def nanotron_empty_ranks(model: ModelSpec, pp: Any) -> np.ndarray:
    """Pipeline ranks nanotron's split leaves without any block (module docstring); vectorised over `pp`."""
    return _per_pp(model, pp, lambda walk, mask: walk[1])

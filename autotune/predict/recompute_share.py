"""The share of a pipeline rank's transformer layers that full activation recompute re-runs (plan.recompute and
plan.recompute_layers), for the memory and step-time models.

Megatron-Core's block method (`--recompute-granularity full --recompute-method block --recompute-num-layers N`,
TransformerBlock._checkpointed_forward, megatron/core/transformer/transformer_block.py @ core_r0.16.1) checkpoints
layers 0..N-1 of each model chunk (a virtual pipeline stage's TransformerBlock, num_layers_per_pipeline_rank =
len(self.layers)) and runs the chunk's other layers without recompute: those keep every activation and run no second
forward. With vpp chunks per rank, min(N vpp, L_rank) of the rank's L_rank layers are recomputed (N <= the chunk's
layers: rule recompute_layers_within_chunk). recompute_layers = 0 is every layer (`--recompute-method uniform
--recompute-num-layers 1`). bench_model does the same per stage chunk (bench_model/parallel/recompute.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.plan_arrays import RECOMPUTE_CODE


def full_recompute_share(arr: dict[str, np.ndarray], layers: Any) -> np.ndarray:
    """Share in [0, 1] of `layers` (a pipeline rank's layer count) that re-run their forward in backward: 0 without
    full recompute, 1 with it on every layer, min(N vpp, layers) / layers under plan.recompute_layers = N."""
    full = np.asarray(arr["recompute"]) == RECOMPUTE_CODE["full"]
    n = np.asarray(arr["recompute_layers"], dtype=np.float64) * np.asarray(arr["vpp"], dtype=np.float64)
    count = np.maximum(np.asarray(layers, dtype=np.float64), 1.0)
    part = np.where(n > 0, np.minimum(n, count) / count, 1.0)
    return np.where(full, part, 0.0)


def partial(arr: dict[str, np.ndarray]) -> np.ndarray:
    """Where plan.recompute_layers leaves some layers of a chunk without recompute."""
    return (np.asarray(arr["recompute_layers"]) > 0) & (np.asarray(arr["recompute"]) == RECOMPUTE_CODE["full"])


def kept_recompute(arr: dict[str, np.ndarray]) -> np.ndarray:
    """The recompute codes of the layers partial recompute leaves alone (none), elsewhere the plan's own."""
    return np.where(partial(arr), RECOMPUTE_CODE["none"], np.asarray(arr["recompute"]))


def module_on(arr: dict[str, np.ndarray], field: str, recompute: Any = None) -> np.ndarray:
    """Where a Megatron recompute module (plan.<field>: mla_recompute, norm_recompute, mlp_recompute) applies: the field
    set and the recompute codes `recompute` (default: the plan's) selective, as --recompute-modules needs."""
    codes = np.asarray(arr["recompute"] if recompute is None else recompute)
    return np.asarray(arr[field], dtype=bool) & (codes == RECOMPUTE_CODE["selective"])

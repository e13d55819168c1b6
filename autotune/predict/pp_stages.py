"""Per-rank counts under Megatron's pipeline layout (autotune/core/pp_layout.py) and the model FLOPs its
multi-token-prediction modules add (train.mtp_num_layers): what rank_params.rank_params and perf read."""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.pp_layout import Stage, rank_counts
from autotune.core.train import TrainSpec


def layout_counts(model: ModelSpec, layout: tuple[Stage, ...], pp: Any, vpp: Any, rank: Any, default: tuple) -> tuple:
    """(decoder layers, MoE decoder layers, MTP modules) of pipeline rank `rank` under a Megatron layout, where the
    layout has pp*vpp stages; `default` elsewhere."""
    pp, vpp, rank = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (pp, vpp, rank)))
    out = [np.broadcast_to(np.asarray(d, dtype=np.int64), pp.shape).copy() for d in default]
    for p, r in set(zip(pp[pp * vpp == len(layout)].tolist(), rank[pp * vpp == len(layout)].tolist())):
        ids, mtp = rank_counts(layout, p, r)
        at = (pp == p) & (rank == r) & (pp * vpp == len(layout))
        out[0][at], out[1][at], out[2][at] = len(ids), sum(model.is_moe_layer(i) for i in ids), mtp
    return tuple(out)


def train_flops_per_token(model: ModelSpec, train: TrainSpec) -> float:
    """Model FLOPs per token of the job: the model's (ModelSpec.flops_per_token) plus, per MTP module
    (train.mtp_num_layers), one more layer of the decoder's last kind, its eh_proj and norms and one more pass of the
    output head, as Megatron-LM counts them (megatron/training/training.py @ core_v0.16.1 num_floating_point_operations:
    the MTP layers added to the MoE / dense layer counts, 6 (3h + 2h^2) per module, the logits x (mtp + 1))."""
    n, h = train.mtp_num_layers, model.hidden_size
    last = model.num_layers - 1
    layer = model._attention_matmul_params() + model.mlp_params(last, active=True)
    attn = model.attention_flops_per_token(train.seq_len) / model.num_layers
    extra = 6.0 * (layer + 2 * h * h + 3 * h + model.vocab_size * h) + attn
    return model.flops_per_token(train.seq_len) + n * extra


def layout_chunks(layout: tuple[Stage, ...], pp: Any, vpp: Any, rank: Any, default: list) -> list[np.ndarray]:
    """The decoder layers and MTP modules of each model chunk (stage rank + k pp) of pipeline rank `rank` under a
    Megatron layout, where the layout has pp*vpp stages; `default` elsewhere."""
    pp, vpp, rank = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (pp, vpp, rank)))
    fits = pp * vpp == len(layout)
    sizes = np.array([s.decoders + s.mtp for s in layout] + [0], dtype=np.int64)  # a stage past the last: 0
    return [
        np.where(
            fits, np.where(k < vpp, sizes[np.minimum(rank + k * pp, len(layout))], 0), np.broadcast_to(d, pp.shape)
        )
        for k, d in enumerate(default)
    ]

"""Parameters a pipeline rank holds (`rank_params`: the worst-rank candidates' layers, root units, experts), the
ZeRO/FSDP sharding group (`shard_group`), the stored weights' quantized delta and the largest local tensor: the
parameter counts autotune/predict/memory.py and perf.py build on (split out of memory.py; notation as there)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.pp_layout import Stage
from autotune.predict import moe
from autotune.predict.pp_stages import layout_chunks, layout_counts
from autotune.predict.schedule import chunk_layers_of_rank, layers_of_rank

POSITIONS = ("first", "second", "last")  # pipeline ranks 0, 1 and pp-1: the candidates for the worst rank


def rank_params(
    model: ModelSpec,
    tp: Any,
    pp: Any,
    vpp: Any,
    ep: Any = 1,
    etp: Any = 1,
    moe_tp_replicated: float = 0.0,
    pp_split: tuple[Any, Any] = (False, False),
    layers_fn: Callable[..., Any] | None = None,
    mtp_num_layers: int = 0,
    layout: tuple[Stage, ...] | None = None,
) -> dict[str, Any]:
    """Parameters of pipeline ranks 0, 1 and pp-1 (`first`, `second`, `last`), the part of each that is FSDP's root
    unit (embedding, final norm, head: `root_<pos>`), their layer counts (`layers_<pos>`) and one layer's local size.
    MoE models: `<pos>` holds the non-expert parameters (split by tp as a dense block's are; a layer's router and
    shared expert averaged into its dense part) and `expert_<pos>` the routed experts, split by ep*etp
    (autotune/predict/moe.py); `layer` is the largest local layer, dense part plus one MoE layer's expert share.
    `moe_tp_replicated`: parameters of each MoE layer that the framework keeps whole on every tp rank (bench_model:
    router and shared expert, Replicate DTensors) instead of splitting them by tp. `pp_split`: plan.pp_split_embedding
    and pp_split_loss (Megatron's embedding / loss pipeline-split accounting, `schedule.layers_of_rank`). `layers_fn`:
    the framework's own split (FrameworkProfile.pipeline_layers; default `schedule.layers_of_rank`).
    `mtp_num_layers` (train.mtp_num_layers): Megatron's MTP modules, each counted as one more layer of the decoder's last
    kind (`layers_<pos>`, `moe_layers_<pos>`) plus its eh_proj (2h x h / tp) and three RMSNorms, and the embedding copy
    the stage holding them builds (gpt_model.py @ core_v0.16.1: `if self.pre_process or self.mtp_process`), on the
    last pipeline rank (`mtp_<pos>`: the modules a rank holds). `layout` (train.pp_layout parsed,
    autotune/core/pp_layout.py): every rank's decoders and MTP modules as the layout places them where its stage count
    is pp*vpp (elsewhere the split above: rule pp_layout_stages refuses those layouts)."""
    tp, pp, vpp = (np.asarray(x, dtype=np.int64) for x in (tp, pp, vpp))
    layers_split = layers_fn or (lambda m, *args: layers_of_rank(m.num_layers, *args))
    experts = model.num_moe_layers * moe.expert_layer_params(model) if model.is_moe else 0
    matmul = model.matmul_params() - model.vocab_size * model.hidden_size - experts  # all blocks' dense matrices
    per_layer_matmul = matmul // model.num_layers if not model.is_moe else matmul / model.num_layers
    blocks = model.num_params() - model.embedding_params() - model.head_params()  # + the final norm
    final_norm = model.hidden_size if model.block == "llama" else 2 * model.hidden_size
    per_layer = model.layer_params() if not model.is_moe else (blocks - final_norm - experts) / model.num_layers
    per_layer_repl = per_layer - per_layer_matmul  # norms: replicated across TP
    layer_local = per_layer_matmul / tp + per_layer_repl
    vh_local = model.vocab_size * model.hidden_size / tp  # vocab-parallel embedding / head
    if not model.is_moe:
        final_norm = (
            model.num_params()
            - model.embedding_params()
            - model.head_params()
            - model.num_layers * model.layer_params()
        )
    head = np.where(pp > 1, vh_local, 0.0) if model.tie_embeddings else vh_local  # tied: a copy on the last stage
    single = pp == 1
    roots = {
        "first": vh_local + np.where(single, head + final_norm, 0.0),
        "second": np.where(pp == 2, head + final_norm, np.where(single, vh_local + head + final_norm, 0.0)),
        "last": np.where(single, vh_local, 0.0) + head + final_norm,
    }
    ranks = {"first": 0, "second": np.minimum(1, pp - 1), "last": pp - 1}
    split = np.asarray(ep, dtype=np.float64) * np.asarray(etp, dtype=np.float64)
    replicated = moe_tp_replicated * (1.0 - 1.0 / tp)  # what a tp rank holds beyond its 1/tp share
    out: dict[str, Any] = {
        "layer": layer_local + (moe.expert_layer_params(model) / split + replicated if model.is_moe else 0.0),
        "layer_matmul": per_layer_matmul / tp,  # one layer's local dense linear weights (no norms, no routed experts)
        "layer_experts": moe.expert_layer_params(model) / split if model.is_moe else 0.0,  # of "layer": routed experts
    }
    mtp_moe = int(model.is_moe_layer(model.num_layers - 1))  # an MTP module's layer is of the decoder's last kind
    interleaved = int(np.max(vpp, initial=1)) > 1
    for pos in POSITIONS:
        layers = layers_split(model, pp, vpp, ranks[pos], *pp_split)
        moe_layers = moe.moe_layers_of_rank(model, pp, vpp, ranks[pos], *pp_split) if model.is_moe else 0
        mtp = np.where(ranks[pos] == pp - 1, mtp_num_layers, 0)  # Megatron's default: the MTP block on the last stage
        # the layers of each model chunk (interleaved schedules: schedule.interleaved_chunk_weight), MTP in the last
        chunks = chunk_layers_of_rank(model.num_layers, pp, vpp, ranks[pos], *pp_split) if interleaved else [layers]
        chunks = [ch + np.where(vpp - 1 == k, mtp, 0) for k, ch in enumerate(chunks)]
        if layout is not None:
            layers, moe_layers, mtp = layout_counts(model, layout, pp, vpp, ranks[pos], (layers, moe_layers, mtp))
            chunks = layout_chunks(layout, pp, vpp, ranks[pos], chunks)
        out[f"chunks_{pos}"] = chunks
        layers, moe_layers = layers + mtp, moe_layers + mtp * mtp_moe
        # eh_proj (column-parallel 2h -> h) and enorm, hnorm, final_layernorm; the embedding copy off rank 0 (a tied
        # model's last stage holds it already as its head)
        mtp_root = mtp * (2.0 * model.hidden_size**2 / tp + 3 * model.hidden_size)
        tied_here = model.tie_embeddings & (ranks[pos] == pp - 1)
        root = roots[pos] + mtp_root + np.where((mtp > 0) & (ranks[pos] != 0) & ~tied_here, vh_local, 0.0)
        out[pos], out[f"root_{pos}"], out[f"layers_{pos}"] = layers * layer_local + root, root, layers
        out[f"rank_{pos}"], out[f"mtp_{pos}"] = ranks[pos], mtp
        out[f"moe_layers_{pos}"] = moe_layers
        out[pos] = out[pos] + out[f"moe_layers_{pos}"] * replicated
        out[f"expert_{pos}"] = out[f"moe_layers_{pos}"] * (
            moe.expert_layer_params(model) / split if model.is_moe else 0
        )
    return out


def shard_group(arr: dict[str, np.ndarray]) -> np.ndarray:
    """Ranks the ZeRO/FSDP states are sharded over: dp*cp, or dp_shard*cp with HSDP (FSDP2 on a 2-D (replicate,
    shard) mesh; Zhao et al. 2023, "PyTorch FSDP", Sec 3.2.2: each of the dp/dp_shard replicas holds the full model
    state, sharded over its own F = dp_shard*cp ranks). dp_shard = 0 means all of dp."""
    dp = np.asarray(arr["dp"])
    ds = np.asarray(arr["dp_shard"]) if "dp_shard" in arr else np.zeros_like(dp)
    return np.where(ds > 0, ds, dp) * np.asarray(arr["cp"])


def quantized_weight_delta(arr: dict[str, np.ndarray], psi: dict[str, Any], pos: str, dq: Any) -> np.ndarray:
    """Bytes the rank's stored block-linear weights (its layers' dense linears and routed experts, not embedding, head or
    norms) change by when the framework keeps them quantized: `dq` = FrameworkProfile.stored_weight_bytes - c per
    element (megatron's train.fp8_param_gather; 0 elsewhere), sharded as the params are (dense over dp*cp, experts
    over the expert-data-parallel group, at ZeRO-3 / Megatron-FSDP optim_grads_params)."""
    dq = np.asarray(dq, dtype=np.float64)
    if not np.any(dq != 0):
        return np.zeros_like(dq)
    z3 = np.asarray(arr["zero_stage"]) >= 3
    dense = psi[f"layers_{pos}"] * psi["layer_matmul"] / np.where(z3, shard_group(arr), 1.0)
    pp = arr["pp"]
    edp = moe.expert_shard_group(arr["dp"] * arr["cp"] * arr["tp"] * pp, pp, arr["ep"], arr["etp"])
    experts = np.asarray(psi[f"expert_{pos}"], dtype=np.float64) / np.where(z3, edp, 1.0)
    return (dense + experts) * dq


def largest_local_param(model: ModelSpec, tp: Any, ep: Any, etp: Any) -> np.ndarray:
    """Elements of the largest parameter tensor a rank holds (an upper bound over pipeline ranks): the vocab-parallel
    embedding or head (V h / t), a block matrix (max(f, q, k) h / t), or an MoE layer's grouped expert weight
    (E/ep experts x F/etp x h)."""
    t = np.asarray(tp, dtype=np.float64)
    h = model.hidden_size
    out = max(model.vocab_size, model.ffn_hidden_size, model.q_dim, model.kv_dim) * h / t
    if model.is_moe:
        experts = model.num_experts / np.asarray(ep, dtype=np.float64)
        out = np.maximum(out, experts * model.moe_ffn_hidden_size * h / np.asarray(etp, dtype=np.float64))
    return out

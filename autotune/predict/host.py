"""The host side of a training step: the CPU time that issues the kernels (Python, the PyTorch dispatcher, the CUDA
launch), and what it costs the step when the device cannot run ahead of it (docs/perf_model_moe.md "Host time").

Per micro-batch on one rank, with h = `cluster.host_op_s` (host seconds per dispatched op):
  H_f, H_b   host seconds of the forward and the backward: the stage's layers x the ops each layer dispatches
             (bench_model's blocks counted op by op: benchmarks/host_ops.py) x h; full recompute re-runs the forward
             ops in the backward;
  D_f, D_b   the device seconds of the same passes (the stage's compute, TP/CP/EP communication).
The CUDA stream runs ahead of the host (kernel launches are asynchronous), so without a device-to-host sync the
micro-batch takes max(H_f + H_b, D_f + D_b). A sync inside each MoE layer's forward (the dispatcher reading the
tokens per expert on the host) stops the host from running ahead across it: the forward costs max(H_f, D_f) plus,
per MoE layer, the ops the host issues after the sync before the device has work again (the device drained its
queue at the sync and idles: SYNC_TAIL_OPS x h), then the backward (no sync: the all-to-all's backward reuses the
host-side splits) max(H_b, D_b). `host_extra_s` returns that time minus D_f + D_b: what the host adds to the step.

CUDA graphs (train.cuda_graphs, Megatron-Core's cuda_graph_impl / cuda_graph_scope) replay a captured scope with one
launch: "moe" captures the router and the dispatcher's preprocess (scopes moe_router, moe_preprocess), "attn_moe"
the attention as well (attn), "full" the whole iteration (cuda_graph_impl=full_iteration: no per-op host time and,
since a replay cannot read device values on the host, no sync: the recipes pad the experts to static shapes,
Megatron-Bridge perf_recipes/qwen/common.py `_enable_hybridep_full_iteration_mxfp8`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import FP8_CODE
from autotune.core.types import CUDA_GRAPHS as CUDA_GRAPHS  # the train.cuda_graphs values
from autotune.core.types import ClusterSpec, TrainSpec
from autotune.predict import recompute_share
from autotune.predict.frameworks import get_profile

# Ops one bench_model block dispatches per micro-batch (benchmarks/host_ops.py, torch 2.13, toy shapes: the sequence
# does not depend on the shapes): forward / backward, and the forward ops inside each CUDA-graph scope. The same
# counts stand for Megatron-Core's blocks (the same op sequence: norm, QKV, RoPE, attention, projection, router,
# top-k, token counts, permute, grouped GEMMs, unpermute, combine); its heavier Python per op (Transformer Engine
# modules) is in the fitted per-op cost, not in the count (not counted separately: no Megatron install here).
DENSE_OPS = (81, 134)
MOE_OPS = (115, 179)  # the whole MoE layer: attention, router, aux loss, dispatch, experts, combine
SCOPE_FWD_OPS = {"attn": 57, "moe_router": 22, "moe_preprocess": 2}
# ops after the sync before the first grouped GEMM (bench_model/moe.py: expert weight casts x3, torch.tensor(counts)
# and its copy, cumsum, int32 cast); Megatron's after `before_ep_alltoall`: the all-to-all, sort_chunks_by_idxs and
# the grouped MLP's input preparation, the same order of ops
SYNC_TAIL_OPS = 7
# extra ops per block when its linears run torchao's Float8Linear (benchmarks/host_ops.py "fp8": the dynamic casts'
# amax, scale and cast ops and torch._scaled_mm, forward / backward; the dense block's 7 linears, the MoE block's 4
# attention linears and the router gate): frameworks that cast with torchao (FrameworkProfile.fp8_casts). Transformer
# Engine's fused cast-transposes (megatron) and torchao's MXFP8 path are not counted.
TORCHAO_FP8_EXTRA_OPS = {
    "tensorwise": {False: (140, 287), True: (80, 164)},
    "rowwise": {False: (182, 371), True: (104, 212)},
}
# Under torch.compile (FrameworkProfile.compiled_dispatch and plan.compile) a block is Inductor graphs: the host runs
# the generated code's kernel launches (fused pointwise / reduction kernels, extern GEMMs, SDPA), one entry per graph
# (guards, AOTAutograd's runtime wrapper) and, at each graph break, the op that broke it eagerly. Counted in the
# generated code of bench_model's blocks compiled on CPU (benchmarks/host_ops.py, stored in
# benchmarks/data/host_ops_result.json; bf16; the MoE block at one expert so the CPU fallback's per-expert loop
# stands for one grouped GEMM, as on CUDA): dense 15 / 23 kernels in one graph; MoE 25 / 31 kernels in 7 forward
# graphs (6 breaks: bincount, the counts' tolist) and 5 backward graphs. CPU Inductor's fusion stands for CUDA's
# Triton fusion (the same scheduler; not counted on a GPU).
COMPILED_DENSE_OPS = (15 + 1, 23 + 1)
COMPILED_MOE_OPS = (25 + 7 + 6, 31 + 5)
# torchao's Float8Linear casts under compile: fused into the neighbouring kernels; extra kernels per block, counted
# the same way
TORCHAO_FP8_EXTRA_OPS_COMPILED = {
    "tensorwise": {False: (2, 5), True: (1, 4)},
    "rowwise": {False: (2, 7), True: (1, 3)},
}
GRAPH_SCOPES = {
    "none": (),
    "moe": ("moe_router", "moe_preprocess"),
    "attn_moe": ("attn", "moe_router", "moe_preprocess"),
}


def layer_host_ops(moe: bool, cuda_graphs: str, compiled: bool = False) -> tuple[float, float]:
    """(forward, backward) ops one layer leaves to the host per micro-batch under `cuda_graphs`: a captured scope
    costs one graph launch per pass instead of its ops (its backward ops taken in the forward's proportion, as
    Transformer Engine captures each scope's forward and backward graphs; Megatron-Core cuda_graph_scope). A
    `compiled` layer (torch.compile) issues its Inductor graphs' launches (COMPILED_DENSE_OPS / COMPILED_MOE_OPS)."""
    if cuda_graphs == "full":
        return 0.0, 0.0
    if compiled:
        return COMPILED_MOE_OPS if moe else COMPILED_DENSE_OPS
    fwd, bwd = MOE_OPS if moe else DENSE_OPS
    scopes = [s for s in GRAPH_SCOPES[cuda_graphs] if moe or s == "attn"]
    captured = sum(SCOPE_FWD_OPS[s] for s in scopes)
    launches = float(len(scopes))
    return fwd - captured + launches, bwd * (1.0 - captured / fwd) + launches


def fp8_extra_ops(fp8: Any, casts: str, compiled: Any = False) -> dict[bool, tuple[np.ndarray, np.ndarray]]:
    """{moe layer?: (forward, backward) extra ops per layer} for the candidates' plan.fp8 codes under a framework
    casting with `casts` ("torchao": TORCHAO_FP8_EXTRA_OPS, TORCHAO_FP8_EXTRA_OPS_COMPILED where `compiled`;
    anything else: none counted)."""
    code = np.asarray(fp8)
    comp = np.broadcast_to(np.asarray(compiled, dtype=bool), code.shape)
    out = {}
    for moe in (False, True):
        f, b = np.zeros(code.shape), np.zeros(code.shape)
        if casts == "torchao":
            for recipe, extra in TORCHAO_FP8_EXTRA_OPS.items():
                cf, cb = TORCHAO_FP8_EXTRA_OPS_COMPILED[recipe][moe]
                f = np.where(code == FP8_CODE[recipe], np.where(comp, cf, extra[moe][0]), f)
                b = np.where(code == FP8_CODE[recipe], np.where(comp, cb, extra[moe][1]), b)
        out[moe] = (f, b)
    return out


def stage_host_s(
    layers: Any,
    moe_layers: Any,
    full_recompute: Any,
    cuda_graphs: str,
    op_s: float,
    extra: dict | None = None,
    compiled: Any = False,
) -> tuple:
    """(H_f, H_b) host seconds per micro-batch of a stage of `layers` layers, `moe_layers` of them MoE; `extra`:
    fp8_extra_ops (none by default); `compiled`: the candidates whose blocks run as torch.compile graphs."""
    layers, moe_layers = np.asarray(layers, dtype=np.float64), np.asarray(moe_layers, dtype=np.float64)
    comp = np.asarray(compiled, dtype=bool)
    (df, db), (mf, mb) = (
        tuple(
            np.where(comp, c, e)
            for c, e in zip(layer_host_ops(moe, cuda_graphs, True), layer_host_ops(moe, cuda_graphs))
        )
        for moe in (False, True)
    )
    if extra is not None and cuda_graphs != "full":
        (xdf, xdb), (xmf, xmb) = extra[False], extra[True]
        df, db, mf, mb = df + xdf, db + xdb, mf + xmf, mb + xmb
    fwd = (layers - moe_layers) * df + moe_layers * mf
    bwd = (layers - moe_layers) * db + moe_layers * mb + np.asarray(full_recompute, dtype=np.float64) * fwd
    return fwd * op_s, bwd * op_s


def host_extra_s(h_f: Any, h_b: Any, d_f: Any, d_b: Any, syncs: Any, moe_layers: Any, op_s: float) -> np.ndarray:
    """Seconds the host adds to one micro-batch beyond its device time D_f + D_b (module doc): without a sync
    max(H_f + H_b, D_f + D_b); with one per MoE layer forward max(H_f, D_f) + moe_layers x SYNC_TAIL_OPS x h +
    max(H_b, D_b)."""
    h_f, h_b, d_f, d_b = (np.asarray(x, dtype=np.float64) for x in (h_f, h_b, d_f, d_b))
    tail = np.asarray(moe_layers, dtype=np.float64) * SYNC_TAIL_OPS * op_s
    free = np.maximum(h_f + h_b, d_f + d_b)
    synced = np.maximum(h_f, d_f) + tail + np.maximum(h_b, d_b)
    return np.where(np.asarray(syncs, dtype=bool) & (tail > 0), synced, free) - (d_f + d_b)


def host_step_s(
    arr: dict[str, np.ndarray],
    model: ModelSpec,
    train: TrainSpec,
    cluster: ClusterSpec,
    lt: dict[str, np.ndarray],
    stage: dict[str, np.ndarray],
) -> np.ndarray:
    """Seconds per micro-batch the host adds to the busiest stage's device time (`lt`: perf.perf_arrays' layer terms,
    `stage`: its busiest stage): the stage's dispatched ops at cluster.host_op_s against its forward and backward
    device seconds, with or without the MoE dispatcher's device-to-host sync (FrameworkProfile.moe_host_sync); 0 when
    the preset states no host_op_s."""
    if cluster.host_op_s is None:
        return np.zeros(np.shape(arr["tp"]), dtype=np.float64)
    full = recompute_share.full_recompute_share(arr, stage["layers"])  # plan.recompute_layers: a share of them
    n_moe = stage["moe_layers"] if model.is_moe else np.zeros_like(stage["layers"])
    profile = get_profile(train.framework)
    compiled = np.asarray(arr["compile"], dtype=bool) & profile.compiled_dispatch
    extra = fp8_extra_ops(arr["fp8"], train.fp8_casts or profile.fp8_casts(), compiled)
    h_f, h_b = stage_host_s(stage["layers"], n_moe, full, train.cuda_graphs, cluster.host_op_s, extra, compiled)
    device = stage["compute"] + stage["tp"] + stage["cp"] + stage["ep"]
    d_f = device / lt["passes"]
    balanced = train.moe_routing == "balanced"
    syncs = profile.moe_host_sync(arr["ep"], balanced, model.moe_capacity_factor is not None)
    syncs = syncs & (train.cuda_graphs != "full")  # a full-iteration graph cannot read device values on the host
    return host_extra_s(h_f, h_b, d_f, device - d_f, syncs, n_moe, cluster.host_op_s)

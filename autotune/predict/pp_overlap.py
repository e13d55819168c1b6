"""Pipeline p2p per step (`pp_comm_s`) and what of it hides behind compute: Megatron's `overlap_p2p_comm` under the
interleaved 1F1B schedule.

[OVL] Megatron-Core's interleaved schedule (megatron/core/pipeline_parallel/schedules.py @ 00611e6e,
forward_backward_pipelining_with_interleaving, steady state under `config.overlap_p2p_comm`): after a model chunk's
forward, `pp_post_forward` posts the activation send / next receive as non-blocking ops (`send_forward_recv_forward(...,
overlap_p2p_comm=True)` returns wait handles) and the 1F1B step goes on with a chunk's backward; `pp_pre_forward` waits
on the receive only before the next forward. Likewise the gradient send after a backward (`pp_post_backward`) runs
under the next chunk's forward and `pp_pre_backward` waits for it. A transfer therefore shows only where it outlasts
the one model chunk's compute that runs beside it.
Who turns it on, with vpp > 1 and pp > 1 only:
- Megatron-LM (megatron/training/arguments.py): `--no-overlap-p2p-communication` (action store_false,
  dest overlap_p2p_comm), i.e. on by default; validate_args turns it off without a virtual pipeline;
- Megatron-Bridge / NeMo 2 (src/megatron/bridge/training/comm_overlap.py, CommOverlapConfig PP overlap):
  `if pipeline_model_parallel_size > 1: if vp_size > 1: overlap_p2p_comm = True; batch_p2p_comm = False`;
- NeMo 1.x (NeMo-Framework-Launcher @ tag 24.07 = 8325688d, launcher_scripts/conf/training/llama/llama2_13b.yaml,
  llama2_70b.yaml, llama3_70b.yaml, gpt3/175b.yaml: `overlap_p2p_comm: true`, `batch_p2p_comm: false` wherever
  virtual_pipeline_model_parallel_size is set; gpt3/5b.yaml and nemotron_8b.yaml, without it, set False).
So the megatron profile states it (FrameworkProfile.overlaps().interleaved_p2p) and a row with vpp > 1 overlaps its
p2p; the other profiles keep it exposed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.types import DTYPE_BYTES, ClusterSpec, TrainSpec
from autotune.predict.collectives import _link, pp_group_span
from autotune.predict.frameworks import get_profile
from autotune.predict.perf_dp import tied_embedding_allreduce_s


def p2p_overlapped(framework_overlaps: bool, pp: Any, vpp: Any) -> np.ndarray:
    """[OVL] Whether the pipeline's p2p runs beside compute: a framework that overlaps it
    (Overlaps.interleaved_p2p) with an interleaved (vpp > 1) pipeline."""
    pp, vpp = np.asarray(pp), np.asarray(vpp)
    return bool(framework_overlaps) & (pp > 1) & (vpp > 1)


def exposed_transfer_s(xfer_s: Any, fwd_chunk_s: Any, bwd_chunk_s: Any, overlapped: Any) -> np.ndarray:
    """[OVL] Seconds one pipeline boundary's forward activation send plus its backward gradient send add to the
    critical path: 2 * xfer_s when blocking; overlapped, the activation send runs beside a chunk's backward and the
    gradient send beside a chunk's forward, so only max(0, xfer - that chunk's compute) of each shows."""
    xfer, fwd, bwd = np.asarray(xfer_s, float), np.asarray(fwd_chunk_s, float), np.asarray(bwd_chunk_s, float)
    if np.any(xfer < 0) or np.any(fwd < 0) or np.any(bwd < 0):
        raise ValueError(f"exposed_transfer_s: xfer_s={xfer_s!r}, chunk seconds must be >= 0")
    hidden = np.maximum(xfer - bwd, 0.0) + np.maximum(xfer - fwd, 0.0)
    return np.where(overlapped, hidden, 2.0 * xfer)


def pp_comm_s(
    arr: dict[str, np.ndarray],
    model: ModelSpec,
    train: TrainSpec,
    cluster: ClusterSpec,
    tokens: np.ndarray,
    chunk_s: tuple[Any, Any] = (0.0, 0.0),
) -> np.ndarray:
    """Pipeline p2p seconds per step: (m*vpp + pp - 1) stage boundaries (Narayanan et al. 2021 Sec 2.2.2), each an
    activation sent forward and its gradient back (sequence-sharded under SP) + cluster.pp_microbatch_overhead_s,
    on the link of the whole pipeline's span (collectives.pp_group_span; one NIC per GPU); plus the tied embeddings' all-reduce. Megatron's
    interleaved schedule overlaps each send with a model chunk's compute (`chunk_s`: one micro-batch's forward and
    backward seconds of one chunk; autotune/predict/pp_overlap.py [OVL]): only what outlasts it shows."""
    tp, pp, vpp, m = arr["tp"], arr["pp"], arr["vpp"], arr["grad_accum_steps"]
    bw, lat = _link(cluster, pp_group_span(arr), cluster.fast_domain)  # p2p: one NIC per GPU (g = 1 below)
    p2p_bytes = (
        tokens * model.hidden_size * DTYPE_BYTES[train.compute_dtype] / np.where(arr["sequence_parallel"], tp, 1)
    )
    overlapped = p2p_overlapped(get_profile(train.framework).overlaps().interleaved_p2p, pp, vpp)
    boundary = exposed_transfer_s(p2p_bytes / bw + lat, *chunk_s, overlapped) + cluster.pp_microbatch_overhead_s
    pp_s = np.where(pp > 1, (m * vpp + pp - 1) * boundary, 0.0)
    return pp_s + tied_embedding_allreduce_s(arr, model, train, cluster)  # once per step, tied embeddings

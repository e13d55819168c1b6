"""Pipeline p2p hidden behind compute: Megatron's `overlap_p2p_comm` under the interleaved 1F1B schedule.

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

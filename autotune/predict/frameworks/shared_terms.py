"""Terms several framework profiles share (split out of base.py, which re-exports them): the inputs of every
`model_states`, the step of a fused AdamW, FSDP2 under torch.distributed.pipelining (bench_model and torchtitan) and
the pipelining stages' own buffers."""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.types import DTYPE_BYTES, TrainSpec


def state_inputs(num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec) -> tuple:
    """The arrays and byte counts every profile's `model_states` starts from: (psi, zero_stage, shard, compute bytes,
    fp32 master bytes per parameter (0 when training in fp32), optimizer-state bytes per parameter)."""
    c = DTYPE_BYTES[train.compute_dtype]
    return (
        np.asarray(num_params, dtype=np.float64),
        np.asarray(zero_stage),
        np.asarray(shard, dtype=np.float64),
        c,
        4.0 if c != 4 else 0.0,
        DTYPE_BYTES[train.optimizer_dtype] * train.optimizer_states,
    )


def fused_adamw_step_temporaries(local_params: Any, zero_stage: Any, shard: Any) -> np.ndarray:
    """Step temporaries of a framework whose AdamW is the fused kernel and whose ZeRO gathers in place: none.
    torch._fused_adamw_ updates params and states in place (torch/optim/adamw.py `_fused_adamw`), where foreach AdamW
    allocates an fp32 sqrt temporary per parameter (`_multi_tensor_adamw`: exp_avg_sq_sqrt = torch._foreach_sqrt)."""
    return np.zeros(np.broadcast(np.asarray(local_params), np.asarray(zero_stage), np.asarray(shard)).shape)


def fsdp_pipeline_held(
    stage_params: Any, zero_stage: Any, shard: Any, pp: Any, compute_bytes: float, grad_bytes: float
) -> dict:
    """FSDP2 inside a torch.distributed.pipelining stage (pp > 1, ZeRO-2/3 over a sharding group > 1): the stage
    backward sets set_requires_gradient_sync(False) and set_reshard_after_backward(False) on every micro-batch and
    reduce-scatters once after the last (torch/distributed/pipelining/stage.py `backward_maybe_with_nosync`,
    `perform_reduce_grad`), so the stage's parameters stay gathered (`compute_bytes` each; ZeRO-2 keeps them anyway)
    and its unsharded gradients accumulate in the reduce dtype (`grad_bytes`; FSDPParam.to_accumulated_grad_if_needed)
    until then. bench_model and torchtitan both run it (FrameworkProfile.pipeline_held)."""
    psi, z = np.asarray(stage_params, dtype=np.float64), np.asarray(zero_stage)
    fsdp = (np.asarray(pp) > 1) & (np.asarray(shard) > 1) & (z >= 2)
    return {
        "compute_copy": np.where(fsdp & (z >= 3), psi * compute_bytes, 0.0),
        "grads": np.where(fsdp, psi * grad_bytes, 0.0),
    }


def torch_pipeline_buffers(hidden: Any, m: Any, inflight: Any, rank: Any, pp: Any, vpp: Any, shared: Any) -> np.ndarray:
    """What torch.distributed.pipelining's stages keep besides the layers' saved tensors, in units of `hidden` (one
    micro-batch's inter-stage activation), on pipeline rank `rank` holding `vpp` stages (stage ids rank + j*pp) of
    which `inflight * vpp` stage-micro-batches are in flight (FrameworkProfile.inflight). Source:
    torch/distributed/pipelining/stage.py (torch 2.6 through 2.13):
      - `_prepare_forward_infra` / `_setup_forward_recv_info`: every non-first stage allocates one receive buffer
        per micro-batch (`_make_tensor_from_meta`, m of them) once and keeps them for all later steps; the in-flight
        ones are the stage's input, which full recompute's checkpoint saves anyway (`shared`): the rest are extra;
      - `_setup_backward_recv_info` / `_create_grad_recv_info`: every non-last stage keeps m gradient receive buffers;
      - `forward_one_chunk`: `fwd_cache[chunk] = (output_tuple, inputs)` holds each in-flight micro-batch's stage
        output until its backward (no layer of this stage saves its own last output).
    Measured with torch's PipelineStage on one gloo rank (tests/unit/test_pipeline_buffers.py). pp = 1: nothing."""
    pp, vpp, m, r = (np.asarray(x, dtype=np.float64) for x in (pp, vpp, m, rank))
    chunks = np.asarray(inflight, dtype=np.float64) * vpp  # stage-micro-batches in flight on this rank
    non_last = vpp - (r == pp - 1)
    non_first = vpp - (r == 0)
    fwd_recv = m * non_first - np.where(np.asarray(shared, dtype=bool), chunks * non_first / vpp, 0.0)
    units = m * non_last + fwd_recv + chunks * non_last / vpp
    return np.where(pp > 1, units * np.asarray(hidden, dtype=np.float64), 0.0)

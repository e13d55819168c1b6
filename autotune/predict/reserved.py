"""Reserved memory of the PyTorch CUDA caching allocator (docs/memory_model.md "Reserved memory").

torch.cuda.max_memory_reserved is the most memory the caching allocator ever held in segments (cudaMalloc'd blocks);
without torch.cuda.empty_cache() it only grows. How the allocator carves it (c10/cuda/CUDACachingAllocator.cpp and
https://pytorch.org/docs/stable/notes/cuda.html#memory-management):
  - requests are rounded to 512 bytes; requests <= 1 MiB come from the small pool in 2 MiB segments, requests up to
    10 MiB get a 20 MiB segment, larger ones a segment of their own size rounded up to 2 MiB (kRoundLarge);
  - a freed block stays cached in its pool, keyed by size; a later request takes the best-fitting free block and splits
    it, but never merges blocks of different segments. A large transient block that cycles every step therefore keeps
    its segment: when it is freed, the live tensors of the allocated peak can reuse only what fits in its holes;
  - `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (torchtitan's launcher sets it) maps 2 MiB pages into one
    growing virtual segment per stream, so freed ranges are reused across former segment boundaries.
So reserved - allocated (the excess) is not a fixed fraction of the allocated peak: it grows with the large transient
blocks that are freed before or after the peak. Three classes dominate on the measured H200 runs:
  - the loss: bench_model's cross_entropy on logits.float() creates the fp32 logits of the last stage (4 b s V/t bytes)
    next to the bf16 ones; part of that segment is not reusable by the activations live at the peak;
  - the optimizer step, after backward: foreach AdamW (torch.optim.adamw._multi_tensor_adamw) allocates one fp32
    temporary per updated parameter (exp_avg_sq.sqrt()), 4 bytes x the parameters the rank updates; bench_model's
    ZeRO-1 (bench_model/parallel/data_parallel.py ZeRO1AdamW) adds the fp32 send and receive buffers of its all-gather
    of the updated slices, one bucket at a time (<= 256 MiB or the largest parameter; until 2026-11-25 one flat buffer
    of the whole local model, 4 Psi bytes, which put ZeRO-1's reserved peak above ZeRO-0's at dp*cp = 2);
  - the gradients a framework creates during the step's first backward and holds to its end (FSDP2's
    reduce-scatter output becomes each block's sharded .grad in its post-backward hook,
    torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py `foreach_reduce`; under pp > 1 the unsharded fp32
    accumulated gradient; autograd's AccumulateGrad for parameters outside FSDP): these persistent blocks land in the
    segments the backward is freeing activations from, so the next micro-batch's activations and the step's
    temporaries cannot use the holes between them. A framework whose gradient memory is one buffer allocated before
    the first step (Megatron's DDP grad buffer, nanotron's fp32 accumulator) has no such blocks
    (FrameworkProfile.grads_made_in_backward).
excess = LOGITS_CACHED * fp32 logits + STEP_CACHED * step temporaries + GRADS_CACHED * gradients made in backward
(each block rounded to the allocator's 2 MiB), scaled by EXPANDABLE_SCALE with expandable segments. The coefficients are
the fraction of each transient class that stays reserved but unused at the allocated peak, fitted by `fit_coefficients`
(benchmarks/reserved_accuracy.py --fit) on the 44 bench_model rows of the three H200 leases (2026-11-23, -25, -29:
three trainers, each row predicted as the trainer that ran it) with the measured allocated peak as input, so a change
of the trainer's allocated terms does not move them. The runtime overhead outside the allocator (CUDA context, NCCL,
cluster.runtime_overhead_bytes) is added on top by autotune.predict.memory; max_memory_reserved does not include it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MiB = 2**20
ROUND_LARGE = 2 * MiB  # kRoundLarge: large-pool requests above 10 MiB are rounded up to 2 MiB

# Fitted by benchmarks/reserved_accuracy.py --fit (least squares on the relative error of max_memory_reserved) over
# the 44 bench_model / probe-memory rows of the three H200 leases (h200_bench_model_2026-11*.csv; H200, torch 2.11,
# expandable_segments off).
LOGITS_CACHED = 0.46  # share of the fp32 logits block left cached and unused at the allocated peak
STEP_CACHED = 0.975  # optimizer-step temporaries (foreach AdamW sqrt, ZeRO-1 gather buffers, per-parameter copies)
GRADS_CACHED = 0.297  # gradients created in the first backward and held to the step's end
# expandable_segments:True, the three runs of benchmarks/data/measured/README.md ("With PYTORCH_CUDA_ALLOC_CONF=...":
# dp4 x tp2 ZeRO-1 106.9, FSDP 8 98.4, 1B mbs 4 79.8 GiB reserved at unchanged allocated): the excess shrinks by this.
EXPANDABLE_SCALE = 0.85
# Relative error of the reserved peak the planner expresses its memory margin in units of. Set to 0.038 when fitted on
# the 2026-11-23 rows alone (their end-to-end rms), and kept: with the three classes the end-to-end rms is 1.6% / 1.4%
# on the 2026-11-25 / -29 leases and 2.1% with measured allocated over all 44 rows, but leave-one-lease-out gives 4.7%
# on the 2026-11-23 trainer and torchtitan's published peaks are within 3.5% median, 10.7% max
# (benchmarks/reserved_accuracy.py, benchmarks/published_fit.py): a trainer the fit has not seen is off by more.
RESERVED_SIGMA_REL = 0.038
# bench_model/parallel/data_parallel.py GATHER_BUCKET_BYTES (tests/unit/test_reserved.py checks they agree): the most a
# ZeRO1AdamW all-gather bucket receives at once, unless one parameter is larger
ZERO1_GATHER_BUCKET_BYTES = 256 * MiB


def round_large(nbytes: Any) -> np.ndarray:
    """Bytes the allocator hands out for a large-pool request (> 1 MiB): rounded up to a multiple of 2 MiB. Smaller
    requests share 2 MiB small-pool segments and are returned unchanged."""
    n = np.asarray(nbytes, dtype=np.float64)
    return np.where(n > MiB, np.ceil(n / ROUND_LARGE) * ROUND_LARGE, n)


def step_temporaries(
    local_params: Any,
    zero_stage: Any,
    shard: Any,
    zero1_gather: Any,
    optimizer_states: int,
    largest_param: Any = None,
) -> np.ndarray:
    """fp32 bytes the optimizer step allocates and frees: AdamW's foreach sqrt temporary over the parameters this rank
    updates (all local ones in stage 0, a 1/D slice from stage 1) and, when bench_model's ZeRO1AdamW runs
    (`zero1_gather`), its send (1/D) and receive buffers of one gather bucket: at most ZERO1_GATHER_BUCKET_BYTES or
    the largest local parameter (`largest_param`, elements) when that is larger, never more than the local model
    (bench_model/parallel/data_parallel.py `gather_buckets`). `largest_param=None` is the trainer before the buckets
    (one flat receive buffer of all Psi local parameters), which the measured 2026-11-23 H200 rows ran. SGD (no
    states) allocates no AdamW temporary."""
    psi, z, d = (np.asarray(x, dtype=np.float64) for x in (local_params, zero_stage, shard))
    updated = psi / np.where(z >= 1, d, 1.0)
    adam = np.where(optimizer_states > 0, 4.0 * updated, 0.0)
    recv = 4.0 * psi
    if largest_param is not None:
        bucket = np.maximum(ZERO1_GATHER_BUCKET_BYTES, 4.0 * np.asarray(largest_param, dtype=np.float64))
        recv = np.minimum(recv, bucket)
    gather = np.where(np.asarray(zero1_gather, dtype=bool), recv + recv / d, 0.0)
    return round_large(adam) + round_large(gather)


def allocator_reserved(allocated: Any, cached: dict[str, np.ndarray], cluster) -> np.ndarray:
    """Reserved peak of the caching allocator (no runtime overhead): the allocated peak plus what it keeps beyond it
    (`allocator_cache`), times 1 + cluster.allocator_fragmentation, a calibrated residual factor (0 in the GPU
    presets)."""
    return (np.asarray(allocated, dtype=np.float64) + sum(cached.values())) * (1.0 + cluster.allocator_fragmentation)


def allocator_cache(
    res: dict[str, np.ndarray],
    arr: dict[str, np.ndarray],
    train,
    cluster,
    no_fp32_logits: Any = False,
    backward_grads: Any = 0.0,
) -> dict[str, np.ndarray]:
    """What the caching allocator keeps beyond the allocated peak, per class (`cached_bytes`), for
    `autotune.predict.memory.memory_arrays`' result `res` (its `step_temporaries` key comes from `step_temporaries`).
    The fp32 logits block is the 4/(8+c) share of the logits term (its fp32 log-softmax next to the fp32 gradient and
    the compute-dtype gradient), 4/(4+c) for bench_model's fused loss at pp=1, tp=1 (bench_model/loss.py: the gradient
    built in the fp32 logits' storage, next to its compute-dtype copy); none where `no_fp32_logits` (a compiled loss
    that never materialises fp32 logits: torchtitan's); `backward_grads` the gradient bytes the framework creates in
    the first backward (FrameworkProfile.grads_made_in_backward). A CPU preset has no caching allocator: nothing."""
    if cluster.device_type != "cuda":
        zero = np.zeros_like(np.asarray(res["allocated"], dtype=np.float64))
        return {"logits": zero, "step": zero, "grads": zero}
    logits_fp32 = fp32_logits_block(res, arr, train, no_fp32_logits)
    return cached_bytes(logits_fp32, res["step_temporaries"], backward_grads, cluster.expandable_segments)


def fp32_logits_block(res: dict[str, np.ndarray], arr: dict[str, np.ndarray], train, no_fp32_logits: Any = False):
    """The fp32 block of the logits term `res["logits"]` (allocator_cache's docstring: 4/(8+c) of it, 4/(4+c) for
    bench_model's fused loss at pp=1, tp=1, none where `no_fp32_logits`)."""
    from autotune.core.types import DTYPE_BYTES

    c = DTYPE_BYTES[train.compute_dtype]
    fused = (train.framework == "bench_model") & (np.asarray(arr["pp"]) == 1) & (np.asarray(arr["tp"]) == 1)
    logits_fp32 = res["logits"] * 4.0 / np.where(fused, 4.0 + (c if c != 4 else 0), 8.0 + c)
    return np.where(np.asarray(no_fp32_logits, dtype=bool), 0.0, logits_fp32)


def zero1_gather(arr: dict[str, np.ndarray]) -> np.ndarray:
    """Whether bench_model.trainer runs ZeRO1AdamW (stage 1 with a sharding group dp*cp > 1)."""
    return (np.asarray(arr["zero_stage"]) == 1) & (np.asarray(arr["dp"]) * np.asarray(arr["cp"]) > 1)


def reserved_bytes(
    allocated: Any,
    logits_fp32: Any,
    step_temp: Any,
    expandable_segments: bool = False,
    coefficients: tuple[float, float, float] | None = None,
    backward_grads: Any = 0.0,
) -> np.ndarray:
    """Caching-allocator reserved peak (bytes, no runtime overhead) from the allocated peak and the three classes of
    blocks (module docstring)."""
    cached = cached_bytes(logits_fp32, step_temp, backward_grads, expandable_segments, coefficients)
    return np.asarray(allocated, dtype=np.float64) + sum(cached.values())


def cached_bytes(
    logits_fp32: Any,
    step_temp: Any,
    backward_grads: Any = 0.0,
    expandable_segments: bool = False,
    coefficients: tuple[float, float, float] | None = None,
) -> dict[str, np.ndarray]:
    """Bytes the caching allocator keeps reserved but unused at the allocated peak, per class: "logits" (the fp32
    logits block, rounded to 2 MiB), "step" (the optimizer step's temporaries), "grads" (gradients made in the first
    backward), each its share (LOGITS_CACHED, STEP_CACHED, GRADS_CACHED), x EXPANDABLE_SCALE with expandable segments."""
    k_logits, k_step, k_grads = coefficients if coefficients is not None else (LOGITS_CACHED, STEP_CACHED, GRADS_CACHED)
    scale = EXPANDABLE_SCALE if expandable_segments else 1.0
    return {
        "logits": scale * k_logits * round_large(logits_fp32),
        "step": scale * k_step * np.asarray(step_temp, dtype=np.float64),
        "grads": scale * k_grads * np.asarray(backward_grads, dtype=np.float64),
    }


def fit_coefficients(allocated, reserved, logits_fp32, step_temp, backward_grads) -> tuple[float, float, float]:
    """(LOGITS_CACHED, STEP_CACHED, GRADS_CACHED) minimising the squared relative error of the reserved peak over
    measured rows, each a share of its class and so never negative (non-negative least squares)."""
    from scipy.optimize import nnls

    r = np.asarray(reserved, dtype=np.float64)
    cols = [round_large(logits_fp32), np.asarray(step_temp, dtype=np.float64), np.asarray(backward_grads, dtype=float)]
    x = np.stack([c / r for c in cols], axis=1)
    y = (r - np.asarray(allocated, dtype=np.float64)) / r
    k = nnls(x, y)[0]
    return float(k[0]), float(k[1]), float(k[2])

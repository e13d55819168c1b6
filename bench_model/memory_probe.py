"""Worst-rank peak memory of a world of N without N devices (probe-memory): rank 0 of the layout runs alone on a fake
process group (torch.testing._internal.distributed.fake_pg: collectives return at once, shapes are real).

- CUDA present: the real trainer (bench_model.trainer) runs two real optimizer steps on the real device; the peak is
  the caching allocator's max_memory_allocated / max_memory_reserved (the second step holds the AdamW state).
  Components: params/grads/optimizer from the tensors rank 0 really holds; activations = allocated peak minus those.
- CPU: the parallelised meta model is materialised under FakeTensorMode and one forward+backward over all
  micro-batches runs under torch's MemTracker (FSDPMemTracker when FSDP2 is applied), which attributes every
  allocation to params / grads / activations / temporaries / collective buffers at the peak. The optimizer state is
  counted analytically (fake mode over-counts the step): AdamW's 2 fp32 states per local parameter element, and for
  ZeRO-1 2 states + 1 fp32 master slice of ceil(numel/N) elements (bench_model.parallel.data_parallel).

Reported with autotune.core.types.MemoryEstimate.as_columns (the keys of `autotune estimate --json`). Logits and the loss
are inside mem_activations_bytes (the tracker cannot separate them), so mem_logits_bytes is 0; overhead and
fragmentation come from the cluster preset, as in the estimate, so mem_reserved_bytes follows the same convention on CPU.

MoE models: the probe runs train.moe_routing=balanced whatever the spec says (fake tensors carry no router scores,
so learned routing would have no dispatch sizes; balanced routing's are known in Python, bench_model.moe), and at
ZeRO-1 the routed experts' optimizer slices are counted over their edp group.

Not supported: plan.pp > 1. The pipeline schedule exchanges activations point-to-point with the other stages, and on
a fake process group rank 0 would receive nothing (its shapes come from real peers): measuring it would mean
simulating the schedule, i.e. faking the numbers."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any

import torch
import torch.distributed as dist

from autotune.core.errors import UsageError
from autotune.core.trial import MemoryEstimate, TrialSpec


def probe_memory(spec: TrialSpec) -> dict[str, Any]:
    p = spec.plan
    if spec.model.is_moe and spec.train.moe_routing != "balanced":
        # fake tensors carry no router scores, so learned routing has no dispatch sizes; balanced routing's are
        # known (bench_model.moe.expert_counts): the probe measures the force-balanced layout, as NVIDIA's MoE
        # benchmarks run it
        spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, moe_routing="balanced"))
    if p.pp > 1:
        raise UsageError(
            f"plan.pp={p.pp}: probe-memory supports pp=1 only (a pipeline stage needs its real peers "
            "for activations; see bench_model/memory_probe.py)"
        )
    if p.offload != "none" and not torch.cuda.is_available():
        raise UsageError(
            f"plan.offload={p.offload}: probe-memory on CPU cannot tell host from device memory (one pool); "
            "it needs a CUDA device, where the allocator counts device memory only"
        )
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=p.world_size)
    try:
        if torch.cuda.is_available():
            est, how = _probe_cuda(spec), "cuda allocator, fake process group"
        else:
            with private_sharding_propagation():  # DTensor shape inference is not device memory
                est, how = _probe_fake(spec), "FakeTensorMode + MemTracker, fake process group"
    finally:
        dist.destroy_process_group()
    return {**est.as_columns(), "probe_method": how, "num_gpus": p.world_size}


@contextlib.contextmanager
def private_sharding_propagation():
    """DTensor derives an op's output metadata by running the op on global-shape fake tensors
    (torch/distributed/tensor/_sharding_prop.py `_propagate_tensor_meta_non_cached`: `detect_fake_mode() or
    FakeTensorMode()`). On a GPU that is a private fake mode and costs no memory; under the probe's FakeTensorMode the
    global-shape outputs would be created in the tracked mode and counted (e.g. 8 bytes per logit of the full
    vocabulary in the vocab-parallel loss's handlers). Run it with the probe's modes switched off."""
    from torch.distributed.tensor._sharding_prop import ShardingPropagator
    from torch.utils._python_dispatch import _disable_current_modes

    orig = getattr(ShardingPropagator, "_propagate_tensor_meta_non_cached", None)
    if orig is None:  # a torch without this hook: the probe then counts the shape-inference outputs (conservative)
        yield
        return

    def private(self, op_schema):
        with _disable_current_modes():
            return orig(self, op_schema)

    ShardingPropagator._propagate_tensor_meta_non_cached = private
    try:
        yield
    finally:
        ShardingPropagator._propagate_tensor_meta_non_cached = orig


def _local_numels(trainer) -> list[int]:
    from torch.distributed.tensor import DTensor

    return [
        (q.to_local() if isinstance(q, DTensor) else q).numel() for part in trainer.parts for q in part.parameters()
    ]


def _optimizer_bytes(trainer) -> float:
    p, n = trainer.spec.plan, trainer.spec.plan.dp * trainer.spec.plan.cp
    numels = _local_numels(trainer)
    if p.zero_stage == 1 and n > 1:
        # exp_avg, exp_avg_sq, master slice; routed experts sliced over their edp group (bench_model.trainer_moe)
        expert = _expert_numels(trainer)
        edp = trainer.meshes.expert.edp.size() if trainer.meshes.expert is not None else 1
        dense = sum(3 * math.ceil(x / n) * 4 for x in numels) - sum(3 * math.ceil(x / n) * 4 for x in expert)
        return float(dense + sum(3 * math.ceil(x / edp) * 4 for x in expert))
    return float(sum(2 * x * 4 for x in numels))


def _expert_numels(trainer) -> list[int]:
    from torch.distributed.tensor import DTensor

    from bench_model.parallel.expert_parallel import moe_modules

    return [
        (q.to_local() if isinstance(q, DTensor) else q).numel()
        for part in trainer.parts
        for moe in moe_modules(part)
        for q in moe.experts.parameters()
    ]


def _probe_fake(spec: TrialSpec) -> MemoryEstimate:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker

    from bench_model import data
    from bench_model.trainer import build_trainer

    fake = FakeTensorMode(allow_non_fake_inputs=True)  # to_empty reads the meta tensors
    trainer = build_trainer(spec, torch.device("cpu"), materialize=lambda: fake)
    model = trainer.parts[0]
    fsdp = hasattr(model, "set_requires_gradient_sync")
    tracker = FSDPMemTracker(model) if fsdp else MemTracker()
    if not fsdp:
        tracker.track_external(model)
    with fake, tracker:
        _one_microbatch(trainer, data)
    snap = next(iter(tracker.get_tracker_snapshot("peak").values()))
    get = lambda *keys: float(sum(snap.get(k, 0) for k in keys))  # noqa: E731
    return _estimate(
        spec,
        params=get("Parameter", "Sharded Param", "Unsharded Param"),
        grads=get("Gradient", "Sharded Grad", "Unsharded Grad"),
        optimizer=_optimizer_bytes(trainer),
        activations=get("Activation", "Temp", "Inputs"),
        buffers=get("Buffer", "All Gather", "Reduce Scatter", "Other"),
    )


def _one_microbatch(trainer, data) -> None:
    """Forward + backward of one micro-batch with gradient reduction on: activations of a micro-batch are freed by its
    backward, so later micro-batches repeat the same peak (FSDPMemTracker also tracks one iteration only)."""
    from bench_model.parallel.data_parallel import set_gradient_sync

    p = trainer.spec.plan
    tokens, labels = trainer.local_batch(0, range(p.micro_batch_size))
    set_gradient_sync(trainer.parts, p.zero_stage, True)
    trainer.microbatch_backward(tokens, labels)


def _probe_cuda(spec: TrialSpec) -> MemoryEstimate:
    from bench_model.trainer import build_trainer

    device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.reset_peak_memory_stats(device)
    trainer = build_trainer(spec, device)
    for step in range(2):
        trainer.step(step)
    torch.cuda.synchronize(device)
    allocated = float(torch.cuda.max_memory_allocated(device))
    reserved = float(torch.cuda.max_memory_reserved(device))
    params = float(sum(x * 4 for x in _local_numels(trainer)))
    grads, opt = params, _optimizer_bytes(trainer)
    acts = max(0.0, allocated - params - grads - opt)
    frag = reserved / allocated - 1.0 if allocated else 0.0
    return MemoryEstimate(
        params_bytes=params,
        grads_bytes=grads,
        optimizer_bytes=opt,
        activations_bytes=acts,
        logits_bytes=0.0,
        buffers_bytes=0.0,
        overhead_bytes=0.0,
        fragmentation=frag,
    )


def _estimate(
    spec: TrialSpec, *, params: float, grads: float, optimizer: float, activations: float, buffers: float
) -> MemoryEstimate:
    c = spec.cluster
    return MemoryEstimate(
        params_bytes=params,
        grads_bytes=grads,
        optimizer_bytes=optimizer,
        activations_bytes=activations,
        logits_bytes=0.0,
        buffers_bytes=buffers,
        overhead_bytes=float(c.runtime_overhead_bytes),
        fragmentation=c.allocator_fragmentation,
    )

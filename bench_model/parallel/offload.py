"""CPU offload (plan.offload; docs/memory_model.md "CPU offload").

params: FSDP2 `fully_shard(..., offload_policy=CPUOffloadPolicy())` (bench_model/parallel/data_parallel.py): the sharded
  parameters, their gradients and the optimizer state built on them live in host memory; FSDP2 copies each block's
  shard to the device before its all-gather and the reduced gradient shard back after its reduce-scatter, and
  torch.optim.AdamW steps on the host tensors. The model is materialised on the host (`materialize_device`), buffers
  (RoPE tables) on the device, as torchtitan does for training.enable_cpu_offload.
optimizer: ZeRO-Offload (Ren et al. 2021, Sec 4.1-4.2): `HostOffloadAdamW` keeps an fp32 master copy of the
  parameters this rank updates (its FSDP shard in stages 2-3) and the Adam states on the host; each step copies the
  reduced gradients device -> host, runs AdamW there and copies the updated parameters host -> device. Stage 1 runs
  bench_model's ZeRO1AdamW with its slices on the host (`host=`). Pinned host buffers when the device is CUDA.

On a CPU device the host and the device are the same memory pool: the copies are real copies into separate tensors,
so the numerics and the plumbing are exercised, but nothing moves between two memories (tests say so by name).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.tensor import DTensor

HOST = torch.device("cpu")


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t


def _pin(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Page-locked host memory when the device is CUDA (asynchronous copies at full PCIe bandwidth)."""
    return t.pin_memory() if device.type == "cuda" else t


def materialize_device(offload: str, device: torch.device) -> torch.device:
    """Where the parallelised model's parameters get storage: the host under offload=params, else the device."""
    return HOST if offload == "params" else device


def cpu_offload_policy(device: torch.device):
    """FSDP2's CPUOffloadPolicy (public from torch 2.6), pinned on CUDA."""
    try:
        from torch.distributed.fsdp import CPUOffloadPolicy
    except ImportError:  # pragma: no cover - torch < 2.6
        from torch.distributed._composable.fsdp import CPUOffloadPolicy
    return CPUOffloadPolicy(pin_memory=device.type == "cuda")


class HostOffloadAdamW:
    """AdamW whose fp32 master parameters and states live on the host (ZeRO-Offload). The device parameters are the
    working copy: after each host step the updated master is copied back into them. AdamW is elementwise, so the
    numbers equal torch.optim.AdamW on the device parameters."""

    def __init__(self, params: list[nn.Parameter], **adamw_kwargs):
        self.params = [p for p in params if p.requires_grad]
        self.device = _local(self.params[0]).device if self.params else HOST
        self.masters = [
            nn.Parameter(_pin(_local(p).detach().to(HOST, torch.float32, copy=True), self.device)) for p in self.params
        ]
        self.grads = [_pin(torch.empty_like(m, requires_grad=False), self.device) for m in self.masters]
        self.inner = torch.optim.AdamW(self.masters, **adamw_kwargs)
        self.param_groups = self.inner.param_groups

    @torch.no_grad()
    def step(self) -> None:
        for p, m, buf in zip(self.params, self.masters, self.grads):
            if p.grad is None:
                m.grad = None
                continue
            buf.copy_(_local(p.grad), non_blocking=True)  # D2H of the reduced (sharded) gradient
            m.grad = buf
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()  # the host step reads the copied gradients
        self.inner.step()
        for p, m in zip(self.params, self.masters):
            _local(p).copy_(m, non_blocking=True)  # H2D of the updated parameters

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None
        for m in self.masters:
            m.grad = None

    def state_bytes(self) -> int:
        """Host bytes this optimizer holds: masters, gradient buffers and Adam states (not the scalar step counters)."""
        states = [t for s in self.inner.state.values() for k, t in s.items() if torch.is_tensor(t) and k != "step"]
        return sum(t.numel() * t.element_size() for t in [*self.masters, *self.grads, *states])

"""A rank's host (dispatch) seconds per step, measured as (dispatched operations counted) x (measured seconds per
operation), so that a scale-down composition can keep that part apart from the FLOP-scaled compute
(docs/scale_down.md "The composition").

Why: on CPU ranks a tensor-parallel rank of a small model spends much of its step dispatching operations: every
operation on a DTensor goes through DTensor's Python dispatch (sharding propagation, the local op, the result's
wrapping), about 5,900 of them per step of a tp-2 rank of the tiny model (torch.profiler, `PythonSubclass`, 22 us
self each on this host; docs/scale_down.md). That count is set by the code (one per operation of the layer, whatever
tp is), not by the shapes, so it does not shrink when tp doubles, while the FLOPs halve.

- the count: a TorchDispatchMode over the forward and backward of one untimed step (the warm-up step; the optimizer
  step is timed apart and not counted) sorts each dispatched operation by whether a DTensor takes part (DTensor's
  own dispatch then runs the local ops out of the mode's sight, so each counts once);
- the cost: `time.process_time` of a tight loop of tiny elementwise operations with autograd recording, once on
  plain tensors and once on DTensors of the rank's tp mesh (Replicate: no communication) — the fixed per-operation
  cost, since a tiny operation does next to no arithmetic.
Not counted as host: the collectives' own CPU (gloo), the arithmetic, the optimizer step. Measured on CPU ranks only,
when the trial has a warm-up step and is not compiled (a compiled block dispatches one graph, not its operations).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate
from torch.utils._python_dispatch import TorchDispatchMode

LOOP_OPS = 200  # timed tiny operations per kind (after LOOP_WARMUP untimed): ~10 ms of a rank's time in all


LOOP_WARMUP = 20


class OpCounter(TorchDispatchMode):
    """Counts dispatched operations: functional collectives (DTensor's tensor-parallel redistributions and
    loss_parallel; FSDP2's are c10d ops, timed apart by comm_timing.py), operations with a DTensor among their
    arguments, and the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.dtensor_ops, self.plain_ops, self.collectives = 0, 0, 0
        # of them inside the model's ends (embedding, head + loss: bench_model/ends_timing.py sets in_ends)
        self.in_ends, self.ends_dtensor_ops, self.ends_plain_ops = False, 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "_c10d_functional" and not func.__name__.startswith("wait_tensor"):
            self.collectives += 1
        elif any(issubclass(t, DTensor) for t in types):
            self.dtensor_ops += 1
            self.ends_dtensor_ops += self.in_ends
        else:
            self.plain_ops += 1
            self.ends_plain_ops += self.in_ends
        return func(*args, **(kwargs or {}))


@dataclass(frozen=True)
class HostCost:
    """Operations dispatched in one step's forward and backward, and their measured host seconds."""

    dtensor_ops: int
    plain_ops: int
    collectives: int  # functional collectives (tensor parallelism's)
    dtensor_op_s: float  # CPU seconds per tiny DTensor operation (tight loop)
    plain_op_s: float  # CPU seconds per tiny plain operation (tight loop)
    collective_s: float  # CPU seconds per tiny functional collective and its wait on the tp group (0 at tp 1)
    ends_dtensor_ops: int = 0  # of dtensor_ops / plain_ops, those inside the embedding and the head + loss
    ends_plain_ops: int = 0

    @property
    def ops(self) -> int:
        return self.dtensor_ops + self.plain_ops

    @property
    def cpu_s(self) -> float:
        """The dispatch part: operations x seconds per operation (collectives not included)."""
        return self.dtensor_ops * self.dtensor_op_s + self.plain_ops * self.plain_op_s

    @property
    def ends_cpu_s(self) -> float:
        """Of `cpu_s`, the part inside the model's ends (bench_model/ends_timing.py)."""
        return self.ends_dtensor_ops * self.dtensor_op_s + self.ends_plain_ops * self.plain_op_s


def _loop_s(x: torch.Tensor, w: torch.Tensor) -> float:
    for _ in range(LOOP_WARMUP):
        x * w
    c0 = time.process_time()
    for _ in range(LOOP_OPS):
        x * w
    return (time.process_time() - c0) / LOOP_OPS


def per_op_seconds(mesh: DeviceMesh, device: torch.device) -> tuple[float, float]:
    """(plain, DTensor) CPU seconds per tiny elementwise operation with autograd recording, on this rank."""
    x = torch.ones(4, device=device, requires_grad=True)
    w = torch.ones(4, device=device)
    plain = _loop_s(x, w)
    dx = DTensor.from_local(x.detach(), mesh, [Replicate()], run_check=False).requires_grad_()
    dw = DTensor.from_local(w, mesh, [Replicate()], run_check=False)
    return plain, _loop_s(dx, dw)


def per_collective_seconds(mesh: DeviceMesh, device: torch.device) -> float:
    """CPU seconds per tiny functional collective (all-gather, reduce-scatter, all-reduce in turn, each waited on:
    DTensor's redistribution path) on `mesh`'s group; every rank of the group calls it. 0 on a one-rank mesh."""
    import torch.distributed._functional_collectives as fc

    if mesh.size() == 1:
        return 0.0
    group, x = mesh.get_group(), torch.ones(4 * mesh.size(), device=device)
    ops = (
        lambda: fc.all_gather_tensor(x, 0, group),
        lambda: fc.reduce_scatter_tensor(x, "sum", 0, group),
        lambda: fc.all_reduce(x, "sum", group),
    )
    for i in range(LOOP_WARMUP):
        fc.wait_tensor(ops[i % 3]())
    n = LOOP_OPS // 4
    c0 = time.process_time()
    for i in range(n):
        fc.wait_tensor(ops[i % 3]())
    return (time.process_time() - c0) / n


def host_cost(counter: OpCounter, mesh: DeviceMesh, device: torch.device) -> HostCost:
    plain_s, dtensor_s = per_op_seconds(mesh, device)
    coll_s = per_collective_seconds(mesh, device)
    ends = (counter.ends_dtensor_ops, counter.ends_plain_ops)
    return HostCost(counter.dtensor_ops, counter.plain_ops, counter.collectives, dtensor_s, plain_s, coll_s, *ends)

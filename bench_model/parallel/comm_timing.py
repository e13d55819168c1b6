"""The CPU seconds a rank spends in FSDP2's sharded data-parallel collectives (the all-gathers of ZeRO-2/3 parameters
and the reduce-scatters of their gradients), timed apart from the rest of the step so that a scale-down composition
can price the target's data-parallel traffic at full size instead of scaling the replica's with the compute
(docs/scale_down.md "The composition").

Installed through FSDP2's public custom-communication hooks (`FSDPModule.set_custom_all_gather` /
`set_custom_reduce_scatter`, torch/distributed/fsdp/_fully_shard/_fully_shard.py): each call runs the default
collective synchronously (a requested async all-gather is waited on inside the call: on gloo the collective's work
runs on gloo's own threads, so only a completed call's `time.process_time` delta holds all of it) and adds that
delta to a `DpCommClock`. On CPU ranks the main thread is blocked meanwhile and burns no CPU (a gloo wait is ~2 ms of
CPU per s, docs/scale_down.md "Fair on a shared CPU"), so the delta is the collective's own CPU. Not timed here: the
all-reduce of ZeRO-0/1 gradients (FSDP2 calls `dist.all_reduce` directly, with no custom hook), FSDP2's copy-in /
copy-out around each collective, and the ZeRO-1 optimizer's all-gather (inside the optimizer step's own timing).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FSDPModule
from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather, DefaultReduceScatter


@dataclass
class DpCommClock:
    """Accumulated CPU seconds (process_time: every thread) in timed data-parallel collectives since the last reset."""

    cpu_s: float = 0.0
    calls: int = 0
    wall_s: float = 0.0  # perf_counter seconds of the same calls

    def reset(self) -> None:
        self.cpu_s, self.calls, self.wall_s = 0.0, 0, 0.0

    def add(self, c0: float, t0: float) -> None:
        """One call that started at process_time c0 and perf_counter t0 has completed."""
        self.cpu_s += time.process_time() - c0
        self.wall_s += time.perf_counter() - t0
        self.calls += 1


class TimedAllGather(DefaultAllGather):
    """FSDP2's default all-gather, run to completion and its CPU seconds added to `clock`."""

    def __init__(self, clock: DpCommClock) -> None:
        super().__init__()
        self.clock = clock

    def __call__(self, output_tensor, input_tensor, group: dist.ProcessGroup, async_op: bool = False):
        c0, t0 = time.process_time(), time.perf_counter()
        super().__call__(output_tensor, input_tensor, group, async_op=False)  # None: copy-out waits on nothing
        self.clock.add(c0, t0)
        return None


class TimedReduceScatter(DefaultReduceScatter):
    """FSDP2's default reduce-scatter (already synchronous in foreach_reduce), its CPU seconds added to `clock`."""

    def __init__(self, clock: DpCommClock) -> None:
        super().__init__()
        self.clock = clock

    def __call__(self, output_tensor, input_tensor, group: dist.ProcessGroup, op, async_op: bool = False):
        c0, t0 = time.process_time(), time.perf_counter()
        super().__call__(output_tensor, input_tensor, group, op, async_op=False)
        self.clock.add(c0, t0)
        return None


def install_dp_comm_timers(parts: list[nn.Module], clock: DpCommClock) -> int:
    """Time every FSDP2 unit's all-gather and reduce-scatter of `parts` into `clock`; returns how many units."""
    units = [m for part in parts for m in part.modules() if isinstance(m, FSDPModule)]
    for unit in units:
        unit.set_custom_all_gather(TimedAllGather(clock))
        unit.set_custom_reduce_scatter(TimedReduceScatter(clock))
    return len(units)

"""FSDP2's own collectives, timed by `autotune netbench` next to the bare ones (docs/scale_down.md "The composition").

netbench's bare collectives are issued back to back on one buffer; a collective that FSDP2 issues inside a training
step costs a CPU (gloo) rank several times more per call (measured on the tiny model's dp-2 replicas: ~1.5 ms of CPU
per all-gather or reduce-scatter, where the bare ring's α is 0.13-0.2 ms per step). A scale-down replica that holds no
data-parallel rank (a tp-2 replica on 2 ranks) measures none of its target's FSDP2 traffic, so the composition prices
it; this module measures what it is priced with, as a measurement and not a constant: a tiny module wrapped by
`fully_shard` exactly as bench_model wraps a block (bench_model/parallel/data_parallel.py: bf16 parameters gathered,
fp32 gradients reduced, MixedPrecisionPolicy), its forward and backward run on every rank at once (a 2-D mesh of
world/g groups of g consecutive ranks: every rank busy, as in a training step), and each all-gather and
reduce-scatter timed through the trainer's own hooks (bench_model/parallel/comm_timing.py: the call run to
completion, `process_time` of every thread, so the gloo threads' work is in it). One sample per (collective, g,
size): the busiest rank's mean CPU and wall seconds per call, with `size_bytes` the full (unsharded) buffer as in
netbench's samples. `netbench.fit_result` fits the same ring α-β to their CPU seconds (`fsdp_cpu_fits`).
"""

from __future__ import annotations

import time
from typing import Any

FSDP_COLLECTIVES = ("all_gather", "reduce_scatter")
PARAM_BYTES, REDUCE_BYTES = 2, 4  # bf16 gathered parameters, fp32 reduced gradients (MixedPrecisionPolicy below)


def fsdp_group_sizes(world: int, local: int) -> list[int]:
    """The FSDP group sizes timed: powers of two >= 2 dividing the ranks on one host (`local`; groups of consecutive
    ranks then stay on one host: the intra link class) and the world."""
    return [g for g in (2, 4, 8, 16) if g <= local and local % g == 0 and world % g == 0]


# a bench_model Llama block's parameter tensors, FSDP2's copy-in / copy-out work per tensor: wq, wk, wv, wo, w1, w2, w3
# and the two RMSNorm weights (bench_model/model.py)
BLOCK_TENSORS = 9


def _unit(torch, numel: int, mesh) -> Any:
    """A module of BLOCK_TENSORS parameters of `numel` elements in all, like a bench_model block; with `mesh`
    fully_shard-ed as the trainer does at ZeRO-3 (reshard after forward: one all-gather in the forward, one in the
    backward, one reduce-scatter), without it the same module unsharded (the baseline its compute is taken from)."""
    from torch import nn
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            n = numel // BLOCK_TENSORS
            self.ws = nn.ParameterList([nn.Parameter(torch.full((n,), 1e-3)) for _ in range(BLOCK_TENSORS)])

        def forward(self, x):
            return sum((w * x[: w.numel()].to(w.dtype)).sum() for w in self.ws)

    mod = Block()
    if mesh is not None:
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        fully_shard(mod, mesh=mesh, reshard_after_forward=True, mp_policy=mp)
    return mod


def _cpu_per_iter(mod, x, iters: int, warmup: int, clocks: dict) -> float:
    """CPU seconds (process_time, every thread) per forward + backward of `mod`, the clocks reset after warm-up."""
    for _ in range(warmup):
        mod(x).backward()
    for c in clocks.values():
        c.reset()
    c0 = time.process_time()
    for _ in range(iters):
        mod(x).backward()
    return (time.process_time() - c0) / iters


def measure_fsdp(sizes: list[int], iters: int, warmup: int, device: Any, local: int) -> list[dict[str, Any]]:
    """Every rank calls it; rank 0 returns one sample per (collective, group size, size), others []. A sample's
    `cpu_time_s` is the collective's own CPU per call (the trainer's hooks) plus an equal share of what else FSDP2
    spends around its calls (copy-in, copy-out, casts, hooks: the wrapped unit's forward + backward less the unwrapped
    one's and less the collectives), so the fit prices a call as FSDP2 issues it."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from bench_model.parallel.comm_timing import DpCommClock, TimedAllGather, TimedReduceScatter

    world, samples = dist.get_world_size(), []
    for g in fsdp_group_sizes(world, local):
        mesh = init_device_mesh(device.type, (world // g, g), mesh_dim_names=("rep", "shard"))["shard"]
        for size in sizes:
            # `size` bytes gathered (bf16), each tensor's length divisible by g
            numel = max(g, size // PARAM_BYTES // (g * BLOCK_TENSORS)) * g * BLOCK_TENSORS
            x = torch.ones(numel, device=device)
            plain = _cpu_per_iter(_unit(torch, numel, None), x, iters, warmup, {})
            mod = _unit(torch, numel, mesh)
            clocks = {"all_gather": DpCommClock(), "reduce_scatter": DpCommClock()}
            mod.set_custom_all_gather(TimedAllGather(clocks["all_gather"]))
            mod.set_custom_reduce_scatter(TimedReduceScatter(clocks["reduce_scatter"]))
            wrapped = _cpu_per_iter(mod, x, iters, warmup, clocks)
            calls = sum(c.calls for c in clocks.values()) / iters  # 2 all-gathers and 1 reduce-scatter
            around = max(wrapped - plain - sum(c.cpu_s for c in clocks.values()) / iters, 0.0) / calls
            dist.barrier()
            per_call = [c.cpu_s / max(c.calls, 1) + around for c in clocks.values()]
            per_call += [c.wall_s / max(c.calls, 1) for c in clocks.values()]
            worst = torch.tensor(per_call, dtype=torch.float64, device=device)
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)
            if dist.get_rank() == 0:
                for j, op in enumerate(FSDP_COLLECTIVES):
                    nbytes = numel * (PARAM_BYTES if op == "all_gather" else REDUCE_BYTES)
                    samples.append(
                        dict(
                            collective=op,
                            link_class="intra",
                            group_size=g,
                            size_bytes=nbytes,
                            time_s=float(worst[2 + j]),
                            cpu_time_s=float(worst[j]),
                        )
                    )
            del mod
    return samples

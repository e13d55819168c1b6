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

from typing import Any

FSDP_COLLECTIVES = ("all_gather", "reduce_scatter")
PARAM_BYTES, REDUCE_BYTES = 2, 4  # bf16 gathered parameters, fp32 reduced gradients (MixedPrecisionPolicy below)


def fsdp_group_sizes(world: int, local: int) -> list[int]:
    """The FSDP group sizes timed: powers of two >= 2 dividing the ranks on one host (`local`; groups of consecutive
    ranks then stay on one host: the intra link class) and the world."""
    return [g for g in (2, 4, 8, 16) if g <= local and local % g == 0 and world % g == 0]


def _unit(torch, numel: int, mesh) -> Any:
    """A module holding one flat parameter of `numel` elements, fully_shard-ed like a bench_model block at ZeRO-3
    (reshard after forward: one all-gather in the forward, one in the backward, one reduce-scatter)."""
    from torch import nn
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    class Flat(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.full((numel,), 1e-3))

        def forward(self, x):
            return (self.w * x).sum()

    mod = Flat()
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    fully_shard(mod, mesh=mesh, reshard_after_forward=True, mp_policy=mp)
    return mod


def measure_fsdp(sizes: list[int], iters: int, warmup: int, device: Any, local: int) -> list[dict[str, Any]]:
    """Every rank calls it; rank 0 returns one sample per (collective, group size, size), others []."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from bench_model.parallel.comm_timing import DpCommClock, TimedAllGather, TimedReduceScatter

    world, samples = dist.get_world_size(), []
    for g in fsdp_group_sizes(world, local):
        mesh = init_device_mesh(device.type, (world // g, g), mesh_dim_names=("rep", "shard"))["shard"]
        for size in sizes:
            numel = max(g, size // PARAM_BYTES // g * g)  # `size` bytes gathered, divisible by g
            mod = _unit(torch, numel, mesh)
            clocks = {"all_gather": DpCommClock(), "reduce_scatter": DpCommClock()}
            mod.set_custom_all_gather(TimedAllGather(clocks["all_gather"]))
            mod.set_custom_reduce_scatter(TimedReduceScatter(clocks["reduce_scatter"]))
            x = torch.ones(numel, device=device, dtype=torch.bfloat16)
            for i in range(warmup + iters):
                if i == warmup:
                    for c in clocks.values():
                        c.reset()
                mod(x).backward()
            dist.barrier()
            per_call = [c.cpu_s / max(c.calls, 1) for c in clocks.values()]
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

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
netbench's samples. The unit runs with plain parameters (link class `intra`) and with tp-sharded DTensor parameters
(`intra_tp2`, FSDP_TPS). `netbench.fit_result` fits the same ring α-β to their CPU seconds per class
(`fsdp_cpu_fits`).
"""

from __future__ import annotations

import time
from typing import Any

FSDP_COLLECTIVES = ("all_gather", "reduce_scatter")
PARAM_BYTES, REDUCE_BYTES = 2, 4  # bf16 gathered parameters, fp32 reduced gradients (MixedPrecisionPolicy below)


# tensor-parallel degrees of the unit's parameters: 1 (plain tensors) and 2 (each a DTensor sharded over a 2-rank tp
# group, FSDP2 over it on the dp mesh: 2-D FSDP + TP as bench_model runs tp > 1 with ZeRO-2/3, whose copy-in /
# copy-out and gradient handling dispatch through DTensor; measured on 8 gloo ranks: 2.5-3.0 ms of CPU per call at
# g = 4 against 1.7-2.7 ms for plain tensors of the same per-rank bytes)
FSDP_TPS = (1, 2)


def fsdp_link_class(tp: int) -> str:
    """The link class an FSDP2 sample is filed under: `intra` for plain parameters, `intra_tp<t>` for tp-sharded ones."""
    return "intra" if tp == 1 else f"intra_tp{tp}"


def fsdp_group_sizes(world: int, local: int, tp: int = 1) -> list[int]:
    """The FSDP group sizes timed at tensor-parallel degree `tp`: powers of two g >= 2 with g * tp dividing the ranks
    on one host (`local`; groups of consecutive ranks then stay on one host: the intra link class) and the world."""
    return [g for g in (2, 4, 8, 16) if g * tp <= local and local % (g * tp) == 0 and world % (g * tp) == 0]


# a bench_model Llama block's parameter tensors, FSDP2's copy-in / copy-out work per tensor: wq, wk, wv, wo, w1, w2, w3
# and the two RMSNorm weights (bench_model/model.py)
BLOCK_TENSORS = 9


def _unit(torch, numel: int, mesh, tp_mesh=None) -> Any:
    """A module of BLOCK_TENSORS parameters of `numel` elements in all, like a bench_model block; with `mesh`
    fully_shard-ed as the trainer does at ZeRO-3 (reshard after forward: one all-gather in the forward, one in the
    backward, one reduce-scatter), without it the same module unsharded (the baseline its compute is taken from).
    With `tp_mesh` every parameter is a DTensor sharded over it (`numel` elements per tp rank)."""
    from torch import nn
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor import Shard, distribute_tensor

    def param(n: int):
        t = torch.full((n * (tp_mesh.size() if tp_mesh is not None else 1),), 1e-3)
        return nn.Parameter(distribute_tensor(t, tp_mesh, [Shard(0)]) if tp_mesh is not None else t)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ws = nn.ParameterList([param(numel // BLOCK_TENSORS) for _ in range(BLOCK_TENSORS)])

        def forward(self, x):
            total = 0.0
            for w in self.ws:
                local = w.to_local() if hasattr(w, "to_local") else w
                total = total + (local * x[: local.numel()].to(local.dtype)).sum()
            return total

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
    """Every rank calls it; rank 0 returns one sample per (tp, collective, group size, size), others []. A sample's
    `cpu_time_s` is the collective's own CPU per call (the trainer's hooks) plus an equal share of what else FSDP2
    spends around its calls (copy-in, copy-out, casts, hooks: the wrapped unit's forward + backward less the unwrapped
    one's and less the collectives), so the fit prices a call as FSDP2 issues it."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from bench_model.parallel.comm_timing import DpCommClock, TimedAllGather, TimedReduceScatter

    world, samples = dist.get_world_size(), []
    groups = [(tp, g) for tp in FSDP_TPS for g in fsdp_group_sizes(world, local, tp)]
    for tp, g in groups:
        mesh = init_device_mesh(device.type, (world // (g * tp), g, tp), mesh_dim_names=("rep", "shard", "tp"))
        tp_mesh, mesh = (mesh["tp"] if tp > 1 else None), mesh["shard"]
        for size in sizes:
            # `size` bytes gathered (bf16), each tensor's length divisible by g
            numel = max(g, size // PARAM_BYTES // (g * BLOCK_TENSORS)) * g * BLOCK_TENSORS
            x = torch.ones(numel, device=device)
            plain = _cpu_per_iter(_unit(torch, numel, None, tp_mesh), x, iters, warmup, {})
            mod = _unit(torch, numel, mesh, tp_mesh)
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
                            link_class=fsdp_link_class(tp),
                            group_size=g,
                            size_bytes=nbytes,
                            time_s=float(worst[2 + j]),
                            cpu_time_s=float(worst[j]),
                        )
                    )
            del mod
    return samples

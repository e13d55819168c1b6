"""The rank side of `autotune netbench`: `python -m autotune.fitting.netbench_rank --spec SPEC.json --out RESULT.json` on every
rank, started by any launcher (torchrun locally, srun under SLURM, Ray actors) exactly like a training trial and under
the same protocol (docs/trial_protocol.md): rank 0 writes the samples to `RESULT.json.netbench.json`, then an `ok`
row to RESULT.json; a failing rank writes its err file.

Which link a group exercises comes from where its ranks run (hostnames gathered from every rank) and the cluster's NVLink
domain (cluster.nvlink_domain_size, whole nodes): `intra` groups are ranks of rank 0's domain (its host, unless the
domain spans several, as on GB200/GB300 NVL72), `inter` groups hold one rank per domain, so their traffic crosses the
inter-node fabric. Inside one domain only the intra class exists.
"""

from __future__ import annotations

import socket
import sys
import time
import warnings
from pathlib import Path
from typing import Any

GROUP_SIZES = (2, 4, 8, 16)
COLLECTIVES: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")
SIDECAR_SUFFIX = ".netbench.json"


def link_groups(hosts: list[str], hosts_per_domain: int = 1) -> list[tuple[str, tuple[int, ...]]]:
    """(link class, global ranks) of every group timed, given each rank's host: prefixes of 2, 4, 8, 16 and all of the
    ranks in rank 0's NVLink domain (`intra`), and of the first rank of every domain (`inter`). A domain is
    `hosts_per_domain` consecutive hosts in order of first appearance (cluster.nvlink_domain_size / gpus_per_node: 1 =
    a node; 18 trays on a GB200 NVL72, which a scheduler allocates as consecutive nodes of one rack — a site whose
    node order does not follow its racks should run netbench inside one domain). The p2p pair of a class is its first
    two ranks."""
    order: dict[str, int] = {}
    for host in hosts:
        order.setdefault(host, len(order))
    domain = [order[h] // max(1, hosts_per_domain) for h in hosts]
    first_of: dict[int, int] = {}
    for rank, d in enumerate(domain):
        first_of.setdefault(d, rank)
    local = [r for r, d in enumerate(domain) if d == domain[0]]
    leaders = list(first_of.values())
    groups = []
    for link, members in (("intra", local), ("inter", leaders)):
        for g in sorted({g for g in (*GROUP_SIZES, len(members)) if 2 <= g <= len(members)}):
            groups.append((link, tuple(members[:g])))
    return groups


def _time_op(dist, op: str, buf, out, group, members: tuple[int, ...], iters: int) -> tuple[float, float]:
    """(wall seconds, this rank's CPU seconds) per collective: time.process_time counts every thread of the process
    (gloo's I/O threads and the kernel's loopback TCP work done in its system calls), what a collective costs a CPU
    rank on top of its compute whether or not the wait overlaps anything (docs/scale_down.md "Fair on a shared CPU")."""
    rank = dist.get_rank()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(iters):
        if op == "all_reduce":
            dist.all_reduce(buf, group=group)
        elif op == "all_gather":
            dist.all_gather_into_tensor(out, buf, group=group)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(out, buf, group=group)
        elif op == "all_to_all":  # the MoE dispatch / combine (bench_model/parallel/expert_parallel.py)
            dist.all_to_all_single(out, buf, group=group)
        elif rank == members[0]:  # p2p ping-pong between the first two members: half a round trip is one transfer
            dist.send(buf, dst=members[1])
            dist.recv(buf, src=members[1])
        else:
            dist.recv(buf, src=members[0])
            dist.send(buf, dst=members[0])
    if buf.is_cuda:
        import torch

        torch.cuda.synchronize()
    dt, dc = (time.perf_counter() - t0) / iters, (time.process_time() - c0) / iters
    return (dt / 2, dc / 2) if op == "p2p" else (dt, dc)


def _time_group(
    dist, torch, op: str, members: tuple[int, ...], size: int, group, device, iters: int, warmup: int
) -> tuple[float, float] | None:
    """Time `op` for a buffer of `size` bytes (the full gathered/reduced buffer) on `members`; their first rank
    returns the slowest member's mean wall time and the busiest member's mean CPU time, every other rank None. Every
    rank of the world calls it (barrier)."""
    rank = dist.get_rank()
    result = None
    if rank in members:
        g = len(members)
        numel = max(g, size // 4 // g * g)  # fp32, divisible by g for the sharded collectives
        full = torch.ones(numel, dtype=torch.float32, device=device)
        shard = torch.empty(numel // g, dtype=torch.float32, device=device)
        pairs = {
            "all_gather": (shard, full),
            "reduce_scatter": (full, shard),
            "all_to_all": (full, torch.empty_like(full)),
        }
        buf, out = pairs.get(op, (full, None))
        _time_op(dist, op, buf, out, group, members, warmup)
        dt, dc = _time_op(dist, op, buf, out, group, members, iters)
        worst = torch.tensor([dt, dc], dtype=torch.float64, device=device)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=group)
        result = (float(worst[0]), float(worst[1])) if rank == members[0] else None
    dist.barrier()
    return result


def measure(sizes: list[int], iters: int, warmup: int, device: Any, hosts_per_domain: int = 1) -> dict[str, Any]:
    """Every collective on every group of `link_groups`, at every size; rank 0 returns the samples."""
    import torch
    import torch.distributed as dist

    # all_gather_into_tensor / reduce_scatter_tensor warn on new torch, but their successors do not exist in 2.6.
    warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")
    hosts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(hosts, socket.gethostname())
    layout = link_groups(hosts, hosts_per_domain)
    groups = {members: dist.new_group(list(members)) for _, members in layout}  # same order on every rank
    samples = []
    for op in COLLECTIVES:
        for link in ("intra", "inter"):
            chosen = [m for cls, m in layout if cls == link]
            for members in chosen[:1] if op == "p2p" else chosen:
                p2p = members[:2]
                for size in sizes:
                    t = _time_group(
                        dist,
                        torch,
                        op,
                        p2p if op == "p2p" else members,
                        size,
                        groups[p2p] if op == "p2p" else groups[members],
                        device,
                        iters,
                        warmup,
                    )
                    if t is not None and dist.get_rank() == 0:
                        samples.append(
                            dict(
                                collective=op,
                                link_class=link,
                                group_size=2 if op == "p2p" else len(members),
                                size_bytes=size,
                                time_s=t[0],
                                cpu_time_s=t[1],
                            )
                        )
    from autotune.fitting.netbench_fsdp import measure_fsdp

    # FSDP2's own collectives (per-call CPU as FSDP2 issues them), on groups of consecutive ranks of rank 0's host
    fsdp = measure_fsdp(sizes, iters, warmup, device, local=hosts.count(hosts[0]))
    return {"backend": dist.get_backend(), "hosts": sorted(set(hosts)), "samples": samples, "fsdp_samples": fsdp}


def netbench_body(spec: Any, out: Path, rank: int) -> dict[str, Any]:
    from autotune.results.schema import normalize_row, row_from_spec
    from bench_model.trial import init_distributed
    from launchers.protocol import utc_now, write_json_atomic

    started_at, t0 = utc_now(), time.perf_counter()
    device = init_distributed()
    params = dict(spec.netbench)
    hosts_per_domain = spec.cluster.fast_domain // spec.cluster.gpus_per_node  # NVLink domain in whole nodes
    sizes = [int(s) for s in params["sizes_bytes"]]
    result = measure(sizes, int(params["iters"]), int(params["warmup"]), device, hosts_per_domain)
    if rank != 0:
        return {}
    write_json_atomic(out.with_name(out.name + SIDECAR_SUFFIX), result)
    row = row_from_spec(spec)
    row.update(
        status="ok",
        started_at=started_at,
        ended_at=utc_now(),
        wall_s=time.perf_counter() - t0,
        hostname=socket.gethostname(),
    )
    return normalize_row(row)


def main(argv: list[str] | None = None) -> int:
    from launchers.protocol import run_protocol

    return run_protocol(argv, netbench_body, prog="autotune.fitting.netbench_rank")


if __name__ == "__main__":
    from launchers.protocol import exit_with

    exit_with(main(sys.argv[1:]))

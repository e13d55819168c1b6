"""Measure the fabric: time all-reduce, all-gather, reduce-scatter and point-to-point with real torch.distributed
(gloo on CPU, NCCL on GPUs), fit α (latency, s) and β (bandwidth, bytes/s) per link class, and write them into a
cluster preset so the performance model prices communication with the user's real links.

Model: t = steps · α + busbw_factor · n / β — the ring model autotune.perf.ring_s prices collectives with, so the
fitted numbers mean there exactly what they meant here. n is the buffer size in bytes; the bus factor converts the
algorithm's data volume to what crosses each link (nccl-tests doc/PERFORMANCE.md: all-reduce 2(g-1)/g, all-gather and
reduce-scatter (g-1)/g with n the full gathered buffer, send/recv 1); steps are the ring's latency-bound hops
(all-reduce 2(g-1), all-gather and reduce-scatter g-1, send/recv 1). One (α, β) pair then describes a link class
across collectives and group sizes.

Link classes: `intra` (ranks on one host / NVLink) and `inter` (across nodes). On one host — `--backend local` — only
the intra class is measurable; the preset keeps its inter-node numbers and `NetbenchResult.notes` says so.
"""
from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COLLECTIVES: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "p2p")
DEFAULT_SIZES_BYTES: tuple[int, ...] = (1 << 12, 1 << 16, 1 << 20, 1 << 22)


def ring_steps(collective: str, group_size: int) -> int:
    """Latency-bound hops of a ring collective (autotune.perf.ring_s)."""
    bus_factor(collective, group_size)  # validates the name
    g = group_size
    return 2 * (g - 1) if collective == "all_reduce" else (1 if collective == "p2p" else g - 1)


def bus_factor(collective: str, group_size: int) -> float:
    """nccl-tests PERFORMANCE.md: busbw = algbw × factor."""
    g = group_size
    if collective == "all_reduce":
        return 2.0 * (g - 1) / g
    if collective in ("all_gather", "reduce_scatter"):
        return (g - 1) / g
    if collective == "p2p":
        return 1.0
    raise ValueError(f"collective={collective!r} must be one of {', '.join(COLLECTIVES)}")


@dataclass(frozen=True)
class Sample:
    collective: str
    link_class: str
    group_size: int
    size_bytes: int
    time_s: float


@dataclass(frozen=True)
class LinkFit:
    link_class: str
    latency_s: float
    bw_bytes_per_s: float
    num_samples: int
    rel_rms_error: float


@dataclass(frozen=True)
class NetbenchResult:
    world_size: int
    backend: str
    samples: tuple[Sample, ...]
    fits: dict[str, LinkFit]
    per_collective: dict[str, LinkFit] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "backend": self.backend, "notes": list(self.notes),
                "fits": {k: dataclasses.asdict(v) for k, v in self.fits.items()},
                "per_collective": {k: dataclasses.asdict(v) for k, v in self.per_collective.items()},
                "samples": [dataclasses.asdict(s) for s in self.samples]}


def fit_alpha_beta(samples: list[Sample], link_class: str) -> LinkFit:
    """Bounded least squares for t = k·α + x/β with k = ring steps, x = bus_factor·n, α >= 0, 1/β > 0. Relative
    residuals (each sample divided by its time) so the small-message latency counts as much as the large-message
    bandwidth."""
    import numpy as np

    x = np.array([bus_factor(s.collective, s.group_size) * s.size_bytes for s in samples], dtype=float)
    t = np.array([s.time_s for s in samples], dtype=float)
    k = np.array([ring_steps(s.collective, s.group_size) for s in samples], dtype=float)
    if len(samples) < 2 or np.ptp(x) == 0:
        raise ValueError(f"netbench: link class {link_class!r} needs samples at >= 2 message sizes to fit alpha and beta")
    w = 1.0 / t
    a_mat = np.stack([k, x], axis=1) * w[:, None]
    (alpha, inv_beta), *_ = np.linalg.lstsq(a_mat, t * w, rcond=None)
    if alpha < 0:  # bound active: refit bandwidth alone through the origin
        alpha, inv_beta = 0.0, float(np.sum(w * x * w * t) / np.sum((w * x) ** 2))
    if inv_beta <= 0:  # latency-dominated over the whole range: bandwidth unmeasurable, take the largest message's
        inv_beta = float(np.max(t / x))
        alpha = float(max(0.0, np.min((t - x * inv_beta) / k)))
    pred = k * alpha + x * inv_beta
    rel = float(np.sqrt(np.mean(((pred - t) / t) ** 2)))
    return LinkFit(link_class, float(alpha), float(1.0 / inv_beta), len(samples), rel)


def _time_op(dist, op: str, buf, out, group, peer: int | None, iters: int) -> float:
    rank = dist.get_rank()
    t0 = time.perf_counter()
    for _ in range(iters):
        if op == "all_reduce":
            dist.all_reduce(buf, group=group)
        elif op == "all_gather":
            dist.all_gather_into_tensor(out, buf, group=group)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(out, buf, group=group)
        elif rank == 0:  # p2p ping-pong: half a round trip is one transfer
            dist.send(buf, dst=peer)
            dist.recv(buf, src=peer)
        else:
            dist.recv(buf, src=0)
            dist.send(buf, dst=0)
    if buf.is_cuda:
        import torch
        torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / iters
    return dt / 2 if op == "p2p" else dt


def _bench_group(dist, torch, op: str, g: int, size: int, group, device, iters: int, warmup: int) -> float | None:
    """Time `op` on the first g ranks for a buffer of `size` bytes (the full gathered/reduced buffer); rank 0 returns
    the slowest rank's mean time, others None. All ranks of the world call it (new_group / barrier need everyone)."""
    rank = dist.get_rank()
    if rank >= g:
        dist.barrier()
        return None
    numel = max(g, size // 4 // g * g)  # fp32, divisible by g for the sharded collectives
    full = torch.ones(numel, dtype=torch.float32, device=device)
    shard = torch.empty(numel // g, dtype=torch.float32, device=device)
    buf, out = {"all_gather": (shard, full), "reduce_scatter": (full, shard)}.get(op, (full, None))
    peer = 1 if op == "p2p" else None
    _time_op(dist, op, buf, out, group, peer, warmup)
    dt = _time_op(dist, op, buf, out, group, peer, iters)
    worst = torch.tensor([dt], dtype=torch.float64, device=device)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=group)
    dist.barrier()
    return float(worst.item()) if rank == 0 else None


def _worker(rank: int, world: int, store_path: str, out_path: str, sizes: list[int], iters: int, warmup: int) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only (127.0.0.1)
    import warnings

    import torch
    import torch.distributed as dist

    # all_gather_into_tensor / reduce_scatter_tensor warn on new torch, but their successors do not exist in 2.6.
    warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed")
    cuda = torch.cuda.is_available() and torch.cuda.device_count() >= world
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    store = dist.FileStore(store_path, world)
    dist.init_process_group("nccl" if cuda else "gloo", store=store, rank=rank, world_size=world)
    group_sizes = sorted({g for g in (2, 4, 8, 16, world) if 2 <= g <= world})
    groups = {g: dist.new_group(list(range(g))) for g in group_sizes}
    samples = []
    for op in COLLECTIVES:
        for g in ([2] if op == "p2p" else group_sizes):
            for size in sizes:
                t = _bench_group(dist, torch, op, g, size, groups[g], device, iters, warmup)
                if t is not None:
                    samples.append(dict(collective=op, link_class="intra", group_size=g, size_bytes=size, time_s=t))
    if rank == 0:
        tmp = out_path + ".tmp"
        Path(tmp).write_text(json.dumps({"backend": dist.get_backend(), "samples": samples}))
        os.replace(tmp, out_path)
    dist.barrier()
    dist.destroy_process_group()


def run_netbench(num_ranks: int, sizes_bytes: tuple[int, ...] = DEFAULT_SIZES_BYTES, iters: int = 5,
                 warmup: int = 2) -> NetbenchResult:
    """Start `num_ranks` local processes (one host), time every collective, fit α/β. Rendezvous through a FileStore;
    gloo's own connections stay on the loopback interface."""
    if num_ranks < 2:
        raise ValueError(f"--gpus={num_ranks} must be >= 2 (a collective needs two ranks)")
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="netbench-") as tmp:
        out = os.path.join(tmp, "result.json")
        mp.start_processes(_worker, args=(num_ranks, os.path.join(tmp, "store"), out, list(sizes_bytes), iters,
                                          warmup), nprocs=num_ranks, start_method="spawn", join=True)
        raw = json.loads(Path(out).read_text())
    samples = tuple(Sample(**s) for s in raw["samples"])
    by_op = {op: fit_alpha_beta([s for s in samples if s.collective == op], "intra") for op in COLLECTIVES}
    notes = ("one host: only the intra-node link class is measurable; inter-node alpha/beta keep the preset's values",)
    return NetbenchResult(num_ranks, raw["backend"], samples, {"intra": fit_alpha_beta(list(samples), "intra")},
                          by_op, notes)


def apply_to_cluster(cluster: Any, result: NetbenchResult) -> Any:
    """The ClusterSpec with measured links. Measured bandwidth is what the links really deliver, so comm_efficiency
    becomes 1.0 (the perf model multiplies bandwidth by it)."""
    changes: dict[str, Any] = {"comm_efficiency": 1.0}
    if "intra" in result.fits:
        changes.update(intra_node_bw_bytes_per_s=result.fits["intra"].bw_bytes_per_s,
                       intra_node_latency_s=result.fits["intra"].latency_s)
    if "inter" in result.fits:
        changes.update(inter_node_bw_bytes_per_s=result.fits["inter"].bw_bytes_per_s,
                       inter_node_latency_s=result.fits["inter"].latency_s)
    return dataclasses.replace(cluster, **changes)


def check_preset_path(path: str | Path, flag: str = "-o") -> Path:
    """Refuse, before any work, a preset path the config tree could never load (Hydra reads `<name>.yaml`)."""
    path = Path(path)
    if path.suffix != ".yaml" or path.stem in ("", ".") or path.is_dir():
        raise ValueError(f"{flag}={str(path)!r} must be a file name ending in .yaml (a cluster preset)")
    return path


def preset_usage(path: Path) -> str:
    """How to use a written preset: `cluster=<stem>` only works from the config tree's cluster/ folder."""
    from autotune.config import SEARCH_SPACES

    if path.resolve().parent == (SEARCH_SPACES / "cluster").resolve():
        return f"use: cluster={path.stem}"
    return f"to use it, copy it to {SEARCH_SPACES / 'cluster'}/ and pass cluster={path.stem}"


def write_cluster_preset(cluster: Any, path: str | Path, header: str) -> Path:
    """A preset YAML that `cluster=<stem>` loads: every ClusterSpec field, a comment header saying where the numbers
    came from. Written atomically; the preset's `name` is the file stem so the config tree finds it."""
    import yaml

    path = Path(path)
    doc = dataclasses.asdict(dataclasses.replace(cluster, name=path.stem))
    text = "".join(f"# {line}\n" for line in header.strip().splitlines()) + yaml.safe_dump(doc, sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return path

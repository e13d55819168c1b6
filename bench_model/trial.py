"""One trial on this rank: process group, layout, timed loop, and (on rank 0) the result row."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from autotune.core.trial import TrialSpec
from autotune.results.schema import normalize_row, row_from_spec
from bench_model import metrics
from bench_model.trainer import build_trainer, run_steps
from bench_model.trainer_moe import experts_path


def init_distributed() -> torch.device:
    """NCCL on CUDA, gloo otherwise (trial protocol "Backend")."""
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return device


def run_trial(spec: TrialSpec, fault_hook: Callable[[], None] = lambda: None) -> dict[str, Any]:
    started_at, t_start = metrics.utc_now(), time.perf_counter()
    device = init_distributed()
    peak_flops = _peak_flops_per_rank(spec, device)
    trainer = build_trainer(spec, device, lambda: _cap_memory(spec, device))
    local_losses = run_steps(trainer, fault_hook)
    path = experts_path(trainer.parts)
    if path and dist.get_rank() == 0:  # which expert GEMM ran (docs: bench_model/moe.py); the row has no column
        print(f"bench_model: routed experts ran as {path} (torch {torch.__version__}, {device.type})", file=sys.stderr)
    row = _summarise(spec, trainer, local_losses, peak_flops)
    dist.barrier()
    row.update(started_at=started_at, ended_at=metrics.utc_now(), wall_s=time.perf_counter() - t_start)
    return normalize_row(row)


def _cap_memory(spec: TrialSpec, device: torch.device) -> None:
    """memory_limit_bytes (CPU only): RLIMIT_AS = address space after start-up (process groups and their threads
    created) + the limit, so the model, optimizer and activations of the layout are what can exceed it."""
    if spec.memory_limit_bytes is not None and device.type == "cpu":
        metrics.limit_address_space(spec.memory_limit_bytes)


def _peak_flops_per_rank(spec: TrialSpec, device: torch.device) -> float:
    """CUDA: the cluster preset's datasheet peak for the compute dtype. CPU: measured matmul FLOP/s, averaged over
    ranks measuring concurrently (see metrics.measured_matmul_peak_flops)."""
    if device.type == "cuda":
        return spec.cluster.peak_flops(spec.train.compute_dtype)
    local = torch.tensor(metrics.measured_matmul_peak_flops(spec.train.compute_dtype), dtype=torch.float64)
    dist.all_reduce(local)
    return float(local) / dist.get_world_size()


def _global_losses(local_losses: list[torch.Tensor], spec: TrialSpec) -> list[float]:
    """Sum over ranks of last-stage losses / (dp*cp*tp): the mean over the global batch (TP ranks hold equal copies,
    dp and cp ranks equal token counts)."""
    stacked = torch.stack([x.detach().float().reshape(()) for x in local_losses]).to(torch.float64)
    dist.all_reduce(stacked)
    p = spec.plan
    return [float(x) for x in (stacked / (p.dp * p.cp * p.tp)).cpu()]


def _summarise(spec: TrialSpec, trainer, local_losses: list[torch.Tensor], peak_flops: float) -> dict[str, Any]:
    losses = _global_losses(local_losses, spec)
    alloc, reserved = metrics.peak_memory_bytes(trainer.device)
    mem = torch.tensor([alloc, reserved], dtype=torch.float64)
    if trainer.device.type == "cuda":
        mem = mem.to(trainer.device)
    dist.all_reduce(mem, op=dist.ReduceOp.MAX)  # worst rank
    times = torch.tensor(trainer.step_times_s, dtype=torch.float64)
    if trainer.device.type == "cuda":
        times = times.to(trainer.device)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)  # a step ends when its slowest rank ends
    step_times = [float(x) for x in times.cpu()]
    cpu = torch.tensor(trainer.step_cpu_s, dtype=torch.float64, device=times.device)
    dist.all_reduce(cpu, op=dist.ReduceOp.MAX)  # the busiest rank's CPU seconds per step
    opt = torch.tensor(trainer.optimizer_cpu_s, dtype=torch.float64, device=times.device)
    dist.all_reduce(opt, op=dist.ReduceOp.MAX)  # the same for the optimizer step alone
    dp_comm, threads = None, None
    if trainer.dp_comm_cpu_s:  # CPU ranks: the same for FSDP2's sharded data-parallel collectives (comm_timing.py)
        dp_comm = torch.tensor(trainer.dp_comm_cpu_s, dtype=torch.float64)
        dist.all_reduce(dp_comm, op=dist.ReduceOp.MAX)
        threads = torch.tensor(trainer.comm_thread_cpu_s, dtype=torch.float64)  # and on the collectives' threads
        dist.all_reduce(threads, op=dist.ReduceOp.MAX)
    ends = None
    if getattr(trainer, "ends_cpu_s", None):  # CPU ranks, pp = 1: the model's ends (bench_model/ends_timing.py)
        ends = torch.tensor(trainer.ends_cpu_s, dtype=torch.float64)
        dist.all_reduce(ends, op=dist.ReduceOp.MAX)
        ends = [statistics.fmean(float(x) for x in ends[:, i]) for i in range(3)]
    host = None
    if trainer.device.type == "cpu":  # every rank decides alike (bench_model/trainer.py run_steps)
        h = trainer.host
        vals = [h.cpu_s, float(h.ops), float(h.collectives), h.collective_s, h.ends_cpu_s] if h else [-1.0] * 5
        host = torch.tensor(vals, dtype=torch.float64)
        dist.all_reduce(host, op=dist.ReduceOp.MAX)  # the busiest rank's host seconds and operation count
    row = row_from_spec(spec)
    world = spec.plan.world_size
    row.update(
        status="ok",
        losses=losses,
        final_loss=losses[-1] if losses else None,
        timed_steps=len(step_times),
        peak_mem_allocated_bytes=int(mem[0]),
        peak_mem_reserved_bytes=int(mem[1]),
        torch_version=torch.__version__,
        code_version=metrics.code_version(),
        hostname=metrics.hostname(),
    )
    if step_times:
        mean_s = statistics.fmean(step_times)
        tokens_per_s = spec.train.global_batch_tokens / mean_s
        flops_per_gpu = spec.model.flops_per_token(spec.train.seq_len) * tokens_per_s / world
        row.update(
            step_time_mean_s=mean_s,
            step_time_std_s=statistics.pstdev(step_times),
            step_cpu_time_mean_s=statistics.fmean(float(x) for x in cpu.cpu()),
            optimizer_cpu_time_mean_s=statistics.fmean(float(x) for x in opt.cpu()),
            dp_comm_cpu_time_mean_s=None if dp_comm is None else statistics.fmean(float(x) for x in dp_comm),
            comm_thread_cpu_time_mean_s=None if threads is None else statistics.fmean(float(x) for x in threads),
            host_cpu_time_s=None if host is None or host[0] < 0 else float(host[0]),
            host_ops_per_step=None if host is None or host[1] < 0 else int(host[1]),
            comm_ops_per_step=None if host is None or host[2] < 0 else int(host[2]),
            comm_op_cpu_s=None if host is None or host[3] < 0 else float(host[3]),
            embed_cpu_time_mean_s=None if ends is None else ends[0],
            head_cpu_time_mean_s=None if ends is None else ends[1],
            ends_comm_thread_cpu_time_mean_s=None if ends is None else ends[2],
            ends_host_cpu_time_s=None if host is None or host[4] < 0 or ends is None else float(host[4]),
            tokens_per_s=tokens_per_s,
            tokens_per_s_per_gpu=tokens_per_s / world,
            tflops_per_gpu=flops_per_gpu / 1e12,
            mfu=flops_per_gpu / peak_flops,
        )
    return row

"""Measurements around the training loop: the CPU matmul peak used for MFU, peak memory, and provenance fields."""

from __future__ import annotations

import resource
import time

import torch

# the rows' provenance stamps (utc_now, code_version, hostname) are the trial protocol's: launchers/protocol.py, one
# format for the rows the trainer writes and the rows a launcher builds
from launchers.protocol import code_version, hostname, utc_now  # noqa: F401

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def measured_matmul_peak_flops(compute_dtype: str, size: int = 512, reps: int = 10) -> float:
    """FLOP/s of a square matmul on this CPU rank, best of `reps` (2*n^3 FLOPs each). All ranks measure at the same
    time, so cores shared by ranks are shared here too: the peak is what one rank can get while its peers run."""
    dtype = _DTYPES.get(compute_dtype, torch.float32)
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    a @ b  # warm-up (thread pool, packing buffers)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * size**3 / best


def peak_memory_bytes(device: torch.device) -> tuple[int, int]:
    """(allocated, reserved) peak of this rank. CUDA: allocator max_memory_allocated / max_memory_reserved.
    CPU: there is no allocator counter, so both are the process's peak resident set size (ru_maxrss, KiB on Linux),
    which includes the Python/torch runtime."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), torch.cuda.max_memory_reserved(device)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return rss, rss


def address_space_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmSize not found in /proc/self/status")


def limit_address_space(extra_bytes: int) -> None:
    """RLIMIT_AS = current size + extra: allocations beyond it fail with ENOMEM (trial protocol memory_limit_bytes)."""
    limit = address_space_bytes() + int(extra_bytes)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))


def step_peak_bytes(fn) -> int:
    """Peak bytes allocated while `fn()` runs, above what was live before it. CUDA: the caching allocator's
    max_memory_allocated. CPU: the running sum of the CPU allocator's alloc/free events recorded by
    torch.profiler(profile_memory=True), which also sees the buffers of Inductor-generated code (benchmarks only:
    profiling slows the step; time it separately)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    events, _ = cpu_memory_events(fn)
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


def cpu_memory_events(fn):
    """(the CPU allocator's (start_ns, bytes) events while `fn()` runs, sorted: + allocations, - frees; fn's result),
    recorded by torch.profiler(profile_memory=True), which also sees the buffers of Inductor-generated code."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    events = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and str(e.device_type()) == "DeviceType.CPU"
    )
    return events, out

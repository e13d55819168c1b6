"""The rank side of `autotune devbench`: `python -m autotune.fitting.devbench_rank --spec SPEC.json --out RESULT.json` on
every rank, started by any launcher exactly like a training trial (docs/trial_protocol.md, as netbench_rank). Every
rank times the shapes of `autotune.fitting.devbench.devbench_shapes` on its own device at once; rank 0 gathers the
times, keeps each shape's median over the ranks, writes them to `RESULT.json.devbench.json`, then an `ok` row.

Timing: `iters` runs after 2 warm-up runs, wall clock around a device synchronize (CUDA kernels are asynchronous);
each GEMM sample is fwd (X W), dgrad (dY W^T) and wgrad (X^T dY) of one linear, 3 x 2mkn FLOPs, as the speed model
counts a linear's forward + backward (Korthikanti et al. 2022 Sec 4: backward = 2x forward).
"""

from __future__ import annotations

import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _timed(torch, device, fn, iters: int) -> float:
    for _ in range(2):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) / iters


def _gemm_sample(torch, device, dtype, g, iters: int) -> dict[str, Any]:
    x = torch.randn(g.m, g.k, device=device, dtype=dtype)
    w = torch.randn(g.k, g.n, device=device, dtype=dtype)
    dy = torch.randn(g.m, g.n, device=device, dtype=dtype)
    t = _timed(torch, device, lambda: (x @ w, dy @ w.t(), x.t() @ dy), iters)
    return dict(kind="gemm", name=g.name, m=g.m, k=g.k, n=g.n, flops=3 * 2.0 * g.m * g.k * g.n, time_s=t)


def _fp8_sample(torch, device, g, iters: int) -> dict[str, Any] | None:
    """The same three GEMMs in FP8 e4m3 with tensorwise scales (torch._scaled_mm: cuBLASLt, the kernel torchao's
    Float8Linear calls; its second operand must be column-major). None where the build or device cannot run it."""
    if device.type != "cuda" or not hasattr(torch, "_scaled_mm") or torch.cuda.get_device_capability(device) < (8, 9):
        return None
    f8 = torch.float8_e4m3fn
    one = torch.ones((), device=device, dtype=torch.float32)

    def mm(a, b):  # a @ b^T: a row-major (m, k), b row-major (n, k), so b^T is the column-major operand
        return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    x = torch.randn(g.m, g.k, device=device).to(f8)
    wt = torch.randn(g.n, g.k, device=device).to(f8)  # W^T
    w = torch.randn(g.k, g.n, device=device).to(f8)  # W: dgrad dY W^T = mm(dy, w)
    dy = torch.randn(g.m, g.n, device=device).to(f8)
    dyt = torch.randn(g.n, g.m, device=device).to(f8)
    xt = torch.randn(g.k, g.m, device=device).to(f8)
    try:
        t = _timed(torch, device, lambda: (mm(x, wt), mm(dy, w), mm(xt, dyt)), iters)
    except RuntimeError:  # a cuBLASLt shape/layout the build refuses: not measured, said so by the fit
        return None
    return dict(kind="gemm_fp8", name=g.name, m=g.m, k=g.k, n=g.n, flops=3 * 2.0 * g.m * g.k * g.n, time_s=t)


def _grouped_sample(torch, device, dtype, shapes, iters: int) -> dict[str, Any]:
    """The routed experts' up projection (h -> F) as bench_model runs it (bench_model/moe.py): torch._grouped_mm over
    `groups` experts of `rows` rows where the build supports it, else one GEMM per expert; fwd + dgrad + wgrad."""
    from bench_model.moe import grouped_mm_supported

    e, r, k, n = shapes.expert_groups, shapes.expert_rows, shapes.expert_k, shapes.expert_n
    x = torch.randn(e * r, k, device=device, dtype=dtype)
    w = torch.randn(e, n, k, device=device, dtype=dtype)  # stacked like nn.Linear weights (bench_model: w1 (E, F, H))
    dy = torch.randn(e * r, n, device=device, dtype=dtype)
    offs = torch.arange(r, e * r + 1, r, device=device, dtype=torch.int32)
    if grouped_mm_supported(x, k, n):
        wt = torch.randn(e, k, n, device=device, dtype=dtype)  # the (E, H, F) weight of dgrad's product, same layout

        def run():  # operands as bench_model passes them: the stacked weights transposed (column-major views)
            torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
            torch._grouped_mm(dy, wt.transpose(-2, -1), offs=offs)
            for i in range(e):  # wgrad per expert: torch._grouped_mm's K-grouped form is not on every build
                x[i * r : (i + 1) * r].t() @ dy[i * r : (i + 1) * r]

        path = "grouped_mm"
    else:

        def run():
            for i in range(e):
                xs, ds = x[i * r : (i + 1) * r], dy[i * r : (i + 1) * r]
                (xs @ w[i].t(), ds @ w[i], xs.t() @ ds)

        path = "loop"
    t = _timed(torch, device, run, iters)
    return dict(kind="grouped_gemm", name=path, m=r, k=k, n=n, groups=e, flops=3 * 2.0 * e * r * k * n, time_s=t)


def _attention_sample(torch, device, dtype, shapes, iters: int) -> dict[str, Any]:
    """Causal F.scaled_dot_product_attention forward + backward on one sequence (FlashAttention / cuDNN on CUDA, the
    math or flash CPU kernel on CPU). FLOPs: 3.5 forward-equivalents (the backward is 2.5 forwards:
    attention_terms.ATTN_BWD_FWD_RATIO) of 2 matmuls x 2 s^2 d per head, halved by the causal mask (attention_terms.attention_s)."""
    import torch.nn.functional as F

    hh, s, d = shapes.attn_heads, shapes.attn_seq, shapes.attn_head_dim
    q, k, v = (torch.randn(1, hh, s, d, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(1, hh, s, d, device=device, dtype=dtype)

    def run():
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)

    t = _timed(torch, device, run, iters)
    return dict(
        kind="attention", name="sdpa_causal", m=s, k=d, n=hh, flops=3.5 * 2.0 * 2.0 * s * s * d * hh / 2, time_s=t
    )


def _hbm_sample(torch, device, nbytes: int, iters: int) -> dict[str, Any]:
    src = torch.empty(nbytes // 4, device=device, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)
    t = _timed(torch, device, lambda: dst.copy_(src), iters)
    return dict(kind="hbm", name="copy", m=0, k=0, n=0, bytes=2.0 * src.numel() * 4, time_s=t)


def measure(spec: Any, device: Any) -> list[dict[str, Any]]:
    """Every sample of this rank (the shapes of devbench_shapes for the spec's model and sequence length)."""
    import torch

    from autotune.fitting.devbench import devbench_shapes

    params = dict(spec.devbench)
    iters, cap = int(params.get("iters", 5)), params.get("cap")
    dtype = getattr(torch, _DTYPES.get(spec.train.compute_dtype, "float32"))
    shapes = devbench_shapes(spec.model, spec.train.seq_len, 1, None if cap is None else int(cap))
    samples = [_gemm_sample(torch, device, dtype, g, iters) for g in shapes.gemms]
    if spec.cluster.peak_flops_fp8:
        samples += [s for g in shapes.gemms if (s := _fp8_sample(torch, device, g, iters)) is not None]
    if shapes.expert_groups:
        samples.append(_grouped_sample(torch, device, dtype, shapes, iters))
    samples.append(_attention_sample(torch, device, dtype, shapes, iters))
    samples.append(_hbm_sample(torch, device, shapes.hbm_bytes, iters))
    return samples


def merge_ranks(per_rank: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each sample with its median time over the ranks (ranks time the same shapes in the same order)."""
    return [{**s, "time_s": statistics.median(r[i]["time_s"] for r in per_rank)} for i, s in enumerate(per_rank[0])]


def devbench_body(spec: Any, out: Path, rank: int) -> dict[str, Any]:
    import torch.distributed as dist

    from autotune.results.schema import normalize_row, row_from_spec
    from bench_model.metrics import utc_now
    from bench_model.trial import init_distributed
    from launchers.protocol import write_json_atomic

    started_at, t0 = utc_now(), time.perf_counter()
    device = init_distributed()
    samples = measure(spec, device)
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, samples)
    if rank != 0:
        return {}
    import torch

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    from autotune.fitting.devbench import SIDECAR_SUFFIX

    write_json_atomic(out.with_name(out.name + SIDECAR_SUFFIX), {"device": name, "samples": merge_ranks(gathered)})
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

    return run_protocol(argv, devbench_body, prog="autotune.fitting.devbench_rank")


if __name__ == "__main__":
    from launchers.protocol import exit_with

    exit_with(main(sys.argv[1:]))

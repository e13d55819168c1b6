"""ZeRO1AdamW's bucketed all-gather (bench_model/parallel/data_parallel.py `gather_buckets`) on 2 real gloo ranks:
with a 1 KiB cap the 5 parameters (one larger than the cap, two not divisible by the world) go out in 3 buckets, and
after two steps every rank holds exactly what plain torch.optim.AdamW gives one process on the same gradients. The
equivalence suite's tiny models fit in one 256 MiB bucket, so it does not cover several."""

from __future__ import annotations

import socket

import torch
import torch.multiprocessing as mp

SHAPES = [(8, 8), (3, 5), (40, 16), (7,), (16, 4)]  # 64, 15, 640, 7, 64 elements
CAP = 1024  # bytes: receive buffers of n=2 x chunks x 4 bytes


def free_port() -> int:
    # defined here, not imported from conftest: a spawned child re-imports this module by name
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _params_and_grads():
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s)) for s in SHAPES]
    grads = [[torch.randn(s) for s in SHAPES] for _ in range(2)]
    return params, grads


def _rank(rank: int, port: int, out) -> None:
    import torch.distributed as dist

    from bench_model.parallel import data_parallel

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        data_parallel.GATHER_BUCKET_BYTES = CAP
        params, grads = _params_and_grads()
        opt = data_parallel.ZeRO1AdamW(params, dist.group.WORLD, lr=0.1)
        calls = []
        flat = data_parallel._all_gather_flat
        data_parallel._all_gather_flat = lambda recv, send, group: calls.append(recv.numel()) or flat(recv, send, group)
        for step_grads in grads:
            for p, g in zip(params, step_grads):
                p.grad = g.clone()
            opt.step()
        out.put((rank, [p.detach().tolist() for p in params], calls))
    finally:
        dist.destroy_process_group()


def test_bucket_ranges():
    from bench_model.parallel.data_parallel import gather_buckets

    chunks = [32, 8, 320, 4, 32]  # ceil(numel / 2) of SHAPES
    # 2 x 4 bytes per chunk element: 256, 64 (together 320 <= 1024), 2560 alone (> cap), 32 + 256 together
    assert gather_buckets(chunks, 2, 4, CAP) == [(0, 2), (2, 3), (3, 5)]
    assert gather_buckets(chunks, 2, 4, 10**9) == [(0, 5)]  # the old single flat buffer
    assert gather_buckets([], 2, 4, CAP) == []


def test_bucketed_zero1_matches_adamw():
    params, grads = _params_and_grads()
    ref = torch.optim.AdamW(params, lr=0.1)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g.clone()
        ref.step()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank, args=(r, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    for _, got, calls in results:
        assert (
            calls == [80, 640, 72] * 2
        )  # receive elements per bucket, per step: 3 buckets of at most 1 KiB or one param
        for g, p in zip(got, params):
            torch.testing.assert_close(torch.tensor(g), p.detach(), rtol=1e-6, atol=1e-7)

"""torch.distributed.pipelining's own buffers (autotune/predict/frameworks/base.py `torch_pipeline_buffers`, the
torchtitan profile's [PPBUF]) measured on 2 real gloo ranks with torch's PipelineStage and Schedule1F1B: after one
step the first stage keeps m gradient receive buffers and the last stage m forward receive buffers, each one
micro-batch's inter-stage activation, and at the first backward the first stage's `fwd_cache` holds the outputs of
its pp in-flight micro-batches. The model's count is compared with the bytes of the tensors the stage holds."""

from __future__ import annotations

import socket

import torch
import torch.multiprocessing as mp

M, MBS, SEQ, H = 4, 2, 8, 16  # micro-batches, micro-batch size, tokens per sequence, hidden size
HIDDEN_BYTES = MBS * SEQ * H * 4  # one micro-batch's fp32 inter-stage activation


def free_port() -> int:
    # defined here, not imported from conftest: a spawned child re-imports this module by name
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bytes(infos) -> int:
    return sum(i.buffer.numel() * i.buffer.element_size() for i in infos if i.buffer is not None)


def _rank(rank: int, port: int, out) -> None:
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        torch.manual_seed(rank)
        block = torch.nn.Sequential(torch.nn.Linear(H, H), torch.nn.ReLU(), torch.nn.Linear(H, H))
        stage = PipelineStage(block, rank, 2, torch.device("cpu"))
        sched = Schedule1F1B(stage, n_microbatches=M, loss_fn=lambda y, t: ((y - t) ** 2).mean())
        seen = []
        bwd = stage.backward_one_chunk
        stage.backward_one_chunk = lambda *a, **k: seen.append(len(stage.fwd_cache)) or bwd(*a, **k)
        x, t = torch.randn(M * MBS, SEQ, H), torch.randn(M * MBS, SEQ, H)
        sched.step(x) if rank == 0 else sched.step(target=t)
        fwd = sum(_bytes(v) for v in stage.args_recv_info.values() if not all(i.is_root_arg for i in v))
        grad = sum(_bytes(v) for v in stage.grad_recv_info.values())
        out.put((rank, fwd, grad, seen[0]))
    finally:
        dist.destroy_process_group()


def test_pipeline_stage_buffers_match_torch():
    from autotune.predict.frameworks.base import torch_pipeline_buffers
    from autotune.predict.schedule import inflight_microbatches

    ctx = mp.get_context("spawn")
    q, port = ctx.SimpleQueue(), free_port()
    procs = [ctx.Process(target=_rank, args=(r, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    got = dict((r, rest) for r, *rest in (q.get() for _ in procs))
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    # rank 0 (first stage): no forward receive buffer, M gradient receive buffers, pp = 2 outputs in flight
    assert got[0] == [0, M * HIDDEN_BYTES, 2]
    # rank 1 (last stage): M forward receive buffers, no gradient receive buffer
    assert got[1] == [M * HIDDEN_BYTES, 0, 1]
    for rank, (fwd, grad, cached) in got.items():
        inflight = float(inflight_microbatches(2, 1, M, 0, rank))
        model = torch_pipeline_buffers(HIDDEN_BYTES, M, inflight, rank, 2, 1, False)
        outputs = cached * HIDDEN_BYTES if rank == 0 else 0  # the last stage's output is the loss input (logits term)
        assert float(model) == fwd + grad + outputs
    # full recompute: the in-flight receive buffers are the first block's checkpointed input, counted there
    assert float(torch_pipeline_buffers(HIDDEN_BYTES, M, 1.0, 1, 2, 1, True)) == (M - 1) * HIDDEN_BYTES

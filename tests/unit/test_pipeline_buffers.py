"""torch.distributed.pipelining's own buffers (autotune/predict/frameworks/base.py `torch_pipeline_buffers`, priced by
the bench_model and torchtitan profiles) measured with torch's real PipelineStage and ScheduleInterleaved1F1B, its two
stages on one gloo rank (in-process, no spawn): after one step the first stage keeps m gradient receive buffers and
the second m forward receive buffers, each one micro-batch's inter-stage activation, allocated once for the step's m
micro-batches; during the step `fwd_cache` holds each in-flight micro-batch's stage output (that shape). A stage's
buffers do not depend on which rank hosts it, so the two stages are pipeline ranks 0 and 1 of a pp = 2 layout."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

M, MBS, SEQ, H = 4, 2, 8, 16  # micro-batches, micro-batch size, tokens per sequence, hidden size
HIDDEN_BYTES = MBS * SEQ * H * 4  # one micro-batch's fp32 inter-stage activation


def _bytes(infos) -> int:
    return sum(i.buffer.numel() * i.buffer.element_size() for i in infos if i.buffer is not None)


@pytest.fixture
def one_rank():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_pipeline_stage_buffers_match_torch(one_rank):
    from torch.distributed.pipelining import PipelineStage, ScheduleInterleaved1F1B

    from autotune.predict.frameworks.base import torch_pipeline_buffers

    torch.manual_seed(0)
    stages = [PipelineStage(torch.nn.Linear(H, H), i, 2, torch.device("cpu")) for i in range(2)]
    sched = ScheduleInterleaved1F1B(stages, n_microbatches=M, loss_fn=lambda y, t: ((y - t) ** 2).mean())
    cached = []
    bwd = stages[0].backward_one_chunk
    stages[0].backward_one_chunk = lambda *a, **k: (
        cached.append([tuple(t.shape) for outs, _ in stages[0].fwd_cache.values() for t in outs]) or bwd(*a, **k)
    )
    sched.step(torch.randn(M * MBS, SEQ, H), target=torch.randn(M * MBS, SEQ, H))
    measured = [
        sum(_bytes(v) for v in s.args_recv_info.values()) + sum(_bytes(v) for v in s.grad_recv_info.values())
        for s in stages
    ]
    assert measured == [M * HIDDEN_BYTES, M * HIDDEN_BYTES]  # first stage: gradient buffers; second: forward ones
    for rank in (0, 1):  # the persistent part (nothing in flight)
        assert float(torch_pipeline_buffers(HIDDEN_BYTES, M, 0.0, rank, 2, 1, False)) == measured[rank]
    # at the first stage's first backward its outputs of the micro-batches in flight are cached, each (MBS, SEQ, H)
    assert cached[0] and set(cached[0]) == {(MBS, SEQ, H)}
    # with full recompute the in-flight forward receive buffers are the first block's checkpointed input (not extra)
    assert float(torch_pipeline_buffers(HIDDEN_BYTES, M, 1.0, 1, 2, 1, True)) == (M - 1) * HIDDEN_BYTES
    # ...and a rank's in-flight outputs come on top: rank 0 of 1F1B pp = 2 holds 2
    assert float(torch_pipeline_buffers(HIDDEN_BYTES, M, 2.0, 0, 2, 1, False)) == (M + 2) * HIDDEN_BYTES

"""The chunked loss (bench_model.loss.chunked_cross_entropy) under tensor + sequence parallelism on 2 real gloo
ranks: sequence-sharded hidden states (Shard(1) DTensor), a column-parallel head with vocab-sharded logits and
`loss_parallel`, 6 chunks of 3 tokens (the last one short). Loss and head gradient equal F.cross_entropy on the full
logits of one process (the equivalence suite's micro-batches fit in one chunk, so it does not cover several)."""

from __future__ import annotations

import socket

import torch
import torch.multiprocessing as mp
import torch.nn.functional as F


def free_port() -> int:
    # defined here, not imported from conftest: a spawned child re-imports this module by name, and in a whole-suite
    # run another suite's conftest may come first on sys.path
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _reference():
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 64, bias=False)
    h = torch.randn(2, 8, 16)
    labels = torch.randint(0, 64, (2, 8))
    return head, h, labels


def _rank(rank: int, port: int, out) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        loss_parallel,
        parallelize_module,
    )

    from bench_model import loss as bm_loss

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        bm_loss.LOSS_CHUNK_TOKENS = 3
        head, h, labels = _reference()
        mesh = init_device_mesh("cpu", (2,))
        parallelize_module(
            head, mesh, ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False)
        )
        h_local = h.chunk(2, dim=1)[rank].clone().requires_grad_(True)
        h_dt = DTensor.from_local(h_local, mesh, [Shard(1)], run_check=False)
        with loss_parallel():
            loss = bm_loss.chunked_cross_entropy(head, h_dt, labels)
            loss.backward()
        value = loss.to_local() if isinstance(loss, DTensor) else loss
        # plain lists: tensors sent through a queue die with the sending process
        out.put((rank, float(value.detach()), head.weight.grad.full_tensor().tolist(), h_local.grad.tolist()))
    finally:
        dist.destroy_process_group()


def test_chunked_loss_under_tp_sp_matches_full_logits():
    head, h, labels = _reference()
    h.requires_grad_(True)
    ref = F.cross_entropy(head(h).flatten(0, 1), labels.flatten(0, 1))
    ref_value = float(ref.detach())
    ref.backward()
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
    for rank, value, w_grad, h_grad in results:
        assert abs(value - ref_value) <= 1e-6 * ref_value
        torch.testing.assert_close(torch.tensor(w_grad), head.weight.grad, rtol=1e-5, atol=1e-7)
        # the gradient of each rank's sequence shard (the head's all-gather backward reduce-scatters it)
        torch.testing.assert_close(torch.tensor(h_grad), h.grad.chunk(2, dim=1)[rank], rtol=1e-5, atol=1e-7)

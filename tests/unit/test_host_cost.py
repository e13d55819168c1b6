"""bench_model/host_cost.py: the operation counter and the per-operation seconds a scale-down composition keeps
apart from the FLOP-scaled compute (docs/scale_down.md). One in-process rank on the fake backend."""

from __future__ import annotations

import torch
import torch.distributed as dist

from bench_model.host_cost import OpCounter, host_cost


def test_counts_plain_dtensor_and_collective_ops_and_prices_them():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        x, y = torch.ones(4), torch.ones(4)
        dx = DTensor.from_local(x, mesh, [Replicate()], run_check=False)
        with OpCounter() as c:
            x + y  # one plain op
            x * y  # another
            dx * dx  # one DTensor op: its local mul runs out of the mode's sight
        assert (c.plain_ops, c.dtensor_ops, c.collectives) == (2, 1, 0)
        h = host_cost(c, mesh, torch.device("cpu"))
        # seconds per tiny op are positive and small (a dispatch, not arithmetic); a one-rank mesh has no collective
        assert 0 < h.plain_op_s < 1e-2 and 0 < h.dtensor_op_s < 1e-1 and h.collective_s == 0.0
        assert h.ops == 3 and h.cpu_s == 2 * h.plain_op_s + h.dtensor_op_s
    finally:
        dist.destroy_process_group()

"""CPU offload in the bench trainer (bench_model/parallel/offload.py), on gloo CPU ranks.

On this CPU-only box the host and the device are the same memory pool: offload=optimizer copies gradients into separate
host tensors, steps an fp32 master there and copies the result back, and offload=params runs FSDP2's
CPUOffloadPolicy (which does run on a CPU/gloo mesh), but nothing crosses PCIe. So these tests check the numerics
and the plumbing of the code path (the same 5-step loss curve as one rank, within the equivalence suite's 1e-4),
not the transfer; on a CUDA device the same code moves the states to pinned host memory. No GPU was available to
this test suite."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import POOL, make_spec, max_rel_diff

from autotune.core.errors import SpecError

FP32_TOL = 1e-4  # tests/distributed/test_equivalence.py explains the bar
pytestmark = pytest.mark.timeout(1800)


def _plan(**kw) -> tuple[str, ...]:
    return tuple(f"plan.{k}={v}" for k, v in kw.items())


WORLD2 = {
    "dp2_zero1_offload_optimizer": _plan(zero_stage=1, micro_batch_size=2, offload="optimizer"),
    "dp2_zero2_offload_optimizer": _plan(zero_stage=2, offload="optimizer"),  # 2 micro-batches
    "dp2_zero3_offload_optimizer": _plan(zero_stage=3, micro_batch_size=2, offload="optimizer"),
    "dp2_zero3_offload_params": _plan(zero_stage=3, offload="params"),  # 2 micro-batches: grads accumulate on host
}


POOL.register(2, WORLD2)  # run in the suite's one world-2 launch (conftest.LayoutPool)


@pytest.fixture(scope="module")
def world2(pool_rows):
    return pool_rows(2)


@pytest.mark.parametrize("name", sorted(WORLD2))
def test_offload_code_path_on_cpu_equivalence(name, world2, reference_fp32):
    """Same pool on CPU: checks numerics and plumbing of the offload path against the 1-rank curve, not a transfer."""
    row = world2[name]
    assert row["status"] == "ok", row
    assert row["offload"] == WORLD2[name][-1].split("=")[1]  # the layout that ran is the offload layout
    rel = max_rel_diff(reference_fp32, row["losses"])
    assert rel < FP32_TOL, f"max relative loss difference {rel:.2e} (ref {reference_fp32}, got {row['losses']})"


def test_trainer_refuses_params_offload_without_full_sharding():
    """offload=params needs FSDP2-sharded parameters (zero_stage=3): one-line SpecError naming the field, before
    any process group or memory is touched."""
    import torch

    from bench_model.trainer import build_trainer

    spec = make_spec(2, "fp32", _plan(zero_stage=2))
    spec = dataclasses.replace(spec, plan=dataclasses.replace(spec.plan, offload="params"))
    with pytest.raises(SpecError, match=r"plan\.offload=params with zero_stage=2.*zero_stage=3") as e:
        build_trainer(spec, torch.device("cpu"))
    assert "\n" not in str(e.value)

"""FP8 linears (plan.fp8, torchao 0.18 float8 training): torch 2.13 runs torch._scaled_mm on CPU, so the real fp8
path (Float8Linear casts + fp8 GEMM) runs here. e4m3 keeps 3 mantissa bits (a cast rounds by up to 2^-4 relative), but
each output sums many products with independent rounding errors and the loss averages the outputs, so the curve stays
within the bf16 layout tolerance of bf16's (2e-3, tests/distributed/test_bf16.py; measured on the tiny model over 5
steps: tensorwise 1.7e-4, rowwise 7.6e-5, the same order as bf16 vs fp32, 7e-5). The in-process runs are
deterministic, so a silent bf16 run would give the bf16 losses exactly: the fp8 curve must differ from them. dp=2
ZeRO-2 fp8 (FSDP2 over Float8Linear) and tp=2 + SP fp8 (DTensor shards of Float8Linear) must match the 1-rank fp8
curve within the same tolerance.

Shape: torch._scaled_mm on CPU is a scalar reference kernel (~36 ms per tiny GEMM, 120 of the 290 s of one 8-layer
rowwise run, measured with cProfile), so the cost is its FLOPs. The assertions are about the fp8 code path (casts,
scales, FSDP2 and DTensor over Float8Linear), not about depth or sequence length, so these runs use 2 layers and 2
sequences of 64 tokens (16x fewer GEMM FLOPs; every dimension still a multiple of 16 as _scaled_mm needs). Measured
at this shape: tensorwise 1.9e-4 and rowwise 2.8e-4 from bf16, dp2 ZeRO-2 3.4e-8 and tp2 + SP 1.4e-4 from the
1-rank fp8 curve, all still 7x or more below the 2e-3 bar."""

from __future__ import annotations

import pytest
from conftest import POOL, make_spec, max_rel_diff, run_in_process

FP8_TOL = 2e-3
LAYOUT_TOL = 2e-3
SMALL = ("model.num_layers=2", "train.seq_len=64", "train.global_batch_size=2")


@pytest.fixture(scope="module")
def reference_bf16_small() -> list[float]:
    return run_in_process(make_spec(1, "bf16", SMALL))["losses"]


@pytest.fixture(scope="module")
def reference_fp8() -> list[float]:
    return run_in_process(make_spec(1, "bf16", (*SMALL, "plan.fp8=tensorwise")))["losses"]


def test_fp8_one_rank_close_to_bf16_and_not_bf16(reference_bf16_small, reference_fp8):
    rel = max_rel_diff(reference_bf16_small, reference_fp8)
    assert rel < FP8_TOL, rel
    assert rel > 1e-6, "fp8 losses equal the bf16 losses: the linears did not run in fp8"


def test_fp8_rowwise_one_rank_close_to_bf16(reference_bf16_small, reference_fp8):
    got = run_in_process(make_spec(1, "bf16", (*SMALL, "plan.fp8=rowwise")))["losses"]
    assert max_rel_diff(reference_bf16_small, got) < FP8_TOL
    assert got != reference_fp8  # rowwise scales are not the tensorwise ones: a different recipe really ran


LAYOUTS = {
    "dp2_zero2_fp8": (*SMALL, "plan.zero_stage=2", "plan.fp8=tensorwise"),
    "tp2_sp_fp8": (*SMALL, "plan.tp=2", "plan.sequence_parallel=true", "plan.fp8=tensorwise"),
}
POOL.register(2, LAYOUTS, precision="bf16")  # run in the suite's one world-2 launch (conftest.LayoutPool)


def test_fp8_dp2_and_tp2_match_one_rank_fp8(reference_fp8, pool_rows):
    rows = pool_rows(2)
    for name in LAYOUTS:
        row = rows[name]
        assert row["fp8"] == "tensorwise", name
        assert max_rel_diff(reference_fp8, row["losses"]) < LAYOUT_TOL, name

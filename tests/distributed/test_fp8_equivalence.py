"""FP8 linears (plan.fp8, torchao 0.18 float8 training): torch 2.13 runs torch._scaled_mm on CPU, so the real fp8
path (Float8Linear casts + fp8 GEMM) runs here. e4m3 keeps 3 mantissa bits (a cast rounds by up to 2^-4 relative), but
each output sums many products with independent rounding errors and the loss averages the outputs, so the curve stays
within the bf16 layout tolerance of bf16's (2e-3, tests/distributed/test_bf16.py; measured on the tiny model over 5
steps: tensorwise 1.7e-4, rowwise 7.6e-5, the same order as bf16 vs fp32, 7e-5). The in-process runs are
deterministic, so a silent bf16 run would give the bf16 losses exactly: the fp8 curve must differ from them. dp=2
ZeRO-2 fp8 (FSDP2 over Float8Linear) and tp=2 + SP fp8 (DTensor shards of Float8Linear) must match the 1-rank fp8
curve within the same tolerance (measured: tp2 8.97e-5)."""

from __future__ import annotations

import pytest
from conftest import make_spec, max_rel_diff, run_in_process, run_layouts

FP8_TOL = 2e-3
LAYOUT_TOL = 2e-3


@pytest.fixture(scope="module")
def reference_fp8() -> list[float]:
    return run_in_process(make_spec(1, "bf16", ("plan.fp8=tensorwise",)))["losses"]


def test_fp8_one_rank_close_to_bf16_and_not_bf16(reference_bf16, reference_fp8):
    rel = max_rel_diff(reference_bf16, reference_fp8)
    assert rel < FP8_TOL, rel
    assert rel > 1e-6, "fp8 losses equal the bf16 losses: the linears did not run in fp8"


def test_fp8_rowwise_one_rank_close_to_bf16(reference_bf16):
    got = run_in_process(make_spec(1, "bf16", ("plan.fp8=rowwise",)))["losses"]
    assert max_rel_diff(reference_bf16, got) < FP8_TOL


def test_fp8_dp2_and_tp2_match_one_rank_fp8(reference_fp8, tmp_path):
    specs = {
        "dp2_zero2_fp8": make_spec(2, "bf16", ("plan.zero_stage=2", "plan.fp8=tensorwise")),
        "tp2_sp_fp8": make_spec(2, "bf16", ("plan.tp=2", "plan.sequence_parallel=true", "plan.fp8=tensorwise")),
    }
    rows = run_layouts(specs, tmp_path)
    for name, row in rows.items():
        assert max_rel_diff(reference_fp8, row["losses"]) < LAYOUT_TOL, name

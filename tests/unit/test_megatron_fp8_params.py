"""Megatron's --fp8-param-gather (train.fp8_param_gather; [FP8P] in autotune/predict/frameworks/megatron.py): the
block linears' weights stored as Transformer Engine FP8 tensors and all-gathered as such, against hand-computed bytes.

Llama-3.1-405B (meta-llama config.json: h 16384, 128 query heads x 128, 8 KV heads, ffn 53248, 126 layers) at TP4,
PP16 x VP4 with the embedding and loss accounted in the split (128 slots / 64 stages = 2 layers per stage, 1 on the
first and last): pipeline rank 1 holds 8 layers. One layer's linear weights: Q and O 16384^2 each, K and V
16384 x 1024 each, gate / up / down 3 x 16384 x 53248 = 536,870,912 + 33,554,432 + 2,617,245,696 = 3,187,671,040;
/ TP4 = 796,917,760; x 8 layers = 6,375,342,080 weights on the rank (the embedding lives on rank 0, the head on 15).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.plan_arrays import FP8_CODE, arrays_from_plans
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.predict.memory import memory_arrays
from autotune.predict.perf import param_gather_bytes
from autotune.spec.config import load_config

RANK1_WEIGHTS = 6_375_342_080  # module doc


@functools.cache
def _cfg(cluster: str):
    return load_config(["model=llama-3.1-405b", f"cluster={cluster}", "train.framework=megatron"])


def _params(cluster: str, fp8: str, gather: bool) -> float:
    cfg = _cfg(cluster)
    train = dataclasses.replace(cfg.train, global_batch_size=1536, seq_len=8192, fp8_param_gather=gather)
    plan = ParallelPlan(
        dp=4,
        tp=4,
        pp=16,
        vpp=4,
        zero_stage=1,
        micro_batch_size=1,
        grad_accum_steps=384,
        sequence_parallel=True,
        pp_schedule="interleaved_1f1b",
        fp8=fp8,
        pp_split_embedding=True,
        pp_split_loss=True,
    )  # fmt: skip  (NeMo 26.02 GB200 row: Megatron-Bridge llama31_405b_pretrain_256gpu_gb200_fp8cs_config)
    mem = memory_arrays(arrays_from_plans([plan]), cfg.model, train, cfg.cluster)
    assert int(mem["worst_pp_rank"][0]) == 1  # the 8-layer rank: the weights below are its
    return float(mem["params"][0])


@pytest.mark.parametrize(
    ("cluster", "fp8", "without", "with_gather"),
    [
        # Blackwell per-tensor FP8: bf16 weight + 1 B cached FP8 copy [TE-WS] -> the 1 B FP8 weight alone [FP8P]
        ("gb200-nvl72", "tensorwise", 1.0, -1.0),
        # Hopper (TN-only FP8 GEMMs): the copy is data + transpose, 2 B; FP8 weights keep both: 2 B, as bf16
        ("h100-sxm-80gb", "tensorwise", 2.0, 0.0),
        # MXFP8: row- and column-wise quantizations, 2 x (1 + 1/32) = 2.0625 B, cached or as the weight itself
        ("gb200-nvl72", "mxfp8", 2.0625, 0.0625),
        # NVFP4 (2 x (1/2 + 1/16) = 1.125 B cached): its --fp4-param-gather is not fp8_param_gather
        ("gb200-nvl72", "nvfp4", 1.125, 1.125),
    ],
)
def test_te_weight_bytes_per_recipe(cluster, fp8, without, with_gather):
    """Bytes per rank-1 weight beyond the bf16-only layout (plan.fp8=none): the cache, or the FP8 weights."""
    bf16 = _params(cluster, "none", False)
    assert _params(cluster, "none", True) == bf16  # no FP8 recipe: no FP8 weights to gather
    assert _params(cluster, fp8, False) - bf16 == pytest.approx(RANK1_WEIGHTS * without)
    assert _params(cluster, fp8, True) - bf16 == pytest.approx(RANK1_WEIGHTS * with_gather)


def test_fp8_param_gather_saves_5_94_gib_on_the_405b_gb200_rank():
    """NeMo 26.02 row: 6,375,342,080 x (3 - 1) B = 11.875 GiB less than bf16 weights with TE's cache; 5.9375 GiB less
    than bf16 weights alone."""
    saved = _params("gb200-nvl72", "none", False) - _params("gb200-nvl72", "tensorwise", True)
    assert saved / 2**30 == pytest.approx(5.9375, abs=1e-4)


def test_param_all_gather_bytes():
    """10 parameters, 8 of them block-linear weights: bf16 2 x 2 + FP8 8 x 1 = 12 B under tensorwise; MXFP8 gathers
    bf16 into the grad buffer (2 x 10 = 20 B), as does every layout without the flag."""
    train = TrainSpec(seq_len=8, global_batch_size=8, param_dtype="bf16", framework="megatron", fp8_param_gather=True)
    arr = {"fp8": np.array([FP8_CODE[x] for x in ("tensorwise", "mxfp8", "none")])}
    np.testing.assert_allclose(param_gather_bytes(arr, train, np.full(3, 10.0), 8.0), [12.0, 20.0, 20.0])
    off = dataclasses.replace(train, fp8_param_gather=False)
    np.testing.assert_allclose(param_gather_bytes(arr, off, np.full(3, 10.0), 8.0), [20.0, 20.0, 20.0])


def test_fp8_param_gather_outside_megatron_is_a_one_line_error():
    with pytest.raises(SpecError, match=r"train.fp8_param_gather=True with train.framework=bench_model"):
        TrainSpec(seq_len=8, global_batch_size=8, fp8_param_gather=True)


def test_nemo_rows_take_fp8_param_gather_from_the_recipe():
    """Megatron-Bridge rows with an FP8 / MXFP8 recipe (mixed_precision.py sets fp8_param_gather), not NVFP4's, not
    BF16's, not the NeMo 24.07 rows (NeMo 1.0, not read)."""
    from autotune.fitting.nemo_runs import load_nemo_rows

    runs = {r.row: r for r in load_nemo_rows()[0]}
    assert runs[246].train.fp8_param_gather and runs[246].plan.fp8 == "tensorwise"  # 26.02 GB200 405B FP8
    assert runs[244].train.fp8_param_gather and runs[244].plan.fp8 == "mxfp8"
    assert not runs[206].train.fp8_param_gather and runs[206].plan.fp8 == "nvfp4"
    nemo1 = [r for r in runs.values() if r.plan.fp8 == "tensorwise" and not r.train.fp8_param_gather]
    assert nemo1 and all(r.cluster == "h100-sxm-80gb" for r in nemo1)


def test_gpt_oss_h100_row_takes_its_recipes_micro_batch():
    """Row 292 (NeMo 25.11, 64 H100, PP4 EP8) says mbs 4, ga 2: 16 x 4 x 2 = 128 sequences, not its gbs 512; the
    r0.2.0 recipe runs mbs 1 (nemo_runs.RECIPE_MBS): ga 512 / 16 = 32."""
    from autotune.fitting.nemo_runs import load_nemo_rows

    run = {r.row: r for r in load_nemo_rows()[0]}[292]
    assert (run.plan.dp, run.plan.micro_batch_size, run.plan.grad_accum_steps) == (16, 1, 32)

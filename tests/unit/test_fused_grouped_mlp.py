"""Transformer Engine's fused grouped MLP (train.fused_grouped_mlp) and FP8 attention (train.fp8_attention) in the
step-time model, against hand-computed bytes, and the NeMo rows that run them (autotune/fitting/nemo_fused_mlp.py,
read off Megatron-Bridge v0.5.1 / v0.6.0 performance configs)."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.core.errors import SpecError
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.fit_reference import load_preset
from autotune.fitting.nemo_fused_mlp import recipe_fp8_attention, recipe_fused_grouped_mlp
from autotune.fitting.run_types import preset_model
from autotune.predict import perf
from autotune.predict.perf_terms import memory_bound_s


def _train(**kw) -> TrainSpec:
    return TrainSpec(seq_len=4096, global_batch_size=1280, framework="megatron", moe_routing="balanced", **kw)


def _moe_s(fp8: str, fused: bool) -> float:
    """One GPT-OSS-120B MoE layer's moe_compute on GB200, the NeMo 26.06 MXFP8 layout (ep 64, mbs 4, no recompute)."""
    plan = ParallelPlan(dp=64, tp=1, pp=1, ep=64, micro_batch_size=4, grad_accum_steps=5, fp8=fp8, compile=True)
    train = _train(fused_grouped_mlp=fused)
    lt = perf._layer_terms(arrays_from_plans([plan]), preset_model("gpt-oss-120b"), train, load_preset("gb200-nvl72"))
    return float(lt["moe_compute"][0])


def test_fused_mlp_drops_the_routed_activation_and_the_two_inner_casts_by_hand():
    """mbs 4 x 4096 tokens x top-4 = 65,536 copies on the rank (balanced routing, imbalance 1), F = 2880, bf16 (c 2),
    no recompute (3 passes of the memory-bound kernels). Activation: read fc1's 2F, write F per copy and pass:
    65536 x 3 x 2 x 2880 x 3 = 3,397,386,240 bytes. Casts (TE's split_quantize of fc2's input F and fc1's
    grad_output 2F): 65536 x 3 x 2880 elements, each read at 2 bytes and written as 2 MXFP8 copies of 1 + 1/32 bytes:
    x 4.0625 = 2,300,313,600 bytes. GPT-OSS's eager clamp (glu_clamp.py): 65536 x 2880 x 18 x 2 = 6,794,772,480
    bytes. All go into the grouped GEMMs' epilogues (TE ops/fused/grouped_mlp.py)."""
    act = 65536 * 3 * 2 * 2880 * 3
    casts = 65536 * 3 * 2880 * (2 + 2 * (1 + 1 / 32))
    clamp = 65536 * 2880 * 18 * 2
    assert act == 3_397_386_240 and casts == pytest.approx(2_300_313_600)
    gb200 = load_preset("gb200-nvl72")
    saved = _moe_s("mxfp8", False) - _moe_s("mxfp8", True)
    assert saved == pytest.approx(float(memory_bound_s(act + casts + clamp, gb200)), rel=1e-9)


def test_fused_mlp_needs_a_block_scaled_recipe():
    """TE's `fuse_grouped_mlp_ops` returns the ops unfused unless the recipe is MXFP8 or NVFP4: BF16 and tensorwise
    FP8 rows price the same with or without the flag; NVFP4 fuses too."""
    assert _moe_s("none", True) == _moe_s("none", False)
    assert _moe_s("tensorwise", True) == _moe_s("tensorwise", False)
    assert _moe_s("nvfp4", True) < _moe_s("nvfp4", False)


def test_fp8_attention_runs_the_attention_matmuls_at_the_fp8_peak():
    """H100 (no exponential term in the preset): attention is all matmul time, so FP8 attention takes exactly
    peak_bf16 / peak_fp8 = 989 / 1979 of it; without a recipe (plan.fp8 = none) the flag changes nothing."""
    h100 = load_preset("h100-sxm-80gb")
    model = preset_model("llama-3.1-8b")

    def attn(fp8: str, on: bool) -> float:
        plan = ParallelPlan(dp=8, micro_batch_size=1, grad_accum_steps=1, fp8=fp8)
        return float(perf._layer_terms(arrays_from_plans([plan]), model, _train(fp8_attention=on), h100)["attn"][0])

    assert attn("tensorwise", True) / attn("tensorwise", False) == pytest.approx(
        h100.peak_flops_bf16 / h100.peak_flops_fp8, rel=1e-9
    )
    assert attn("none", True) == attn("none", False)


def test_nemo_rows_map_the_release_configs():
    # v0.5.1 (26.06): GPT-OSS GB200 / GB300 FP8-MX V2 set cutedsl_fused_grouped_mlp, B300's (= BF16_V2) does not
    assert recipe_fused_grouped_mlp("GPT OSS 120B", "GB200", "NeMo 26.06", "mxfp8")
    assert not recipe_fused_grouped_mlp("GPT OSS 120B", "B300", "NeMo 26.06", "mxfp8")
    # v0.6.0 (26.08): gpt_oss/b300/gpt_oss.py sets NVTE_CUTEDSL_FUSED_GROUPED_MLP
    assert recipe_fused_grouped_mlp("GPT OSS 120B", "B300", "NeMo 26.08", "mxfp8")
    # no release before v0.5.1; never in BF16
    assert not recipe_fused_grouped_mlp("Qwen3_235B_a22B", "GB200", "NeMo 26.04", "mxfp8")
    assert not recipe_fused_grouped_mlp("GPT OSS 120B", "GB200", "NeMo 26.06", "none")
    # DeepSeek-V3 GB200 fuses the MLP without FP8 attention (DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_FP8_MX_V1)
    assert recipe_fused_grouped_mlp("DeepSeekV3", "GB200", "NeMo 26.06", "mxfp8")
    assert not recipe_fp8_attention("DeepSeekV3", "GB200", "NeMo 26.06", "mxfp8")
    assert recipe_fp8_attention("DeepSeekV3", "GB300", "NeMo 26.08", "mxfp8")


def test_nemo_gpt_oss_rows_carry_the_flags():
    from autotune.fitting.nemo_runs import load_nemo_rows

    runs, _ = load_nemo_rows()
    train = {r.row: r.train for r in runs}
    assert train[78].fused_grouped_mlp and train[78].fp8_attention  # 26.06 GB200 MXFP8
    assert not train[79].fused_grouped_mlp and not train[79].fp8_attention  # 26.06 B300 MXFP8
    assert not train[126].fused_grouped_mlp  # 26.04.01 GB200 BF16


def test_flags_outside_megatron_are_one_line_errors():
    with pytest.raises(SpecError, match="train.fused_grouped_mlp=True with train.framework=torchtitan") as e:
        TrainSpec(seq_len=4096, global_batch_size=8, framework="torchtitan", fused_grouped_mlp=True)
    assert "\n" not in str(e.value)
    with pytest.raises(SpecError, match="train.fp8_attention=True with train.framework=bench_model"):
        TrainSpec(seq_len=4096, global_batch_size=8, framework="bench_model", fp8_attention=True)
    assert dataclasses.replace(_train(), fused_grouped_mlp=True).fused_grouped_mlp


def test_eager_glu_clamp_bytes_by_hand():
    """GPT-OSS's clamp before Megatron's fused quick-GeGLU (autotune/predict/glu_clamp.py): 65,536 routed copies,
    F = 2880, bf16: forward 8F + backward 10F element accesses = 65536 x 2880 x 18 x 2 = 6,794,772,480 bytes; a moe_act
    recompute runs the forward again (+8F: 26F). Zero for a model without a clamp, and under the fused grouped MLP
    (the cuDNN kernel clamps in its epilogue)."""
    from autotune.predict.glu_clamp import unfused_clamp_bytes

    oss = preset_model("gpt-oss-120b")
    assert oss.glu_clamp == 7.0
    assert float(unfused_clamp_bytes(oss, 65536, 1, 2)) == 65536 * 2880 * 18 * 2 == 6_794_772_480
    assert float(unfused_clamp_bytes(oss, 65536, 1, 2, 1.0)) == 65536 * 2880 * 26 * 2
    assert float(unfused_clamp_bytes(oss, 65536, 2, 2)) == 6_794_772_480 / 2  # etp 2: F/2 per rank
    assert float(unfused_clamp_bytes(preset_model("qwen3-30b-a3b"), 65536, 1, 2)) == 0.0
    gb200 = load_preset("gb200-nvl72")
    # BF16 (no fused MLP): the layer's moe_compute carries exactly these bytes at HBM bandwidth; without the clamp
    # field the same layer is that much cheaper
    plan = ParallelPlan(dp=64, tp=1, pp=1, ep=64, micro_batch_size=4, grad_accum_steps=5, compile=True)
    no_clamp = dataclasses.replace(oss, glu_clamp=None)

    def moe_s(model) -> float:
        return float(perf._layer_terms(arrays_from_plans([plan]), model, _train(), gb200)["moe_compute"][0])

    assert moe_s(oss) - moe_s(no_clamp) == pytest.approx(float(memory_bound_s(6_794_772_480, gb200)), rel=1e-9)
    # the fused grouped MLP (MXFP8) runs no clamp kernels: the clamp field changes nothing there
    mx = dataclasses.replace(plan, fp8="mxfp8")

    def fused_s(model) -> float:
        lt = perf._layer_terms(arrays_from_plans([mx]), model, _train(fused_grouped_mlp=True), gb200)
        return float(lt["moe_compute"][0])

    assert fused_s(oss) == fused_s(no_clamp)


def test_bad_glu_clamp_is_a_one_line_error():
    with pytest.raises(SpecError, match="model.glu_clamp=-1.0 must be null or a number > 0") as e:
        dataclasses.replace(preset_model("gpt-oss-120b"), glu_clamp=-1.0)
    assert "\n" not in str(e.value)

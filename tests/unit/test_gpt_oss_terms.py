"""GPT-OSS-120B's own terms against hand-computed values: the unfused YaRN RoPE Megatron runs (predict/rope.py), the
sliding-window layers and the head-dim-64 attention rate (predict/attention_terms.py), the model FLOPs against NeMo's
published figure, and the NeMo rows' release recipes and footnoted regression (fitting/nemo_recipes.py)."""

import dataclasses
import math

import pytest

from autotune.core.errors import SpecError
from autotune.fitting.run_types import preset_model
from autotune.predict.attention_terms import head_dim_factor, window_time_share
from autotune.predict.frameworks import get_profile
from autotune.predict.perf_terms import ATTN_CAUSAL_BLOCK, ATTN_SEQ_HALF
from autotune.predict.rope import unfused_rope_extra_bytes


@pytest.fixture(scope="module")
def oss():
    return preset_model("gpt-oss-120b")


def test_yarn_attention_factor_and_the_unfused_rope_bytes_by_hand(oss):
    # YaRN (Peng et al. 2023 Sec 3.4): 0.1 ln 32 + 1; Megatron's _yarn_get_mscale(32) is the same number
    assert oss.rope_attention_factor == pytest.approx(0.1 * math.log(32.0) + 1.0) == pytest.approx(1.346574)
    # (64 + 8) heads x 64 = 4608 q/k elements per token, (10 + 8) extra accesses x 2 bytes: 165,888 bytes
    assert unfused_rope_extra_bytes(oss, 2, 1) == pytest.approx(4608 * 18 * 2) == pytest.approx(165_888)
    assert unfused_rope_extra_bytes(oss, 2, 2) == pytest.approx(165_888 / 2)  # heads split by TP
    assert unfused_rope_extra_bytes(oss, 2, 1, 1.0) == pytest.approx(4608 * 28 * 2)  # full recompute: forward again
    assert unfused_rope_extra_bytes(preset_model("qwen3-30b-a3b"), 2, 1) == 0.0  # plain RoPE: TE's fused kernel
    assert get_profile("megatron").unfused_scaled_rope() and not get_profile("bench_model").unfused_scaled_rope()


def test_bad_rope_and_window_fields_are_one_line_errors(oss):
    with pytest.raises(SpecError, match="yarn_scaling_factor=0.5 must be a number >= 1") as e:
        dataclasses.replace(oss, yarn_scaling_factor=0.5)
    assert "\n" not in str(e.value)
    with pytest.raises(SpecError, match="sliding_window_layers=0"):
        dataclasses.replace(oss, sliding_window_layers=0)
    with pytest.raises(SpecError, match="sliding_window_layers=37"):
        dataclasses.replace(oss, sliding_window_layers=37)


def test_head_dim_factor_is_the_published_ratio():
    # Shah et al. 2024 Fig. 4, forward BF16 H100 at 16k: cuDNN 413 (d 64) vs 595 (d 128), FA2 324 vs 370
    assert head_dim_factor(64, "fa3") == pytest.approx(413 / 595)
    assert head_dim_factor(64, "fa2") == pytest.approx(324 / 370)
    assert head_dim_factor(64, "triton") == 1.0  # Triton 403 vs 395: no loss
    assert head_dim_factor(128) == head_dim_factor(256) == 1.0
    assert 413 / 595 < head_dim_factor(96) < 1.0  # d / (d + c) between the published points


def test_window_share_by_hand(oss):
    # K_w = (ceil(128/128) + 1) x 128 = 256 keys per query block; full causal (4096 + 128)/2 keys at (4096 + 207)/4096
    win = (256 + 207) / (2112 * 4303 / 4096)
    assert win == pytest.approx(0.2087, abs=1e-4)
    assert window_time_share(oss, 4096, ATTN_SEQ_HALF, ATTN_CAUSAL_BLOCK) == pytest.approx((18 + 18 * win) / 36)
    assert window_time_share(preset_model("qwen3-30b-a3b"), 4096, ATTN_SEQ_HALF, ATTN_CAUSAL_BLOCK) == 1.0


def test_model_flops_match_nemos_published_figure(oss):
    # NeMo 26.06 GB200 MXFP8 row: 943 model TFLOP/s at 28,947 tok/s/GPU = 32.58 GFLOP per token (summary row 78);
    # without the window (every layer full causal) the count is 34.41, 5.6% over
    nemo = 943e12 / 28947
    assert oss.flops_per_token(4096) == pytest.approx(nemo, rel=0.01)
    full = dataclasses.replace(oss, sliding_window=0, sliding_window_layers=0)
    assert full.flops_per_token(4096) / nemo > 1.05


def test_nemo_rows_take_their_release_recipe_and_skip_the_footnoted_regression():
    from autotune.fitting.nemo_runs import load_nemo_rows

    runs, skipped = load_nemo_rows()
    reasons = {s.row: s.reason for s in skipped}
    assert "cudnn-frontend#256" in reasons[54] and "cudnn-frontend#256" in reasons[55]  # 26.06.01 MXFP8
    plan = {r.row: r.plan for r in runs}
    # GB200 BF16: 26.02 (v0.3.0, no moe_a2a_overlap) vs 26.04 (v0.4.0, moe_a2a_overlap=True)
    assert not plan[253].ep_overlap and plan[172].ep_overlap
    # B300 BF16: 26.02 at ep 64 without a flex backend, 26.04 at ep 8 with hybridep
    assert (plan[254].ep, plan[254].moe_dispatcher) == (64, "alltoall")
    assert (plan[173].ep, plan[173].moe_dispatcher) == (8, "hybridep")


def test_blackwell_prices_small_heads_through_the_exponentials_not_the_h100_factor(oss):
    """On a preset that states its exponential rate (Blackwell) the head-dim factor, read off H100 kernels bound by the
    exponential at d = 64 (FlashAttention-3 Sec 3.1), is left out: softmax_exp_s counts one exponential per score of
    the 64 heads itself, for the scores in each layer's band (the window share at S0 = 0: 256 of 2,112 keys)."""
    from autotune.fitting.fit_reference import load_preset
    from autotune.predict.perf_terms import attention_s, softmax_exp_s

    b200, h100 = load_preset("b200"), load_preset("h100-sxm-80gb")
    no_sfu = dataclasses.replace(b200, softmax_exp_per_s=None)
    got = float(attention_s(4096, 4096, oss, 1, 3.0, b200, 2.25e15))
    mma = float(attention_s(4096, 4096, oss, 1, 3.0, no_sfu, 2.25e15)) * head_dim_factor(64, "fa3")
    scores = (18 + 18 * 256 / 2112) / 36
    assert got == pytest.approx(mma + scores * float(softmax_exp_s(4096, 4096, oss, 1, 3.0, b200)), rel=1e-9)
    # Hopper states no rate: the factor stays (413 / 595 slower at d = 64) and there is no exponential term
    d128 = dataclasses.replace(oss, head_dim=128, num_heads=32)  # the same q width at d = 128
    ratio = float(attention_s(4096, 4096, oss, 1, 3.0, h100, 989e12)) / float(
        attention_s(4096, 4096, d128, 1, 3.0, h100, 989e12)
    )
    assert ratio == pytest.approx(595 / 413, rel=1e-9)

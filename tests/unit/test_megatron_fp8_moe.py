"""What Megatron-Core's MoE layer keeps under an FP8 recipe (megatron_moe.layer_activations [FP8-MOE], @ core_v0.16.1):
the router's gating linear saves the pre-MLP norm output as it is (moe/moe_utils.py RouterGatingLinearFunction:
`ctx.save_for_backward(inp, weight, bias)`), so the FP8 saving of a dense layer's fc1 input does not happen on an MoE
layer; the shared expert's fc1 saves the original input too (moe/shared_experts.py `set_save_original_input`) except
under delayed scaling (train.fp8_delayed_scaling), where it keeps its own quantized copy. And the recipes that ran
delayed scaling are mapped so (NeMo 1.x / 25.04 containers, MLPerf v5.0)."""

from __future__ import annotations

import pytest

from autotune.core.plan_arrays import CODES, RECOMPUTE_CODE
from autotune.core.types import TrainSpec
from autotune.predict.frameworks import megatron_moe
from autotune.predict.frameworks.megatron import MegatronProfile
from autotune.spec.config import load_config

TW, NONE = CODES["fp8"]["tensorwise"], RECOMPUTE_CODE["none"]


def test_moe_layer_keeps_the_router_input_in_bf16_by_hand():
    """Qwen3-30B-A3B (h 2048, dense f 6144, F 768, top-8 of 128 experts, no shared expert), 4096 tokens, tp 1, FP8
    tensorwise (g = 1), per token: the routed copies 8 x (8 + 2048 + (4 + 1) x 768 + 2) + 4 x 128 = 47,696, less
    the dense MLP's 3 x 2 x 6144 = 36,864, plus what the FP8 saving of every layer took for the dense MLP:
    (2 - 1)(2048 + 6144) = 8,192 -> 19,024 bytes. So an MoE layer's non-expert FP8 saving is the QKV input's
    alone: fp8_layer_saving's (2 - 1)(2 x 2048 + 6144) = 10,240 less 8,192 = 2,048 = (c - b) h."""
    q = load_config(["model=qwen3-30b-a3b"]).model
    got = megatron_moe.layer_activations(q, 4096, 1, False, NONE, 2, TW)
    assert float(got) == 4096 * 19_024
    cut = MegatronProfile().fp8_layer_saving(q, 4096, 1, False, NONE, True, TW, 2)
    assert float(cut) - 4096 * 8_192 == 4096 * 2_048
    # without FP8 nothing comes back: the routed copies at g = c = 2 less the dense MLP
    assert float(megatron_moe.layer_activations(q, 4096, 1, False, NONE, 2, CODES["fp8"]["none"])) == 4096 * (
        8 * (8 + 2 * 2048 + 6 * 768 + 2) + 512 - 36_864
    )


def test_shared_expert_fp8_copy_only_under_delayed_scaling():
    """DeepSeek-V3 (h 7168, a 2048-wide shared expert), 4096 tokens, tp 2 with SP: delayed scaling adds the shared
    fc1's quantized input, 1 byte x 7168 per token on the sequence shard (2048 tokens); other recipes and full
    recompute add nothing; the profile passes train.fp8_delayed_scaling through."""
    ds = load_config(["model=deepseek-v3"]).model
    cur = megatron_moe.layer_activations(ds, 4096, 2, True, NONE, 2, TW, 1, False)
    dly = megatron_moe.layer_activations(ds, 4096, 2, True, NONE, 2, TW, 1, True)
    assert float(dly - cur) == 2048 * 7168
    mx = CODES["fp8"]["mxfp8"]
    assert float(megatron_moe.layer_activations(ds, 4096, 2, True, NONE, 2, mx, 1, True)) == pytest.approx(
        float(megatron_moe.layer_activations(ds, 4096, 2, True, NONE, 2, mx, 1, False))
    )
    full = RECOMPUTE_CODE["full"]
    assert float(megatron_moe.layer_activations(ds, 4096, 2, True, full, 2, TW, 1, True)) == 0.0
    prof = MegatronProfile().for_train(TrainSpec(4096, 8, framework="megatron", fp8_delayed_scaling=True))
    assert float(prof.moe_layer_activations(ds, 4096, 2, True, NONE, 2, TW)) == float(dly)


def test_delayed_scaling_is_megatron_only_and_mapped_from_the_recipes():
    from autotune.core.errors import SpecError
    from autotune.fitting.mlperf_runs import load_mlperf_rows
    from autotune.fitting.nemo_runs import load_nemo_rows

    with pytest.raises(SpecError, match=r"train.fp8_delayed_scaling=True with train.framework=torchtitan"):
        TrainSpec(4096, 8, framework="torchtitan", fp8_delayed_scaling=True)
    rows = load_nemo_rows()[0]
    old = [r for r in rows if r.train.fp8_delayed_scaling]
    assert old and all(r.plan.fp8 == "tensorwise" for r in old)
    assert {r.model.name for r in old} >= {"gpt3-20b", "llama-3.1-70b"}  # NeMo 24.07 / 25.04 rows
    bridge = [r for r in rows if r.plan.fp8 == "tensorwise" and r.train.fp8_param_gather]  # Megatron-Bridge FP8-CS
    assert bridge and not any(r.train.fp8_delayed_scaling for r in bridge)
    ml = {row_id: train for row_id, _, _, train, _, _ in load_mlperf_rows()}
    assert ml["v50-h100-512"].fp8_delayed_scaling and ml["v50-gb200-256"].fp8_delayed_scaling
    assert not ml["v51-b200-256"].fp8_delayed_scaling and not ml["v51-gb200-512"].fp8_delayed_scaling


def test_mla_input_keeps_two_quantized_copies():
    """[MLA] DeepSeek-V3 (h 7168, f 18432, 128 heads x v_head_dim 128), tp 1: its input norm's output feeds two FP8
    linears (linear_q_down_proj, linear_kv_down_proj), each saving its own 1-byte copy: 2 bytes where bf16 kept 2,
    no saving there; fc1 (2 - 1) x 7168 and the dense fc2 (2 - 1) x 18432: 25,600 bytes per token and layer. Under
    delayed scaling the projection's copy of the 16,384-wide attention output comes off: 9,216."""
    ds = load_config(["model=deepseek-v3"]).model
    assert float(MegatronProfile().fp8_layer_saving(ds, 1, 1, False, NONE, True, TW, 2)) == 25_600
    delayed = MegatronProfile(fp8_delayed_scaling=True)
    assert float(delayed.fp8_layer_saving(ds, 1, 1, False, NONE, True, TW, 2)) == 25_600 - 16_384

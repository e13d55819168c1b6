"""plan.norm_recompute and plan.mlp_recompute (Megatron's `--recompute-modules layernorm` / `mlp`,
transformer_layer.py @ core_v0.16.1): the bytes by hand, the rules, the speed term, the export, the trainer's refusal
and the recipes that run them (NVIDIA's GPT-OSS and DeepSeek-V3 presets, the Megatron-MoE-ModelZoo Qwen3 rows)."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.core.errors import SpecError
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan
from autotune.layouts.rules import rejections
from autotune.predict.frameworks.megatron import MegatronProfile
from autotune.predict.memory import memory_arrays
from autotune.predict.perf import perf_arrays
from autotune.spec.config import load_config

QWEN = load_config(["model=qwen3-30b-a3b", "cluster=h100-sxm-80gb", "train.framework=megatron"])
TRAIN = dataclasses.replace(QWEN.train, seq_len=4096, global_batch_size=512)
PLAN = ParallelPlan(dp=64, ep=8, zero_stage=1, grad_accum_steps=8, recompute="selective")


def _mem(plan, cfg=QWEN, train=TRAIN):
    return memory_arrays(arrays_from_plans([plan]), cfg.model, train, cfg.cluster)


def test_moe_pre_mlp_norm_output_released_by_hand():
    """Qwen3-30B-A3B: every one of its 48 layers is an MoE layer with a separate pre-MLP norm (TENorm; its input norm
    is fused into TELayerNormColumnParallelLinear): 4096 tokens x h 2048 x 2 bytes = 16 MiB per layer, 768 MiB at pp 1
    (one micro-batch in flight); the same under FP8 tensorwise: the router keeps that output in bf16 under every
    recipe (megatron_moe.layer_activations [FP8-MOE])."""
    on = dataclasses.replace(PLAN, norm_recompute=True)
    a, b = _mem(PLAN), _mem(on)
    assert float(a["activations"][0] - b["activations"][0]) == pytest.approx(48 * 4096 * 2048 * 2)
    fp8 = dataclasses.replace(PLAN, fp8="tensorwise")
    a8, b8 = _mem(fp8), _mem(dataclasses.replace(fp8, norm_recompute=True))
    assert float(a8["activations"][0] - b8["activations"][0]) == pytest.approx(48 * 4096 * 2048 * 2)
    # the hook by hand: (every layer, MoE layers) at tp 2 with SP: the sequence shard, 2048 tokens' worth
    per_layer, per_moe = MegatronProfile().norm_recompute_saving(QWEN.model, 4096, 2, True, 2, 0)
    assert float(per_layer) == 0.0 and float(per_moe) == 4096 * 2048 * 2 / 2


def test_mla_input_norm_released_on_every_layer():
    """DeepSeek-V3 (h 7168, 61 layers, 58 of them MoE): MLA's input norm is a separate module on every layer, so both
    outputs go: 7168 x 2 bytes per token on each layer and again on each MoE layer."""
    ds = load_config(["model=deepseek-v3", "cluster=b200", "train.framework=megatron"])
    per_layer, per_moe = MegatronProfile().norm_recompute_saving(ds.model, 1, 1, False, 2, 0)
    assert float(per_layer) == float(per_moe) == 7168 * 2
    # FP8 tensorwise (code 1): MLA's norm output is the two down projections' FP8 copies (2 x 1 byte); the MoE
    # pre-MLP norm's bf16 output (the router's), and under delayed scaling the shared expert fc1's FP8 copy as well
    per_layer, per_moe = MegatronProfile().norm_recompute_saving(ds.model, 1, 1, False, 2, 1)
    assert (float(per_layer), float(per_moe)) == (7168 * 2, 7168 * 2)
    per_layer, per_moe = MegatronProfile(fp8_delayed_scaling=True).norm_recompute_saving(ds.model, 1, 1, False, 2, 1)
    assert (float(per_layer), float(per_moe)) == (7168 * 2, 7168 * 3)


def test_speed_rules_export_and_trainer():
    on = dataclasses.replace(PLAN, norm_recompute=True)
    # speed: the pre-MLP norm's forward once more, reading and writing c h per token: more time, under 1% of the step
    sa, sb = (perf_arrays(arrays_from_plans([p]), QWEN.model, TRAIN, QWEN.cluster)["step_s"][0] for p in (PLAN, on))
    assert 0 < sb - sa < 0.01 * sa
    arr = arrays_from_plans([on])
    assert rejections(arr, QWEN.model, TRAIN, QWEN.cluster)[0][0] is None
    ids, why = rejections(arr, QWEN.model, dataclasses.replace(TRAIN, framework="torchtitan"), QWEN.cluster)
    assert ids[0] == "norm_recompute_needs_megatron" and "framework=torchtitan" in why[0]
    full = arrays_from_plans([dataclasses.replace(on, recompute="full")])
    assert rejections(full, QWEN.model, TRAIN, QWEN.cluster)[0][0] == "norm_recompute_needs_selective"
    dense = load_config(["model=llama-3.1-8b"]).model  # its norms are fused: the module would do nothing
    ids, why = rejections(arrays_from_plans([dataclasses.replace(on, ep=1)]), dense, TRAIN, QWEN.cluster)
    assert ids[0] == "norm_recompute_needs_separate_norm" and "llama-3.1-8b" in why[0]
    from autotune.interop import render

    argv = render("megatron", QWEN.model, TRAIN, QWEN.cluster, dataclasses.replace(on, moe_recompute="moe_act"))
    assert "--recompute-modules layernorm moe_act" in argv
    from bench_model.parallel import parallelize

    with pytest.raises(SpecError, match="plan.norm_recompute=true"):
        parallelize(None, None, on, "bf16")


def test_published_rows_run_their_recipes_layernorm_module():
    """Megatron-Bridge's GPT-OSS 120B BF16 presets on B200 / GB200 / H100 list ["layernorm", "moe_act"]; GB300 and
    B300 recompute nothing. The ModelZoo's Qwen3 rows name "norm" / "layernorm" with their MoE module (r034, which
    also runs shared_experts, is skipped by the loader)."""
    from autotune.fitting.nemo_runs import load_nemo_rows
    from autotune.fitting.published_runs import load_moe_blackwell

    oss = [r for r in load_nemo_rows()[0] if r.model.name == "gpt-oss-120b"]
    on = {(r.cluster, r.plan.fp8) for r in oss if r.plan.norm_recompute}
    assert on == {("b200", "none"), ("gb200-nvl72", "none"), ("h100-sxm-80gb", "none")}
    assert all(
        r.plan.moe_recompute == "moe_act" and r.plan.recompute == "selective" for r in oss if r.plan.norm_recompute
    )
    mb = {lay.row: lay for lay in load_moe_blackwell()[0]}
    assert mb["r035"].plan.norm_recompute and mb["r035"].plan.moe_recompute == "moe" and mb["r035"].recipe == ""
    assert mb["r044"].plan.norm_recompute and mb["r044"].plan.moe_recompute == "moe_act" and mb["r044"].recipe == ""


def test_mlp_module_by_hand():
    """Llama-3.1-8B (h 4096, f 14336, 32 dense layers), 4096 tokens, tp 1, pp 1: each layer's MLP keeps its input
    only, the norm output fc1 saves (2 h) and SwiGLU's fc1 output and fc2 input (2 x 3 f) go, 94,208 bytes per token,
    and one layer's come back in its backward: 31 x 4096 x 94,208 bytes less. FP8 tensorwise: b h + (2c + b) f =
    75,776 bytes per token (fp8_layer_saving already took c - b off the fc1 and fc2 inputs)."""
    cfg = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb", "train.framework=megatron"])
    train = dataclasses.replace(cfg.train, seq_len=4096, global_batch_size=512)
    plan = ParallelPlan(dp=64, zero_stage=1, grad_accum_steps=8, recompute="selective")
    on = dataclasses.replace(plan, mlp_recompute=True)
    a, b = _mem(plan, cfg, train), _mem(on, cfg, train)
    assert float(a["activations"][0] - b["activations"][0]) == pytest.approx(31 * 4096 * 94_208)
    fp8 = dataclasses.replace(plan, fp8="tensorwise")
    a8, b8 = _mem(fp8, cfg, train), _mem(dataclasses.replace(fp8, mlp_recompute=True), cfg, train)
    assert float(a8["activations"][0] - b8["activations"][0]) == pytest.approx(31 * 4096 * 75_776)
    # speed: the MLP's forward GEMMs once more (3 h f weights per token)
    sa, sb = (perf_arrays(arrays_from_plans([p]), cfg.model, train, cfg.cluster)["step_s"][0] for p in (plan, on))
    assert sb > 1.05 * sa


def test_mlp_module_only_on_dense_layers_rules_export():
    """DeepSeek-V3's first three layers are dense (f 18432): at pp 1 two of them keep 4096 x (2 x 7168 + 6 x 18432)
    bytes less (the third comes back as the transient). Qwen3-30B-A3B has no dense layer: refused."""
    ds = load_config(["model=deepseek-v3", "cluster=b200", "train.framework=megatron"])
    train = dataclasses.replace(ds.train, seq_len=4096, global_batch_size=2048)
    plan = ParallelPlan(dp=256, ep=32, zero_stage=1, grad_accum_steps=8, recompute="selective")
    on = dataclasses.replace(plan, mlp_recompute=True)
    a, b = _mem(plan, ds, train), _mem(on, ds, train)
    assert float(a["activations"][0] - b["activations"][0]) == pytest.approx(2 * 4096 * (2 * 7168 + 6 * 18432))
    arr = arrays_from_plans([dataclasses.replace(PLAN, mlp_recompute=True)])
    ids, why = rejections(arr, QWEN.model, TRAIN, QWEN.cluster)
    assert ids[0] == "mlp_recompute_needs_dense_layer" and "48 layers" in why[0]
    ids, _ = rejections(
        arrays_from_plans([on]), ds.model, dataclasses.replace(train, framework="bench_model"), ds.cluster
    )
    assert ids[0] == "mlp_recompute_needs_megatron"
    from autotune.interop import render

    argv = render("megatron", ds.model, train, ds.cluster, dataclasses.replace(on, mla_recompute=True))
    assert "--recompute-modules mla_up_proj mlp" in argv
    from bench_model.parallel import parallelize

    with pytest.raises(SpecError, match="plan.mlp_recompute=true"):
        parallelize(None, None, on, "bf16")
    # the summary's DeepSeek-V3 GB200 FP8 rows of 26.04 / 26.04.01 run ["mlp"] (not mla_up_proj)
    from autotune.fitting.nemo_runs import load_nemo_rows

    runs = {r.row: r.plan for r in load_nemo_rows()[0]}
    assert all(runs[i].mlp_recompute and not runs[i].mla_recompute for i in (122, 168))
    assert sum(p.mlp_recompute for p in runs.values()) == 2

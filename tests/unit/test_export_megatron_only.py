"""Megatron-only train settings in exports (user-trust: no silent drops): the Megatron file writes the ones the target
release's Megatron-LM has arguments for (megatron/training/arguments.py @ core_v0.16.1, vendored in tests/vendor:
--defer-embedding-wgrad-compute --wgrad-deferral-limit) and lists the others (fp8_dot_product_attention is among the
TransformerConfig fields "no CLI argument exists for"); every other trainer's file lists each one this job sets under
NOT MAPPED, naming the Megatron setting."""

from __future__ import annotations

import dataclasses

from autotune.core.types import ParallelPlan
from autotune.interop import render, unmapped
from autotune.spec.config import load_config

CFG = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb", "train.framework=megatron"])
PLAN = ParallelPlan(dp=2, tp=2, pp=2, zero_stage=1, micro_batch_size=1, grad_accum_steps=4, fp8="tensorwise")
TRAIN = dataclasses.replace(
    CFG.train,
    global_batch_size=8,
    fp8_attention=True,
    fused_grouped_mlp=True,
    cross_entropy_fusion="te",
    embedding_wgrad_deferral=4,
    fp8_delayed_scaling=True,
)


def test_megatron_writes_the_deferral_and_names_what_it_cannot_write():
    text = render("megatron", CFG.model, TRAIN, CFG.cluster, PLAN)
    argv = " ".join(text.split())
    assert "--defer-embedding-wgrad-compute --wgrad-deferral-limit 4" in argv
    assert "--fp8-dot-product-attention" not in argv  # no such argument in core_v0.16.1 (its parser refuses it)
    lines = unmapped("megatron", CFG.model, TRAIN, CFG.cluster, PLAN)
    assert any(x.startswith("train.fused_grouped_mlp=True: ") for x in lines)
    assert any(x.startswith("train.fp8_attention=True: ") for x in lines)
    # train.fp8_delayed_scaling: Megatron's delayed recipe for this tensorwise layout; listed with another recipe
    assert "--fp8-format hybrid --fp8-recipe delayed" in argv
    mx = dataclasses.replace(PLAN, fp8="mxfp8")
    assert "--fp8-recipe mxfp8" in " ".join(render("megatron", CFG.model, TRAIN, CFG.cluster, mx).split())
    assert any(
        x.startswith("train.fp8_delayed_scaling=True: ") and "plan.fp8=mxfp8" in x
        for x in unmapped("megatron", CFG.model, TRAIN, CFG.cluster, mx)
    )


def test_other_trainers_list_every_megatron_only_setting():
    want = {
        "train.fp8_attention=true",
        "train.fused_grouped_mlp=true",
        "train.cross_entropy_fusion=te",
        "train.embedding_wgrad_deferral=4",
        "train.fp8_delayed_scaling=true",
        # the megatron-profile estimate priced Megatron's default dropout masks; these trainers' models have none
        "train.hidden_dropout=0.1",
    }
    for fmt in ("torchtitan", "nanotron", "accelerate"):
        lines = unmapped(fmt, CFG.model, TRAIN, CFG.cluster, dataclasses.replace(PLAN, fp8="none"))
        named = {x.split(":")[0] for x in lines if x.startswith("train.")}
        assert named == want, (fmt, named)
        assert all("Megatron-Core only" in x for x in lines if x.startswith("train.") and "dropout" not in x)
    # a job that sets none of them gets no such line
    plain = dataclasses.replace(CFG.train, framework="bench_model", global_batch_size=8)
    assert not [x for x in unmapped("torchtitan", CFG.model, plain, CFG.cluster, PLAN) if x.startswith("train.")]


def test_torchtitan_writes_balanced_routing_as_its_debug_switch():
    """torchtitan 0.2.2 config/job_config.py Debug.moe_force_load_balance (round-robin tokens over the experts); the
    file goes through torchtitan's own ConfigManager in tests/unit/test_interop_presets.py for the preset jobs."""
    cfg = load_config(["model=qwen3-30b-a3b", "cluster=h100-sxm-80gb", "train.framework=torchtitan"])
    plan = ParallelPlan(dp=8, zero_stage=3, ep=8, micro_batch_size=1, grad_accum_steps=cfg.train.global_batch_size // 8)
    for routing, want in (("balanced", True), ("learned", False)):
        train = dataclasses.replace(cfg.train, moe_routing=routing)
        text = render("torchtitan", cfg.model, train, cfg.cluster, plan)
        assert ("moe_force_load_balance = true" in text) == want, routing
    collapsed = dataclasses.replace(cfg.train, moe_routing="collapsed")
    assert any(
        x.startswith("train.moe_routing=collapsed: ")
        for x in unmapped("torchtitan", cfg.model, collapsed, cfg.cluster, plan)
    )


def test_trainers_without_a_routing_override_list_balanced_routing():
    cfg = load_config(["model=qwen3-30b-a3b", "cluster=h100-sxm-80gb", "train.moe_routing=balanced"])
    plan = ParallelPlan(dp=8, zero_stage=1, micro_batch_size=1, grad_accum_steps=cfg.train.global_batch_size // 8)
    for fmt in ("nanotron", "accelerate", "deepspeed"):
        assert any(
            x.startswith("train.moe_routing=balanced: ") for x in unmapped(fmt, cfg.model, cfg.train, cfg.cluster, plan)
        ), fmt

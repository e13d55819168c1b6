"""Mixture-of-experts layouts through `plan` and `estimate` (issue: MoE end to end).

Published layouts (NVIDIA Megatron-Bridge performance summary, benchmarks/data/measured/
nemo_megatron_bridge_performance_summary.csv, H100 FP8 rows): Qwen3-235B-A22B on 256 H100 at TP2 PP8 VP4 EP32, mbs 1,
seq 4096, global batch 8192; DeepSeek-V3 on 1024 H100 at TP2 PP8 VP4 EP64 (Megatron-LM issue #1721). Megatron runs
them with the distributed optimizer, sequence parallelism, FP8 and force-balanced routing."""

from __future__ import annotations

import json

import pytest

from autotune.cli.main import main

PUBLISHED = {
    "qwen3-235b-a22b": ("--gpus", "256", "plan.dp=16", "plan.ep=32"),
    # the recipe's recompute module mla_up_proj (Megatron-Bridge scripts/performance/run_script.py @ v0.1.0rc4:91,
    # H100: ["mla_up_proj", "mlp"]); without it MLA's q, k, v stay ([MLA], docs/frameworks.md): 77.8 GiB, over
    "deepseek-v3": (
        "--gpus",
        "1024",
        "plan.dp=64",
        "plan.ep=64",
        "plan.recompute=selective",
        "plan.mla_recompute=true",
    ),
}
MEGATRON_FP8 = (
    "cluster=h100-sxm-80gb", "plan.tp=2", "plan.pp=8", "plan.vpp=4", "plan.zero_stage=1", "plan.sequence_parallel=true",
    "plan.fp8=tensorwise", "plan.micro_batch_size=1", "train.moe_routing=balanced", "train.framework=megatron",
    "train.seq_len=4096",
)  # fmt: skip


def test_plan_lists_expert_parallel_layouts_for_qwen3_235b(capsys):
    assert (
        main(["plan", "--gpus", "256", "model=qwen3-235b-a22b", "cluster=h100-sxm-80gb", "--json", "--top", "20"]) == 0
    )
    top = json.loads(capsys.readouterr().out)["top"]
    assert any(row["ep"] > 1 for row in top)  # EP layouts rank among the best
    assert all(row["mem_params_bytes"] > 0 and row["pred_tokens_per_s_per_gpu"] > 0 for row in top)


@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_published_layout_is_predicted_to_fit_the_device(model, capsys):
    """Both within the default 5% headroom: Qwen3-235B 58.7 GiB, DeepSeek-V3 58.2 GiB with its recipe's mla_up_proj
    (77.8 without) predicted reserved of the H100's 79.6 GiB (docs/memory_model.md "MoE")."""
    headroom = "space.memory_headroom=0.05"
    assert main(["estimate", f"model={model}", *PUBLISHED[model], *MEGATRON_FP8, headroom, "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert est["fits"], est["reject_reason"]
    assert est["pred_ep_comm_s"] > 0 and est["pred_tokens_per_s_per_gpu"] > 0


def test_expert_states_shrink_with_ep(capsys):
    """Doubling ep halves the routed experts on a rank (autotune/predict/moe.py: E/ep experts), so model states fall;
    the dense part is unchanged."""
    states = []
    for ep in (8, 16):
        args = ["estimate", "model=qwen3-30b-a3b", "--gpus", "16", "plan.dp=16", f"plan.ep={ep}", "plan.zero_stage=1"]
        assert main([*args, "cluster=h100-sxm-80gb", "--json"]) == 0
        states.append(json.loads(capsys.readouterr().out)["mem_model_states_bytes"])
    assert states[1] < states[0]

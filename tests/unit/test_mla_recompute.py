"""Multi-head latent attention under the megatron profile ([MLA] in autotune/predict/frameworks/megatron.py) and
plan.mla_recompute (Megatron's `--recompute-modules mla_up_proj`): the per-token bytes by hand for DeepSeek-V3
(n 128 heads, q/k head dim 128 + 64, v 128, q_lora_rank 1536, kv_lora_rank 512, h 7168), the rules, the export, the
trainer's refusal and the NeMo recipes' modules."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.core.errors import SpecError
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.layouts.rules import rejections
from autotune.predict.frameworks.megatron import MegatronProfile, megatron_layer_units, mla_latent_units
from autotune.predict.memory import memory_arrays
from autotune.predict.perf import perf_arrays
from autotune.spec.config import load_config

CFG = load_config(["model=deepseek-v3", "cluster=b200", "train.framework=megatron"])
TRAIN = dataclasses.replace(CFG.train, seq_len=4096, global_batch_size=1024)
PLAN = ParallelPlan(dp=32, pp=8, ep=32, zero_stage=1, grad_accum_steps=32, recompute="selective")


def test_mla_units_by_hand():
    """q and k 128 x 192 each, v and the attention output 128 x 128, 2 bytes: 2 (2 x 24576 + 2 x 16384) / 7168 =
    22.857 units of h (GQA's Q + K + V + projection input at head_dim 56 would be 8); the up projections' norm input
    and output, 2 x 2 x (1536 + 512) = 8192 bytes per token = 1.143 units, on every TP rank."""
    m = CFG.model
    _, shard = megatron_layer_units(m, dropout=0.0, qkv_view=False)
    mlp = 6.0 * m.ffn_hidden_size / m.hidden_size
    assert shard - mlp == pytest.approx(2 * (2 * 24576 + 2 * 16384) / 7168)
    assert mla_latent_units(m) == pytest.approx(8192 / 7168)
    assert mla_latent_units(load_config(["model=llama-3.1-8b"]).model) == 0.0


def test_mla_up_proj_saving_by_hand():
    """Dropped: q, k, v (2 x 24576 + 16384 elements, /tp); the checkpoint keeps the compressed q, kv and rope key
    (1536 + 512 + 64) where the up projections kept 2 x (1536 + 512): 2 bytes x (65536 + 1984) = 135,040 bytes per
    token and layer at tp 1; 2 x (32768 + 1984) at tp 2."""
    prof, m = MegatronProfile(), CFG.model
    assert float(prof.mla_recompute_saving(m, 1, 1, 2)) == 135_040
    assert float(prof.mla_recompute_saving(m, 1, 2, 2)) == 2 * (32768 + 1984)
    # end to end, pp 8 1F1B: the worst rank is 1 (61 layers split 7 / 8 / ..., the 8 all MoE), 7 micro-batches in
    # flight: its activations drop by 8 x 7 x 4096 tokens x 135,040 bytes
    on = dataclasses.replace(PLAN, mla_recompute=True)
    a, b = (memory_arrays(arrays_from_plans([p]), m, TRAIN, CFG.cluster) for p in (PLAN, on))
    assert int(a["worst_pp_rank"][0]) == int(b["worst_pp_rank"][0]) == 1 and int(a["worst_pp_rank_layers"][0]) == 8
    assert float(a["activations"][0] - b["activations"][0]) == pytest.approx(8 * 7 * 4096 * 135_040)
    # speed: the up projections run once more (a forward of 128 x (192 x 1536 + 256 x 512) weights per token)
    sa, sb = (perf_arrays(arrays_from_plans([p]), m, TRAIN, CFG.cluster)["compute_s"][0] for p in (PLAN, on))
    assert sb > sa


def test_rules_export_and_trainer():
    arr = arrays_from_plans([dataclasses.replace(PLAN, mla_recompute=True)])
    assert rejections(arr, CFG.model, TRAIN, CFG.cluster)[0][0] is None
    ids, why = rejections(arr, CFG.model, dataclasses.replace(TRAIN, framework="torchtitan"), CFG.cluster)
    assert ids[0] == "mla_recompute_needs_megatron" and "framework=torchtitan" in why[0]
    none = arrays_from_plans([dataclasses.replace(PLAN, mla_recompute=True, recompute="none")])
    assert rejections(none, CFG.model, TRAIN, CFG.cluster)[0][0] == "mla_recompute_needs_selective"
    dense = load_config(["model=llama-3.1-8b"]).model
    no_ep = arrays_from_plans([dataclasses.replace(PLAN, mla_recompute=True, ep=1)])
    assert rejections(no_ep, dense, TRAIN, CFG.cluster)[0][0] == "mla_recompute_needs_mla"
    from autotune.interop import render

    both = dataclasses.replace(PLAN, mla_recompute=True, moe_recompute="moe_act")
    argv = render("megatron", CFG.model, TRAIN, CFG.cluster, both)
    assert "--recompute-modules mla_up_proj moe_act" in argv
    from bench_model.parallel import parallelize

    with pytest.raises(SpecError, match="plan.mla_recompute=true"):
        parallelize(None, None, dataclasses.replace(PLAN, mla_recompute=True), "bf16")


def test_nemo_rows_run_their_recipes_modules():
    """Megatron-Bridge workload configs: DeepSeek-V3 B200 PP8 VP2 (26.04.01) mla_up_proj; GB300 in 25.11 moe_act;
    GB200 FP8 in 26.04 mlp (plan.mlp_recompute, tests/unit/test_recompute_modules.py); Kimi-K2 GB300 mla_up_proj."""
    from autotune.fitting.nemo_runs import load_nemo_rows

    runs = {r.row: r for r in load_nemo_rows()[0]}
    b200, gb300, gb200, kimi = runs[124].plan, runs[270].plan, runs[168].plan, runs[86].plan
    assert (b200.recompute, b200.mla_recompute, b200.moe_recompute) == ("selective", True, "none")
    assert (gb300.recompute, gb300.mla_recompute, gb300.moe_recompute) == ("selective", False, "moe_act")
    assert (gb200.recompute, gb200.mla_recompute, gb200.mlp_recompute) == ("selective", False, True)
    assert kimi.mla_recompute and runs[86].model.name == "kimi-k2"


def test_train_spec_default_keeps_megatron_master():
    """[B16] needs bf16 params, bf16 optimizer states and no master: the default megatron job keeps its fp32 master."""
    t = TrainSpec(seq_len=8, global_batch_size=8, param_dtype="bf16", framework="megatron")
    ms = MegatronProfile().model_states(1e9, 1, 8, t)
    assert float(ms["optimizer"]) == pytest.approx(1e9 * (4 + 8) / 8)

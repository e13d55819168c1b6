"""Llama 3.1 405B at TP 8 x PP 16 x DP 128, seq 8192, sequence parallel (the Llama 3 paper's layout on 80 GB H100s,
Dubey et al. 2024 Sec 3.3.2): under Megatron's sequence parallelism the column-parallel linears keep their
sequence-sharded input (Korthikanti et al. 2022 Sec 4.2.2: 34sbh/t), which DTensor SP (bench_model) keeps gathered.
Shapes from meta-llama/Llama-3.1-405B config.json (search_spaces/model/llama-3.1-405b.yaml)."""

from __future__ import annotations

import pytest

from autotune.core.plan_arrays import arrays_from_plans
from autotune.predict.memory import memory_arrays
from autotune.spec.config import load_config

S, H, F, KV, T = 8192, 16384, 53248, 1024, 8  # seq, hidden, ffn, kv_dim (8 kv heads x 128), tp
OVERRIDES = [
    "model=llama-3.1-405b", "cluster=h100-sxm-80gb", "plan.tp=8", "plan.pp=16", "plan.sequence_parallel=true",
    "plan.zero_stage=1", "plan.micro_batch_size=1", "train.seq_len=8192", "train.global_batch_size=2048",
]  # fmt: skip


def _mem(framework: str):
    cfg = load_config([*OVERRIDES, f"train.framework={framework}"])
    plan = cfg.plan(16384)
    return plan, cfg, memory_arrays(arrays_from_plans([plan]), cfg.model, cfg.train, cfg.cluster)


def test_405b_megatron_layer_keeps_sequence_sharded_inputs():
    _, cfg, _ = _mem("megatron")
    from autotune.predict.frameworks import get_profile

    sbh = S * H  # tokens x hidden at micro-batch 1
    # per token / h, 2-byte activations: norms 4 + QKV input 2 + MLP input 2 + dropout masks 2 (replicated without
    # SP), Q 2 + K, V 2k/h each + projection input 2 + fc1 out 4f/h + fc2 in 2f/h; all /t under SP. Transformer
    # Engine's spec (the profile's default) keeps no fused QKV output (megatron.py [TE-QKV]; the local spec's view
    # adds 2(h + k)/h: test_frameworks_megatron.py test_the_qkv_view_is_the_only_excess_over_tmu)
    megatron = sbh * (10 + 2 + 4 * KV / H + 2 + 6 * F / H) / T
    got = get_profile("megatron").layer_activations(cfg.model, S, 1, T, True, 1, 2)["saved"]
    assert float(got) == pytest.approx(megatron)
    # bench_model (DTensor SP, autotune/predict/memory.py docstring): the gathered inputs of wq/wk/wv and w1/w3, 2ch per
    # token, stay at full sequence; the rest is /t. c = 2, 128 heads of 128, RoPE cos/sin tables 4*s*head_dim*c
    c, a = 2, 128
    full_seq_inputs = S * 2 * c * H
    bench_hand = S * (2 * ((4 + c) * H + 4) / T + c * (2 * H + 2 * KV + 4 * F) / T + 4 * a / T) + full_seq_inputs
    bench = get_profile("bench_model").layer_activations(cfg.model, S, 1, T, True, 0, c)["saved"]
    assert float(bench) == pytest.approx(bench_hand + 4 * S * 128 * c)
    assert full_seq_inputs / float(bench) > 0.4  # almost half of bench_model's layer; Megatron keeps it /t


def test_405b_megatron_peak_vs_bench_model():
    plan, _, meg = _mem("megatron")
    _, _, bench = _mem("bench_model")
    assert plan.dp == 128 and plan.grad_accum_steps == 16
    # 126 layers over 16 stages (bench_model's split): rank 0 holds 7 layers x 16 in-flight micro-batches (+ the
    # embedding's input ids and dropout mask), rank 1 holds 8 layers x 15 micro-batches: the worst rank
    assert int(meg["worst_pp_rank"][0]) == 1
    per_layer = S * H * (14 + 4 * KV / H + 6 * F / H) / T  # Transformer Engine's spec: no QKV view
    assert 8 * 15 * per_layer > 7 * 16 * per_layer + 16 * S * (8 + H) / T
    assert float(meg["activations"][0]) == pytest.approx(8 * 15 * per_layer)
    assert float(bench["allocated"][0]) > 150 * 2**30
    assert float(meg["allocated"][0]) < 0.5 * float(bench["allocated"][0])

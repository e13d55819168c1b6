"""autotune/predict/moe.py: MoE terms against hand-computed values (each derivation in the comment)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autotune.predict import moe
from autotune.predict.schedule import layers_of_rank
from autotune.spec.config import load_config

DSV3 = load_config(["model=deepseek-v3"]).model


@pytest.mark.parametrize("layers, pp, vpp", [(61, 8, 1), (61, 8, 4), (10, 4, 1), (11, 4, 1), (94, 8, 4), (7, 2, 1)])
def test_stage_split_matches_the_layer_count_rule(layers, pp, vpp):
    sizes = moe._stage_sizes(layers, pp * vpp)
    assert sum(sizes) == layers
    for r in range(pp):
        assert sum(sizes[j] for j in range(r, pp * vpp, pp)) == int(layers_of_rank(layers, pp, vpp, r))


def test_deepseek_v3_moe_layers_per_pipeline_rank():
    """61 layers over pp=8: base 7, 5 extra on stages 1..5 -> [7, 8, 8, 8, 8, 8, 7, 7]. Rank 0 holds layers 0-6, of
    which 0-2 are dense (first_k_dense_replace=3): 4 MoE layers; ranks 1-5 eight each; ranks 6, 7 seven each."""
    got = [int(moe.moe_layers_of_rank(DSV3, 8, 1, r)) for r in range(8)]
    assert got == [4, 8, 8, 8, 8, 8, 7, 7] and sum(got) == DSV3.num_moe_layers == 58


def test_expert_params_and_shard_group():
    """DeepSeek-V3 MoE layer: 256 experts x 3 x 7168 x 2048 = 11,274,289,152 parameters; on rank 1 of pp=8 with
    ep=64, etp=1: 8 layers x that / 64 = 1,409,286,144. edp of 1024 GPUs at pp=8, ep=64: 1024/512 = 2."""
    assert moe.expert_layer_params(DSV3) == 256 * 3 * 7168 * 2048 == 11_274_289_152
    assert float(moe.expert_params_of_rank(DSV3, 8, 1, 1, 64, 1)) == 8 * 11_274_289_152 / 64
    assert int(moe.expert_shard_group(1024, 8, 64, 1)) == 2


def test_a2a_seconds_by_hand():
    """H100 preset (NVLink 450 GB/s, NIC 50 GB/s per GPU, comm_efficiency e, 8 GPUs per node), bf16, h 7168, 32768
    copies. ep=8, etp=1: all 7 peers in the node, 7/8 of the copies over NVLink: 7/8*32768*7168*2 / (450e9 e) + 7 x
    intra latency. ep=32: 7 of 31 peers in the node; the NIC carries 24/31 of what is sent, the slower side. ep=1: 0."""
    c = load_config(["cluster=h100-sxm-80gb"]).cluster
    e = c.comm_efficiency
    sent8 = 7 / 8 * 32768 * 7168 * 2
    want8 = sent8 / (c.intra_node_bw_bytes_per_s * e) + 7 * c.intra_node_latency_s
    assert float(moe.a2a_s(32768, 7168, 2, 8, 1, c)) == pytest.approx(want8, rel=1e-12)
    sent32 = 31 / 32 * 32768 * 7168 * 2
    intra, inter = c.intra_node_bw_bytes_per_s * e, c.inter_node_bw_bytes_per_s * e
    want32 = max(sent32 * 7 / 31 / intra, sent32 * 24 / 31 / inter) + 31 * c.inter_node_latency_s
    assert float(moe.a2a_s(32768, 7168, 2, 32, 1, c)) == pytest.approx(want32, rel=1e-12)
    assert float(moe.a2a_s(32768, 7168, 2, 1, 1, c)) == 0.0


def test_routing_imbalance():
    """Balanced: 1. Learned over ep=8 ranks of mean 32768 copies: 1 + sqrt(32768 x 7/8) x sqrt(2 ln 8) / 32768
    = 1.0107 (sampling noise only); never below 1, and 1 at ep=1."""
    assert float(moe.routing_imbalance(True, 32768, 8)) == 1.0
    got = float(moe.routing_imbalance(False, 32768, 8))
    assert got == pytest.approx(1 + np.sqrt(32768 * 7 / 8) * np.sqrt(2 * np.log(8)) / 32768, rel=1e-12)
    assert 1.0 < got < 1.02 and float(moe.routing_imbalance(False, 100, 1)) == 1.0


def test_moe_block_bytes_and_gemm_rows():
    """Qwen3-30B-A3B (h 2048, E 128, k 8, aux 0.001), bf16, per routed token, forward (moe_block_bytes_per_token):
    router (2x128 + 4x128) + (4x128 + 4x128) + (4x128 + 12x8) + (4x128 + 12x8 + 12x8) = 3,104; sort 8 passes x 32 B x 8
    + 16 x 8 = 2,176; permute and unpermute 2 x 2 x 8 x 2048 + 8 x 8 = 65,600 each; combine (2x2x8x2048 + 4x8) +
    (2x8x2048 + 2x2048) = 102,432; aux 12 x 128 + 12 x 8 = 1,632: 240,544 bytes. Rows per expert: 4096 local copies
    x ep 8 / 128 experts = 256."""
    q = load_config(["model=qwen3-30b-a3b"]).model
    assert moe.moe_block_bytes_per_token(q, 2) == 3104 + 2176 + 2 * 65600 + 102432 + 1632 == 240_544
    assert float(moe.expert_gemm_m(4096, 8, 1, q)) == 256


def test_fused_moe_block_bytes_keep_the_gathers_and_scatters():
    """The same Qwen3-30B-A3B block with its elementwise chains fused (plan.compile): router 2x128 + 4x128 + 12x8 = 864;
    sort 2,176 and permute / unpermute 65,600 each unchanged (library sort, gather, scatter); combine one kernel
    2x8x2048 + 4x8 + 2x2048 = 36,896; aux 4x128 + 12x8 = 608: 171,744 bytes, 71% of the eager 240,544 — the index
    traffic stays, unlike the dense block's fitted factor (0.36)."""
    q = load_config(["model=qwen3-30b-a3b"]).model
    assert moe.fused_moe_block_bytes_per_token(q, 2) == 864 + 2176 + 2 * 65600 + 36896 + 608 == 171_744


def test_expert_cast_bytes_follow_the_trainer():
    """bench_model, fp32 experts computed in bf16 (p 4, c 2), 1e9 expert parameters in the layer:
    ZeRO 0, 2 micro-batches: forward cast 6 + gradient cast 6 + accumulate 12 x 1/2 = 18 bytes per parameter;
    1 micro-batch: 12 (the first gradient is kept, not added). ZeRO 3 over edp 4, m 2: gathers 2 x 6/4 + gradient
    cast 6 + accumulate 6/4 = 10.5. fp32 compute: no cast."""
    assert float(moe.expert_cast_bytes(1e9, 0, 1, 2, 2, 4)) == 18e9
    assert float(moe.expert_cast_bytes(1e9, 1, 8, 1, 2, 4)) == 12e9
    assert float(moe.expert_cast_bytes(1e9, 3, 4, 2, 2, 4)) == pytest.approx(10.5e9)
    assert float(moe.expert_cast_bytes(1e9, 2, 4, 2, 2, 4)) == pytest.approx(9.0e9)  # one gather: 6/4 + 6 + 6/4
    assert float(moe.expert_cast_bytes(1e9, 0, 1, 2, 4, 4)) == 0.0


def test_collapsed_routing_imbalance_by_hand():
    """A collapsed router (train.moe_routing="collapsed"): the busiest EP rank takes every copy its E/ep local
    experts can, ep x min(k, E/ep) / k of the mean. Llama-4-Scout (E 16, top-1) at EP 4: 4 (torchao's Scout table,
    autotune/fitting/public_moe_runs.py COLLAPSED_ROUTING_ROWS); DeepSeek-V3 (E 256, top-8) at EP 64: 4 local experts
    take 4 of a token's 8 copies, 64 x 4 / 8 = 32; EP 1: 1; a capacity factor caps it (GShard Sec 2.2)."""
    scout = load_config(["model=llama-4-scout"]).model
    assert float(moe.collapsed_imbalance(scout, 4)) == 4.0
    assert float(moe.collapsed_imbalance(DSV3, 64)) == 64 * 4 / 8 == 32.0
    assert float(moe.collapsed_imbalance(scout, 1)) == 1.0
    capped = dataclasses.replace(scout, moe_capacity_factor=1.25)
    assert float(moe.collapsed_imbalance(capped, 4)) == 1.25


def test_collapsed_expert_bytes_by_hand():
    """Scout at EP 4, 65536 tokens on the rank (torchao's run: local batch 8 x seq 8192), bf16, no recompute: 3 x
    65536 extra copies on the busiest rank, each leaving the permuted copy and its index (8 + 2 x 5120) and the
    SwiGLU's four tensors (4 x 2 x 8192) = 75784 bytes: 14,899,740,672 bytes per MoE layer (13.9 GiB). Selective
    recompute drops silu's output (3 x 2 x 8192); full recompute keeps the layer input only: 0."""
    scout = load_config(["model=llama-4-scout"]).model
    got = float(moe.collapsed_expert_bytes(scout, 65536, 1, False, 0, 2, 4))
    assert got == 3 * 65536 * (8 + 2 * 5120 + 4 * 2 * 8192) == 14_899_740_672
    sel = float(moe.collapsed_expert_bytes(scout, 65536, 1, False, 1, 2, 4))
    assert sel == 3 * 65536 * (8 + 2 * 5120 + 3 * 2 * 8192)
    assert float(moe.collapsed_expert_bytes(scout, 65536, 1, False, 2, 2, 4)) == 0.0
    assert float(moe.collapsed_expert_bytes(scout, 65536, 1, False, 0, 2, 1)) == 0.0  # no EP: nothing to collapse onto


def test_collapsed_expert_bytes_per_copy_measured_on_cpu():
    """What one received copy leaves saved on the expert side, measured with autograd's saved-tensor hooks (unique
    storages, weights excluded) on torchtitan's bf16 expert path (models/moe.py @ 9603872e `_run_experts_grouped_mm`,
    its input the copy `_permute` gathers, expert_parallel.py `x[permuted_indices, :]`): the index (int64), the
    permuted copy and four SwiGLU tensors, 8 + 2h + 4 x 2F bytes per copy, = collapsed_expert_bytes' per copy (at EP 2
    a top-1 collapse doubles the busiest rank's copies: one extra copy per routed token)."""
    import torch
    import torch.nn.functional as F

    scout = load_config(["model=llama-4-scout"]).model
    e, h, f, n = 4, 64, 128, 512
    tiny = dataclasses.replace(scout, hidden_size=h, moe_ffn_hidden_size=f, num_experts=e)
    src = torch.randn(n, h, dtype=torch.bfloat16, requires_grad=True)
    w1, w3 = (torch.randn(e, f, h, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    w2 = torch.randn(e, h, f, dtype=torch.bfloat16, requires_grad=True)
    offs = torch.cumsum(torch.full((e,), n // e), dim=0, dtype=torch.int32)
    saved: dict[int, int] = {}

    def keep(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        x = src[torch.randperm(n), :]
        g = F.silu(torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs))
        g = g * torch._grouped_mm(x, w3.transpose(-2, -1), offs=offs)
        torch._grouped_mm(g, w2.transpose(-2, -1), offs=offs)
    weights = {w.untyped_storage().data_ptr() for w in (w1, w2, w3, src)}
    measured = sum(v for k, v in saved.items() if k not in weights) - offs.untyped_storage().nbytes()
    assert measured == n * (8 + 2 * h + 4 * 2 * f)
    assert float(moe.collapsed_expert_bytes(tiny, n, 1, False, 0, 2, 2)) == measured


def test_bench_model_fsdp_buffer_leaves_out_ignored_experts():
    # bench_model at ZeRO 0/1 passes the routed experts to fully_shard as ignored_params (bench_model/parallel/
    # data_parallel.py apply_data_parallel), so FSDP2's per-block unsharded bf16 gradient + fp32 reduce buffer covers
    # the block's other parameters only: (2 + 4) bytes x (layer - experts). At ZeRO 2/3 the experts' own unit is
    # priced with the block's. H200 2026-11-29 (h200_bench_model_2026-11-29.csv): Mixtral-8x7B cut to 2 layers, dp 1,
    # bf16: 57.21 GiB allocated measured, 64.26 predicted with the experts in the buffer, 56.39 without
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.core.types import ParallelPlan
    from autotune.predict.memory import memory_arrays

    cfg = load_config(["model=mixtral-8x7b", "model.num_layers=2", "train.seq_len=4096", "train.global_batch_size=2"])
    m, h = cfg.model, cfg.model.hidden_size
    arr = arrays_from_plans([ParallelPlan(micro_batch_size=1, grad_accum_steps=2, zero_stage=z) for z in (0, 2)])
    buf = memory_arrays(arr, m, cfg.train, cfg.cluster)["buffers"]
    experts = m.num_experts * 3 * h * m.moe_ffn_hidden_size  # 1,409,286,144 a layer
    assert experts == 1_409_286_144
    assert buf[1] - buf[0] == pytest.approx(6 * experts)
    attn_norms_router = m.layer_params() - experts  # what the z0 buffer covers: q, k, v, o, two norms, the router
    assert buf[0] == pytest.approx(6 * attn_norms_router)

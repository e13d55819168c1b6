"""ModelSpec's MoE/MLA counts against hand arithmetic and the built bench_model module, and the single-device MoE
block's pieces (grouped GEMM vs loop, balanced routing, the auxiliary loss's gradient)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from moe_shapes import TINY_MLA

from autotune.spec.config import load_config
from bench_model.model import Llama
from bench_model.moe import MoE, balanced_topk, expert_counts, grouped_mm_supported

MLA = TINY_MLA


def _spec(*overrides):
    return load_config(["model=tiny-moe", *overrides]).model


def test_tiny_moe_counts_by_hand():
    m = _spec()
    # h=64, V=512, 4 heads of 16, 2 KV heads (kv_dim 32): attention 2*64*64 + 2*64*32 = 12288, norms 2*64.
    # Layer 0 dense: 3*64*192 = 36864. MoE layers 1-3: router 64*8 = 512, experts 8*3*64*64 = 98304, shared
    # 3*64*64 = 12288. Embedding and head 512*64 = 32768 each, final norm 64.
    dense, moe = 12288 + 36864 + 128, 12288 + 512 + 98304 + 12288 + 128
    assert m.layer_params(0) == dense and m.layer_params(1) == moe
    assert m.num_params() == 32768 + dense + 3 * moe + 64 + 32768 == 485440
    assert m.matmul_params() == 4 * 12288 + 36864 + 3 * (512 + 98304 + 12288) + 32768
    # active: top-2 of the 8 experts (2*12288) + router + shared expert
    assert m.active_matmul_params() == 4 * 12288 + 36864 + 3 * (512 + 2 * 12288 + 12288) + 32768 == 230912
    # 6 N_active + attention 6*L*s*heads*head_dim (causal, PaLM App. B halved) at s = 64
    assert m.flops_per_token(64) == 6 * 230912 + 6 * 4 * 64 * 4 * 16
    assert m.layer_params() == (dense + 3 * moe) / 4  # the mean, for per-layer memory terms


def test_mla_counts_by_hand():
    m = _spec(*MLA)
    # wq_a 64*32 + q_norm 32 + wq_b 32*4*24; wkv_a 64*(32+8) + kv_norm 32 + wkv_b 32*4*(16+16); wo 4*16*64
    attn = 64 * 32 + 32 + 32 * 4 * 24 + 64 * 40 + 32 + 32 * 4 * 32 + 4 * 16 * 64
    assert m.attention_params() == attn == 15936
    # MLA attention FLOPs: 3*L*s*heads*(d_qk + d_v) = 3*4*64*4*(24+16) (the GQA formula with d_qk = d_v = 16
    # gives 6*L*s*heads*16)
    assert m.attention_flops_per_token(64) == 3 * 4 * 64 * 4 * 40


@pytest.mark.parametrize(
    "overrides",
    [(), MLA, (*MLA, "model.q_lora_rank=0", "model.moe_router=sigmoid"), ("model.moe_layer_freq=2",)],
    ids=["moe", "mla", "mla_noqlora_sigmoid", "every_other_layer"],
)
def test_counts_match_the_built_module(overrides):
    spec = _spec(*overrides)
    with torch.device("meta"):
        model = Llama(spec, 64)
    assert sum(p.numel() for p in model.parameters()) == spec.num_params()
    matmul = sum(p.numel() for n, p in model.named_parameters() if p.ndim >= 2 and "tok_embeddings" not in n)
    assert matmul == spec.matmul_params()


def test_grouped_mm_equals_the_expert_loop():
    if not grouped_mm_supported(torch.zeros(1), 8, 8):
        pytest.skip("this torch build has no CPU fp32 torch._grouped_mm (the loop is then the only path)")
    torch.manual_seed(0)
    spec = _spec()
    moe = MoE(spec, 16)
    for p in moe.parameters():
        torch.nn.init.normal_(p, std=0.1)
    x = torch.randn(2, 16, 64, requires_grad=True)
    out = moe(x)
    grads = torch.autograd.grad(out.square().sum(), [x, moe.experts.w1, moe.experts.w2])
    assert moe.experts.path == "grouped_mm"
    moe.experts.allow_grouped_mm = False  # the fallback the module takes on other builds
    out2 = moe(x)
    grads2 = torch.autograd.grad(out2.square().sum(), [x, moe.experts.w1, moe.experts.w2])
    assert moe.experts.path == "loop"
    torch.testing.assert_close(out, out2, rtol=1e-5, atol=1e-6)
    for a, b in zip(grads, grads2):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_balanced_routing_is_even():
    topi = balanced_topk(10, 2, 8, torch.device("cpu"))
    assert topi[0].tolist() == [0, 1] and topi[4].tolist() == [0, 1]  # token 4: slots 8, 9 -> experts 0, 1
    # 20 copies over 8 experts: 2 or 3 each, the first 20 mod 8 = 4 experts one more; equal to reading the indices
    assert expert_counts(topi, 8, balanced=True) == [3, 3, 3, 3, 2, 2, 2, 2] == expert_counts(topi, 8, False)


def test_aux_loss_gradient_is_the_sequence_wise_balance_loss():
    """The gradient the block injects equals autograd of coeff * sum_e f_e P_e (DeepSeek-V3 Eqs. 17-20) computed
    directly from the router scores, per sequence and averaged over the sequences."""
    torch.manual_seed(0)
    spec = dataclasses.replace(_spec(), moe_aux_loss_coeff=0.5, moe_shared_expert_ffn_hidden_size=0)
    moe = MoE(spec, 16)
    for p in moe.parameters():
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(2, 16, 64)
    # the output's own gradient is zeroed, so what reaches the gate is the injected auxiliary gradient alone
    injected = torch.autograd.grad((moe(x) * 0.0).sum(), moe.gate.weight)[0]
    scores = torch.softmax(x.reshape(-1, 64) @ moe.gate.weight.T, -1)
    topi = scores.topk(2, -1).indices
    f = torch.nn.functional.one_hot(topi.view(2, -1), 8).sum(1).float() * 8 / (2 * 16)
    p = scores.view(2, 16, 8).mean(1)
    aux = 0.5 * (f * p).sum() / 2
    direct = torch.autograd.grad(aux, moe.gate.weight)[0]
    assert direct.abs().max() > 1e-4  # the check below can fail
    torch.testing.assert_close(injected, direct, rtol=1e-5, atol=1e-8)


def test_llama_4_scout_preset_counts_by_hand():
    """search_spaces/model/llama-4-scout.yaml (meta-llama/Llama-4-Scout-17B-16E config.json text_config): per layer
    GQA attention 2*5120*(5120 + 8*128), 16 routed experts + 1 shared of 3*5120*8192, the router 5120*16 plus its 16
    selection biases (sigmoid router), two RMSNorms; untied 202048-token embedding and head. Model card: 17B active."""
    m = load_config(["model=llama-4-scout"]).model
    layer = 2 * 5120 * (5120 + 1024) + 17 * 3 * 5120 * 8192 + 5120 * 16 + 16 + 2 * 5120
    assert m.num_params() == 48 * layer + 2 * 202048 * 5120 + 5120 == 107_769_861_888
    active = m.active_matmul_params() + m.embedding_params()  # top-1 routed + shared expert per token
    assert round(active / 1e9) == 17 and m.num_moe_layers == 48

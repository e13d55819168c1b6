"""The nanotron profile, hand-computed per layout from nanotron's source (autotune/predict/frameworks/nanotron.py's
docstring names the version: the nanotron 0.4 wheel, `file:line` below are its lines; bench_cluster pins the
`bench_cluster` branch by name only). Each expected number is written out as the arithmetic of the cited terms.

Model: L=8, h=256, f=688, 8 heads, 4 kv heads (head_dim 32: q = 256, k = 128), V=1000, tied; seq 256, bf16 (c = 2)."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.layouts.rules import rejections
from autotune.predict.frameworks import get_profile
from autotune.predict.memory import memory_arrays
from autotune.predict.rank_params import rank_params

GiB = 2**30
M = ModelSpec(
    name="t", num_layers=8, hidden_size=256, ffn_hidden_size=688, num_heads=8, num_kv_heads=4, vocab_size=1000,
    tie_embeddings=True,
)  # fmt: skip
MHA = ModelSpec(
    name="m", num_layers=8, hidden_size=256, ffn_hidden_size=688, num_heads=8, num_kv_heads=8, vocab_size=1000,
    tie_embeddings=True,
)  # fmt: skip
CLUSTER = ClusterSpec(
    name="c", device_memory_bytes=80 * GiB, peak_flops_bf16=1e15, peak_flops_fp32=1e14, gpus_per_node=8,
    intra_node_bw_bytes_per_s=1e11, intra_node_latency_s=1e-6, inter_node_bw_bytes_per_s=1e10, inter_node_latency_s=1e-5,
)  # fmt: skip
S, H, F, Q, K, A, V = 256, 256, 688, 256, 128, 8, 1000
PROF = get_profile("nanotron")


def _mem(model=M, **plan):
    p = ParallelPlan(**plan)
    train = TrainSpec(seq_len=S, global_batch_size=p.dp * p.micro_batch_size * p.grad_accum_steps, framework="nanotron")
    return memory_arrays(arrays_from_plans([p]), model, train, CLUSTER), p, train


def _layer_bytes_per_token(t: int, sp: bool, q_saved: int = Q, mbs: int = 1) -> float:
    """Per token: two TritonRMSNorms (nn/layer_norm.py:24-50: input c*h + fp32 rstd 4, /t with REDUCE_SCATTER);
    qkv_proj and gate_up_proj inputs all-gathered then saved by F.linear (functional.py:341-359: 2 * c*h, never /t);
    flash_attn_varlen_func (llama.py:213) q, k+v (one tensor, :547), out, fp32 lse per head: (c(q + 2k + q) + 4a)/t;
    SwiGLU unfused (llama.py:127-134): gate_up out 2f, silu out f, product f: 4cf/t; at mbs > 1 o_proj's folded
    copy of its transposed input (llama.py:596-598 @ a27e8fe8): c q/t."""
    spd = t if sp else 1
    o_copy = Q if mbs > 1 else 0
    return 2 * (2 * H + 4) / spd + 2 * 2 * H + (2 * (q_saved + 2 * K + Q + o_copy) + 4 * A) / t + 4 * 2 * F / t


def test_dp4_layer_activations_and_model_states():
    """dp=4, zero 0, mbs 1, gas 1: 1f1b at pp=1 holds one micro-batch."""
    mem, p, train = _mem(dp=4, micro_batch_size=1)
    per_token = 2 * (512 + 4) + 1024 + (2 * (256 + 256 + 256) + 32) + 8 * 688  # = 9128 bytes
    assert _layer_bytes_per_token(1, False) == per_token == 9128
    head = (512 + 4) + 512  # final norm input + rstd, lm_head's input (llama.py:713-738)
    # the forward's end (branch bench_cluster @ a27e8fe8): the caller's fp32 logits (llama.py:808, :912-916) + the
    # fp32 max-shifted copy that becomes the saved softmax (functional.py:44, :75-86): 8 bytes per logit
    logits = (4 + 4) * V
    assert float(mem["activations"][0]) == pytest.approx(S * (8 * per_token + head))
    assert float(mem["logits"][0]) == pytest.approx(S * logits)
    # bytes per parameter: bf16 param 2, bf16 .grad 2 (gradient_accumulator.py:212-223), fp32 accumulator 4
    # (:158-173), DDP buckets 2 (dp > 1, trainer.py:608, :669-674), fp32 master 4 (:95), AdamW 8 = 22
    psi = float(rank_params(M, 1, 1, 1)["first"])
    total = sum(float(mem[k][0]) for k in ("params", "grads", "optimizer"))
    assert total == pytest.approx(22 * psi)


def test_tp2_sp_divides_norms_but_keeps_gathered_linear_inputs():
    """tp=2, REDUCE_SCATTER (sequence_parallel), synchronous linears (bench_cluster: async false)."""
    got = float(PROF.layer_activations(M, S, 1, 2, True, 0, 2)["saved"])
    per_token = (2 * (512 + 4)) / 2 + 1024 + (2 * 768 + 32) / 2 + 8 * 688 / 2  # = 5076
    assert got == pytest.approx(S * per_token) and per_token == _layer_bytes_per_token(2, True) == 5076
    # without SP only the norms change: 2 * 516 instead of 2 * 516 / 2
    assert float(PROF.layer_activations(M, S, 1, 2, False, 0, 2)["saved"]) == pytest.approx(S * (per_token + 516))


def test_mha_keeps_the_whole_qkv_copy_and_full_recompute_keeps_the_layer_input():
    """MHA (bench_cluster's models): q is a view of the contiguous [3, b, s, h, d] copy (llama.py:378), so the
    3 * c*h of it stays; recompute_layer keeps c*h per token (/t with SP) and one layer is transient."""
    mha = float(PROF.layer_activations(MHA, S, 1, 1, False, 0, 2)["saved"])
    k_mha = 256  # kv_dim = 8 heads * 32
    per_token = 2 * (512 + 4) + 1024 + (2 * (3 * 256 + 2 * k_mha + 256) + 32) + 8 * 688
    assert mha == pytest.approx(S * per_token)
    full = PROF.layer_activations(M, S, 2, 2, True, 2, 2)
    assert float(full["saved"]) == pytest.approx(S * 2 * 2 * H / 2)
    assert float(full["transient"]) == pytest.approx(S * 2 * _layer_bytes_per_token(2, True, mbs=2))


@pytest.mark.parametrize("engine,first,last", [("1f1b", 4, 1), ("gpipe", 8, 8)])
def test_pp4_engines_in_flight(engine, first, last):
    """pp=4, m=8: 1f1b rank 0 runs pp - 0 - 1 = 3 warm-up forwards then one more before its first backward (engine.py:
    222-330): 4 in flight; the last rank 1. afab (engine.py:165-219) runs all 8 forwards first on every rank, and the
    last rank keeps all 8 loss graphs (head tensors and fp32 softmax)."""
    assert float(PROF.inflight(4, 1, 8, _code(engine), 0)) == first
    assert float(PROF.last_stage_inflight(4, 8, _code(engine))) == last
    mem, p, train = _mem(pp=4, grad_accum_steps=8, pp_schedule=engine, micro_batch_size=1)
    worst = int(mem["worst_pp_rank"][0])
    # nanotron's compute-balanced split (models/base.py build_model @ a27e8fe8): a layer costs 4*8*32*256 + 3*688*256
    # = 790,528, lm_head 1000*256 = 256,000, total 6,580,224; thresholds 1,645,056 / 3,290,112 / 4,935,168 = 2.08 /
    # 4.16 / 6.24 layers: rank 0 takes 3 layers (the third passes 2.08), rank 1 two, rank 2 two, rank 3 one + head
    layers = {0: 3, 3: 1}
    per_layer = S * 9128
    head = S * ((512 + 4) + 512)
    expect = {0: layers[0] * per_layer * first, 3: layers[3] * per_layer * (1 if engine == "1f1b" else 8) + head * last}
    assert float(mem["activations"][0]) == pytest.approx(expect[worst])
    if worst == 3:
        assert float(mem["logits"][0]) == pytest.approx(S * 8 * V * last)


def test_afab_at_pp1_holds_every_micro_batch():
    """The trainer always runs the engine; afab at pp=1 still does all m forwards before the backwards."""
    assert float(PROF.inflight(1, 1, 4, _code("gpipe"), 0)) == 4
    assert float(PROF.inflight(1, 1, 4, _code("1f1b"), 0)) == 1


def test_zero1_shards_master_and_adam_only():
    """ZeRO-1 over dp=8 (helpers.py:202-207): the fp32 grad buffer stays whole (helpers.py:186-188
    grad_buckets_named_params = all parameters): 2 + 2 + 4 + 2 (DDP) + (4 + 8)/8 = 11.5 bytes per parameter."""
    train = TrainSpec(seq_len=8, global_batch_size=8, framework="nanotron")
    ms = PROF.model_states(1e9, 1, 8, train)
    assert sum(float(v) for v in ms.values()) == pytest.approx(11.5e9)
    assert float(ms["grads"]) == pytest.approx(8e9) and float(ms["optimizer"]) == pytest.approx(1.5e9)


def test_nanotron_rules_selective_and_1f1b_with_pp_minus_one_micro_batches():
    def reject(**plan):
        p = ParallelPlan(**plan)
        train = TrainSpec(seq_len=S, global_batch_size=p.dp * p.grad_accum_steps, framework="nanotron")
        return rejections(arrays_from_plans([p]), M, train, CLUSTER)[0][0]

    assert reject(dp=2, recompute="selective") == "nanotron_selective"
    assert reject(pp=4, grad_accum_steps=3, pp_schedule="1f1b") in (None, "")  # engine.py:236-238: m >= pp - 1
    assert reject(pp=4, grad_accum_steps=2, pp_schedule="1f1b") == "nanotron_pp_microbatches"


def _code(name: str) -> int:
    from autotune.core.plan_arrays import SCHEDULE_CODE

    return SCHEDULE_CODE[name]


def test_other_profiles_keep_one_head_in_flight():
    assert np.all(get_profile("bench_model").last_stage_inflight(4, 8, _code("gpipe")) == 1.0)


def test_bf16_grads_are_not_at_the_forward_end():
    """FP32GradientAccumulator.backward (gradient_accumulator.py:204-223 @ a27e8fe8) sets every bf16 .grad to None
    after each micro-batch's backward: the allocated peak is the larger of the forward's end (all activations +
    logits, no bf16 grads) and a backward's end (bf16 grads, that micro-batch's layers and logits freed)."""
    mem, p, train = _mem(dp=4, micro_batch_size=1)
    psi = float(rank_params(M, 1, 1, 1)["first"])
    states = 22 * psi
    act, logits = float(mem["activations"][0]), float(mem["logits"][0])
    assert logits == S * 8 * V
    fwd_end = states - 2 * psi + act + logits  # 20 bytes per parameter outside a backward
    bwd_end = states + act - S * 8 * 9128  # the 8 layers' saved tensors freed, the head's kept (conservative)
    assert float(mem["allocated"][0]) == pytest.approx(max(fwd_end, bwd_end))
    assert fwd_end > bwd_end  # this layout (seq 256, V 1000): the forward's end; 2 * psi is 2.6 MB here
    # fp32 compute has no accumulator (accumulate_grad_in_fp32 only matters for a lower precision): nothing freed
    f32 = TrainSpec(seq_len=S, global_batch_size=4, framework="nanotron", compute_dtype="fp32")
    assert PROF.backward_only_grads(1e9, f32) == 0.0 and PROF.backward_only_grads(1e9, train) == 2e9


def test_o_proj_saves_a_copy_of_its_transposed_input_at_mbs_above_one():
    """llama.py:596-598 @ a27e8fe8 hands o_proj flash-attn's output viewed [b, s, h/t] and transposed to [s, b, h/t];
    F.linear folds that 3-D non-contiguous input through at::matmul's reshape, a copy unless b = 1, and saves the
    copy. Measured here with saved_tensors_hooks (real torch, CPU), then the profile's c q/t per token."""
    import torch
    import torch.nn.functional as F

    w = torch.randn(2 * H, H, dtype=torch.bfloat16, requires_grad=True)  # the input is saved for its gradient
    for b, copied in ((1, False), (2, True)):
        out = torch.randn(b * 16, 8, H // 8, dtype=torch.bfloat16, requires_grad=True)  # flash-attn [b*s, heads, d]
        x = out.contiguous().view(b, 16, H).transpose(0, 1)
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
            F.linear(x, w)
        inputs = [t for t in saved if t.shape[-1] == H and t.numel() == b * 16 * H]
        assert (
            len(inputs) == 1 and (inputs[0].untyped_storage().data_ptr() != out.untyped_storage().data_ptr()) == copied
        )
    one = float(PROF.layer_activations(M, S, 1, 2, True, 0, 2)["saved"])
    two = float(PROF.layer_activations(M, S, 2, 2, True, 0, 2)["saved"])
    assert two - 2 * one == pytest.approx(2 * S * 2 * Q / 2)  # 2 sequences x S tokens x c q / t

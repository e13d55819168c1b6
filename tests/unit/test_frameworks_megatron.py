"""The megatron profile against Megatron-LM's own analytical memory report.

Megatron's megatron/training/theoretical_memory_usage.py cannot run here (it needs the megatron package and its
args), so `_tmu_weight_and_optimizer` and `_tmu_activation` below transcribe it line by line from
NVIDIA/Megatron-LM @ 38644dd756c46142787b1bd5dc08ed82ca0e6de1 (compute_weight_and_optimizer_memory,
compute_activation_memory; report_theoretical_memory applies them with sequence parallel + selective recompute).
Two inputs are adapted for Llama blocks, and only these: SwiGLU's fc1 is h x 2f, so the formula gets
ffn_hidden_size = 3f/2 (its 2-matrix MLP then counts 3hf parameters and its 4f/h activation term becomes fc1's
output 4f/h + fc2's input 2f/h); and with GQA its activation term's Q/K (4sbh) and V (2sbh) become 2sbh + 2sbk and
2sbk, as its own weight term already does with num_query_groups (`gqa_act=True`). MHA configs use the formula as is.
"""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import CODES, RECOMPUTE_CODE, arrays_from_plans
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.predict.frameworks import get_profile
from autotune.predict.frameworks.megatron import MegatronProfile
from autotune.predict.memory import memory_arrays
from autotune.spec.config import load_config


def _tmu_weight_and_optimizer(args) -> float:
    """compute_weight_and_optimizer_memory (bytes)."""
    if not args.group_query_attention:
        args.num_query_groups = args.num_attention_heads
    num_experts = 1
    num_parameters_in_transformer_layers = (
        2
        * args.num_layers
        * args.hidden_size
        * args.hidden_size
        * (
            1
            + ((args.ffn_hidden_size / args.hidden_size) * num_experts)
            + (args.num_query_groups / args.num_attention_heads)
            + (2 / args.hidden_size)
            + (1 / (args.num_layers * args.hidden_size))
        )
    )
    embedding_size = args.hidden_size * args.padded_vocab_size
    most_loaded = (
        (num_parameters_in_transformer_layers / args.pipeline_model_parallel_size) + embedding_size
    ) / args.tensor_model_parallel_size
    if args.untie_embeddings_and_output_weights and args.pipeline_model_parallel_size == 1:
        most_loaded += embedding_size / args.tensor_model_parallel_size
    num_bytes_per_parameter = 18 if not args.use_distributed_optimizer else 6 + (12 / args.data_parallel_size)
    return most_loaded * num_bytes_per_parameter


def _tmu_activation(args, num_microbatches, gqa_act: bool = False) -> float:
    """compute_activation_memory (bytes), first pipeline stage."""
    per_layer = 18 + (4 * (args.ffn_hidden_size / args.hidden_size))
    if gqa_act:  # Q 2 + K 2k/h + V 2k/h instead of Q/K 4 + V 2 (see module docstring)
        per_layer -= 4 * (1 - args.num_query_groups / args.num_attention_heads)
    activation_memory = (args.seq_length * args.micro_batch_size * args.hidden_size) * per_layer
    activation_memory *= args.num_layers
    activation_memory += 8 * args.seq_length * args.micro_batch_size * args.pipeline_model_parallel_size
    activation_memory += args.seq_length * args.micro_batch_size * args.hidden_size * args.pipeline_model_parallel_size
    if args.virtual_pipeline_model_parallel_size is not None:
        p, v = args.pipeline_model_parallel_size, args.virtual_pipeline_model_parallel_size
        activation_memory *= 1 + ((p - 1) / (p * v))
    if args.virtual_pipeline_model_parallel_size is None and args.pipeline_model_parallel_size > 1:
        if num_microbatches is not None:
            activation_memory *= min(1, num_microbatches / args.pipeline_model_parallel_size)
    if args.pipeline_model_parallel_size == 1:
        activation_memory += (
            args.seq_length
            * args.micro_batch_size
            * args.hidden_size
            * 4
            * (1 + (args.padded_vocab_size / args.hidden_size))
        )
    return activation_memory / args.tensor_model_parallel_size


LLAMA_8B = ModelSpec(
    name="llama-3.1-8b", num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_heads=32, num_kv_heads=8,
    vocab_size=128256, tie_embeddings=False,
)  # fmt: skip
LLAMA_70B = ModelSpec(
    name="llama-3.1-70b", num_layers=80, hidden_size=8192, ffn_hidden_size=28672, num_heads=64, num_kv_heads=8,
    vocab_size=128256, tie_embeddings=False,
)  # fmt: skip
MHA_3B = ModelSpec(
    name="mha-3b", num_layers=28, hidden_size=3072, ffn_hidden_size=8192, num_heads=32, num_kv_heads=32,
    vocab_size=131072, tie_embeddings=False,
)  # fmt: skip
CLUSTER = ClusterSpec(
    name="h100", device_memory_bytes=80 * 2**30, peak_flops_bf16=989e12, peak_flops_fp32=67e12, gpus_per_node=8,
    intra_node_bw_bytes_per_s=450e9, intra_node_latency_s=1e-6, inter_node_bw_bytes_per_s=50e9,
    inter_node_latency_s=5e-6,
)  # fmt: skip

# (model, seq, dp, tp, pp, vpp, m, sp, distributed optimizer (zero_stage=1), mbs)
CONFIGS = [
    (LLAMA_8B, 4096, 8, 1, 1, 1, 4, False, False, 1),
    (LLAMA_8B, 4096, 8, 2, 1, 1, 4, True, True, 1),
    (LLAMA_8B, 8192, 4, 4, 2, 1, 8, True, True, 1),
    (LLAMA_8B, 8192, 2, 4, 4, 2, 8, True, True, 1),
    (LLAMA_8B, 4096, 16, 2, 4, 1, 2, True, True, 2),  # m < pp: Megatron's 1F1B runs it, min(1, m/pp)
    (LLAMA_70B, 8192, 16, 8, 4, 1, 16, True, True, 1),
    (LLAMA_70B, 8192, 8, 8, 8, 5, 32, True, True, 1),
    (LLAMA_70B, 4096, 32, 8, 2, 1, 8, False, True, 1),
    (MHA_3B, 4096, 8, 4, 2, 1, 8, True, False, 1),
    (MHA_3B, 2048, 4, 2, 1, 1, 2, True, True, 4),
]


def _args(model, seq, dp, tp, pp, vpp, sp, dist_opt, mbs):
    gated = model.block != "gpt"
    return SimpleNamespace(
        num_layers=model.num_layers, hidden_size=model.hidden_size, num_attention_heads=model.num_heads,
        num_query_groups=model.num_kv_heads, group_query_attention=model.num_kv_heads != model.num_heads,
        ffn_hidden_size=model.ffn_hidden_size * (1.5 if gated else 1.0), padded_vocab_size=model.vocab_size,
        untie_embeddings_and_output_weights=not model.tie_embeddings, pipeline_model_parallel_size=pp,
        tensor_model_parallel_size=tp, data_parallel_size=dp, use_distributed_optimizer=dist_opt,
        virtual_pipeline_model_parallel_size=vpp if vpp > 1 else None, seq_length=seq, micro_batch_size=mbs,
        sequence_parallel=sp, recompute_granularity="selective",
    )  # fmt: skip


def _megatron(model, seq, dp, tp, pp, vpp, m, sp, dist_opt, mbs):
    plan = ParallelPlan(
        dp=dp, tp=tp, pp=pp, vpp=vpp, zero_stage=1 if dist_opt else 0, micro_batch_size=mbs, grad_accum_steps=m,
        recompute="selective", sequence_parallel=sp, pp_schedule="interleaved_1f1b" if vpp > 1 else "1f1b",
    )  # fmt: skip
    train = TrainSpec(seq_len=seq, global_batch_size=dp * mbs * m, param_dtype="bf16", framework="megatron")
    # [TMU] literally: without the fused QKV output that Megatron-Core keeps beyond it (the default profile counts it,
    # measured in tests/unit/test_frameworks_megatron_probe.py; test_the_qkv_view_is_the_only_excess_over_tmu)
    return memory_arrays(arrays_from_plans([plan]), model, train, CLUSTER, MegatronProfile(qkv_view=False))


def test_the_qkv_view_is_the_only_excess_over_tmu():
    """The local spec (the probe's) keeps, per layer and token, 2(q_dim + kv_dim)/t bytes more than [TMU] at 2-byte
    activations: the Q and K parts of the fused QKV output v's view keeps (Llama-3.1-8B: q_dim 4096, kv_dim 1024,
    tp 4 -> 2560). Transformer Engine's spec (the default) copies v (get_qkv_layout "not_supported" -> contiguous):
    none; with q/k norms TE's RMSNorm saves contiguous copies of its q and k inputs, the same bytes."""
    model = load_config(["model=llama-3.1-8b"]).model
    lit = MegatronProfile(qkv_view=False).layer_activations(model, 4096, 1, 4, True, 1, 2)["saved"]
    view = 4096 * 2 * (4096 + 1024) / 4
    local = MegatronProfile(transformer_impl="local").layer_activations(model, 4096, 1, 4, True, 1, 2)["saved"]
    assert float(local - lit) == pytest.approx(view)
    assert float(MegatronProfile().layer_activations(model, 4096, 1, 4, True, 1, 2)["saved"] - lit) == 0.0
    qk = replace(model, qk_norm=True)
    te_qk = MegatronProfile().layer_activations(qk, 4096, 1, 4, True, 1, 2)["saved"]
    assert float(te_qk - lit) == pytest.approx(view)


def test_te_fp8_linears_save_their_quantized_inputs():
    """Transformer Engine's FP8 linears save the quantized input ([TE-LIN]: linear.py `saved_inputmat = inputmat` after
    `input_quantizer(inputmat)`; layernorm_linear.py saves the FP8 ln_out) while its fused attention keeps the bf16
    output the projection reads ([TE-ATTN]), which the projection saves as it is ([TE-SOI]: attention.py @
    core_v0.16.1 `set_save_original_input(self.linear_proj)`) except under delayed scaling. Llama-3.1-70B (h 8192,
    f 28672, q_dim 8192), tp 4 with SP, per token and layer, hand: tensorwise (1 byte) (2 - 1)(2 x 8192/4 + 28672/4)
    = 11264 bytes; MXFP8 (1 + 1/32: an E8M0 scale per 32 values) 0.96875 x 11264 = 10912; delayed scaling keeps the
    projection's quantized copy too, 11264 - 1 x 8192/4 = 9216 (MXFP8 has no delayed variant: 10912 again); full
    recompute keeps the layer input only: 0."""
    model = load_config(["model=llama-3.1-70b"]).model
    codes = CODES["fp8"]
    for delayed, fp8, per_token in (
        (False, "tensorwise", 11264.0),
        (False, "mxfp8", 10912.0),
        (False, "none", 0.0),
        (True, "tensorwise", 9216.0),
        (True, "mxfp8", 10912.0),
    ):
        prof = MegatronProfile(fp8_delayed_scaling=delayed)
        cut = prof.fp8_layer_saving(model, 8192, 4, True, RECOMPUTE_CODE["none"], True, codes[fp8], 2)
        assert float(cut) == pytest.approx(8192 * per_token), (delayed, fp8)
    prof = MegatronProfile()
    assert float(prof.fp8_layer_saving(model, 8192, 4, True, RECOMPUTE_CODE["full"], True, codes["mxfp8"], 2)) == 0.0
    # end to end, pp 1, one micro-batch in flight: the rank's activations drop by num_layers x the per-layer saving
    plan = ParallelPlan(dp=1, tp=4, sequence_parallel=True, zero_stage=1)
    for delayed, per_token in ((False, 11264.0), (True, 9216.0)):
        train = TrainSpec(
            seq_len=8192, global_batch_size=1, param_dtype="bf16", framework="megatron", fp8_delayed_scaling=delayed
        )
        act = {
            f: float(memory_arrays(arrays_from_plans([replace(plan, fp8=f)]), model, train, CLUSTER)["activations"][0])
            for f in ("none", "tensorwise")
        }
        assert act["none"] - act["tensorwise"] == pytest.approx(model.num_layers * 8192 * per_token), delayed


def test_hidden_dropout_zero_keeps_no_masks():
    """train.hidden_dropout = 0 (NVIDIA's recipes): torch's dropout returns its input at p = 0 (ATen Dropout.cpp), so
    the two per-layer masks (1 byte per element each, sequence-sharded with SP) and the embedding's go. Llama-3.1-8B,
    seq 4096, tp 4 + SP, pp 1: hand 32 layers x 2 x 4096 x 4096 / 4 + 4096 x 4096 / 4 = 65 x 4 MiB = 260 MiB."""
    model = load_config(["model=llama-3.1-8b"]).model
    plan = ParallelPlan(dp=1, tp=4, sequence_parallel=True, zero_stage=1)
    act = {}
    for p in (0.1, 0.0):
        train = TrainSpec(seq_len=4096, global_batch_size=1, param_dtype="bf16", framework="megatron", hidden_dropout=p)
        act[p] = float(memory_arrays(arrays_from_plans([plan]), model, train, CLUSTER)["activations"][0])
    assert act[0.1] - act[0.0] == 65 * 4 * 2**20
    with pytest.raises(SpecError, match=r"train.hidden_dropout=1.5 must be a probability in \[0, 1\)"):
        TrainSpec(seq_len=8, global_batch_size=1, hidden_dropout=1.5)


@pytest.mark.parametrize("cfg", CONFIGS, ids=[f"{c[0].name}-tp{c[3]}pp{c[4]}v{c[5]}sp{int(c[7])}" for c in CONFIGS])
def test_megatron_profile_matches_theoretical_memory_usage(cfg):
    model, seq, dp, tp, pp, vpp, m, sp, dist_opt, mbs = cfg
    mem = _megatron(*cfg)
    args = _args(model, seq, dp, tp, pp, vpp, sp, dist_opt, mbs)
    if pp > 1:
        assert int(mem["worst_pp_rank"][0]) == 0  # Megatron's formulas describe the first stage
    states = float(mem["params"][0] + mem["grads"][0] + mem["optimizer"][0])
    assert states == pytest.approx(_tmu_weight_and_optimizer(args), rel=0.02)
    if sp:  # the activation formula assumes sequence parallel (report_theoretical_memory returns otherwise)
        act = float(mem["activations"][0] + mem["logits"][0])
        expect = _tmu_activation(args, m, gqa_act=model.num_kv_heads != model.num_heads)
        assert act == pytest.approx(expect, rel=0.02)


def test_megatron_mha_activation_is_the_literal_formula():
    """With MHA and a GELU-sized MLP the per-layer term is Korthikanti's 34sbh/t exactly (18 + 4*4)."""
    gpt = replace(MHA_3B, block="gpt", ffn_hidden_size=4 * MHA_3B.hidden_size)
    prof = MegatronProfile(qkv_view=False)  # [TMU] literally
    act = prof.layer_activations(gpt, 2048, 1, 4, True, 1, 2)["saved"]  # recompute code 1 = selective
    assert float(act) == pytest.approx(34 * 2048 * gpt.hidden_size / 4)


def test_megatron_model_states_bytes_per_parameter():
    """[TMU]: 18 bytes per parameter, 6 + 12/DP with the distributed optimizer."""
    prof = get_profile("megatron")
    train = TrainSpec(seq_len=8, global_batch_size=8, framework="megatron")
    for z, d, per in ((0, 8, 18.0), (1, 8, 6 + 12 / 8), (1, 64, 6 + 12 / 64)):
        ms = prof.model_states(1e9, z, d, train)
        assert sum(float(ms[k]) for k in ("params", "grads", "optimizer", "compute_copy")) == pytest.approx(per * 1e9)
    assert math.isclose(float(prof.model_states(1e9, 1, 8, train)["grads"]), 4e9)  # fp32 main_grad

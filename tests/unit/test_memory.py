"""Memory model: hand-computed cases (arithmetic in the comments) and the Llama block's saved tensors measured with
autograd's saved-tensor hooks on bench_model's own block."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import SCHEDULE_CODE, arrays_from_plans
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.predict.frameworks.bench_model import layer_activation_bytes, model_state_arrays
from autotune.predict.memory import estimate_memory, memory_arrays
from autotune.predict.rank_params import rank_params
from autotune.predict.schedule import accumulated_grad_share, inflight_microbatches, layers_of_rank
from autotune.spec.config import load_config

# L=2, h=8, f=16, 2 heads (head_dim 4), 1 kv head (kv_dim 4), V=10, untied.
# layer: wq 8*8=64, wk 8*4=32, wv 32, wo 64 -> 192; MLP 3*8*16=384; 2 norms 16 -> 592.
# model: embedding 80 + 2*592 + final norm 8 + head 80 = 1352.
SMALL = ModelSpec(
    name="small", num_layers=2, hidden_size=8, ffn_hidden_size=16, num_heads=2, num_kv_heads=1, vocab_size=10
)
BF16 = TrainSpec(seq_len=4, global_batch_size=8)  # fp32 params/grads/Adam, bf16 compute (the trainer's default)
CLUSTER = ClusterSpec(
    name="c",
    device_memory_bytes=10**9,
    peak_flops_bf16=1e12,
    peak_flops_fp32=1e11,
    gpus_per_node=8,
    intra_node_bw_bytes_per_s=1e10,
    intra_node_latency_s=1e-6,
    inter_node_bw_bytes_per_s=1e9,
    inter_node_latency_s=1e-5,
    runtime_overhead_bytes=1000,
    allocator_fragmentation=0.5,
)


def test_small_model_param_count():
    assert SMALL.num_params() == 1352


@pytest.mark.parametrize(
    "stage,dp,expected",
    [
        # (params fp32, compute copy bf16, grads fp32, optimizer: Adam 2 x fp32 [+ ZeRO-1 fp32 param slice])
        (0, 4, (1352 * 4, 1352 * 2, 1352 * 4, 1352 * 8)),  # DDP semantics: replicated; bf16 gathered copy
        (1, 4, (1352 * 4, 1352 * 2, 1352 * 4, 1352 * 8 / 4 + 1352 * 4 / 4)),  # Adam state + its fp32 param slice /4
        (2, 4, (1352 * 4 / 4, 1352 * 2, 1352 * 4 / 4, 1352 * 8 / 4)),  # FSDP2 no-reshard: storage sharded, copy kept
        (3, 4, (1352 * 4 / 4, 0, 1352 * 4 / 4, 1352 * 8 / 4)),  # FSDP2 reshard: all sharded (root copy added later)
    ],
)
def test_model_states_trainer_semantics(stage, dp, expected):
    ms = model_state_arrays(1352, stage, dp, BF16)
    assert (float(ms["params"]), float(ms["compute_copy"]), float(ms["grads"]), float(ms["optimizer"])) == expected


def test_fp32_compute_copy_only_with_a_wrapper():
    fp32 = dataclasses.replace(BF16, precision="fp32", compute_dtype="fp32")
    assert float(model_state_arrays(1352, 0, 1, fp32)["compute_copy"]) == 0  # one rank, no cast: no FSDP wrapper
    assert float(model_state_arrays(1352, 1, 4, fp32)["compute_copy"]) == 1352 * 4  # HSDP gathers (shard=1)
    assert float(model_state_arrays(1352, 2, 4, fp32)["compute_copy"]) == 1352 * 4  # unsharded params kept fwd->bwd


def test_layer_split_follows_bench_model():
    # bench_model/parallel/pipeline.py layer_split: floor(L/S) each, extras to stages 1..S-2, then 0, then S-1.
    # L=10, S=4: [2, 3, 3, 2]; L=11, S=4: [3, 3, 3, 2]; L=10, pp=2, vpp=2 (S=4, [2,3,3,2]): rank 0 holds stages 0, 2
    assert [int(layers_of_rank(10, 4, 1, r)) for r in range(4)] == [2, 3, 3, 2]
    assert [int(layers_of_rank(11, 4, 1, r)) for r in range(4)] == [3, 3, 3, 2]
    assert [int(layers_of_rank(10, 2, 2, r)) for r in range(2)] == [5, 5]
    assert [int(layers_of_rank(7, 2, 1, r)) for r in range(2)] == [4, 3]
    assert int(layers_of_rank(7, 1, 1, 0)) == 7


def test_rank_params_pipeline_and_tied():
    # pp=2: one layer per stage. first = 592 + embedding 80; last = 592 + head 80 + final norm 8
    r = rank_params(SMALL, 1, 2, 1)
    assert (float(r["first"]), float(r["last"]), float(r["second"])) == (672, 680, 680)
    # tp=2: matrices 576 / 2 = 288, norms 16 replicated -> 304 per layer; embedding/head vocab-parallel 40
    r = rank_params(SMALL, 2, 1, 1)
    assert float(r["layer"]) == 304 and float(r["first"]) == 2 * 304 + 40 + 40 + 8
    tied = dataclasses.replace(SMALL, tie_embeddings=True)
    assert float(rank_params(tied, 1, 1, 1)["first"]) == 1352 - 80  # one shared matrix


def test_llama_layer_activations_hand_computed():
    # s=4, b=1, h=8, f=16, kv=4, a=2, c=2 bytes, tp=1. Per token: norms 2*((4+2)*8 + 4) = 104; norm outputs 2*2*8 = 32;
    # attention+MLP 2*(2*8 + 2*4 + 4*16) = 176; logsumexp 4*2 = 8 -> 320 bytes x 4 tokens = 1280;
    # RoPE tables cast to bf16: 4 * s * head_dim * c = 4*4*4*2 = 128. Total 1408.
    assert float(layer_activation_bytes(SMALL, 4, 1, 1, False, 0, 2)["saved"]) == 1408
    # full recompute keeps the layer input: 4 tokens * 8 * 2 = 64; its transient is one whole layer (1408)
    full = layer_activation_bytes(SMALL, 4, 1, 1, False, 2, 2)
    assert (float(full["saved"]), float(full["transient"])) == (64, 1408)
    # selective (region checkpoints around the norms and SwiGLU): norm inputs 2*2*8 = 32; norm outputs 32;
    # attention 2*(2*8 + 2*4) = 48 + MLP w1, w3 outs and the product 2*3*16 = 96; logsumexp 8 -> 216/token x 4 = 864,
    # + RoPE tables 128 = 992. Transient: a norm's internals (4+2)*8 + 4 = 52 > silu output 2*16 = 32, x 4 tokens.
    sel = layer_activation_bytes(SMALL, 4, 1, 1, False, 1, 2)
    assert (float(sel["saved"]), float(sel["transient"])) == (992, 208)


def test_sequence_parallel_keeps_gathered_linear_inputs():
    # DTensor SP divides the norm tensors by t but not the all-gathered matmul inputs (2ch per token).
    t2 = float(layer_activation_bytes(SMALL, 4, 1, 2, False, 0, 2)["saved"])
    sp = float(layer_activation_bytes(SMALL, 4, 1, 2, True, 0, 2)["saved"])
    assert t2 - sp == 4 * 104 / 2  # half of the norms' 104 bytes per token, 4 tokens; the 32 of norm outputs stay


def test_inflight_microbatches():
    one = SCHEDULE_CODE["1f1b"]
    inter = SCHEDULE_CODE["interleaved_1f1b"]
    assert [float(inflight_microbatches(4, 1, 16, one, r)) for r in range(4)] == [4, 3, 2, 1]
    assert float(inflight_microbatches(4, 1, 2, one, 0)) == 2  # capped by the micro-batches there are
    # Korthikanti Eq. 5 note: pp * (1 + (pp-1)/(pp*vpp)) = 4 * (1 + 3/8) = 5.5; last rank ((vpp-1)*pp + 1)/vpp = 2.5
    assert float(inflight_microbatches(4, 2, 16, inter, 0)) == 5.5
    assert float(inflight_microbatches(4, 2, 16, inter, 3)) == 2.5
    assert float(inflight_microbatches(4, 1, 16, SCHEDULE_CODE["gpipe"], 0)) == 16
    assert float(inflight_microbatches(1, 1, 16, one, 0)) == 1


def test_one_round_interleaving_holds_one_chunks_gradient_accumulator():
    # torch.distributed.pipelining + FSDP2 (docs/memory_model.md "Pipeline engine"): at pp <= m < 2 pp an
    # Interleaved1F1B rank runs its chunks' backwards one after the other, so one chunk's fp32 accumulator is alive:
    # the largest chunk, ceil(15 / 2) = 8 of 15 layers (torchtitan's 405B rank 0 at pp 8, vpp 2, m 8)
    one, inter = SCHEDULE_CODE["1f1b"], SCHEDULE_CODE["interleaved_1f1b"]
    assert float(accumulated_grad_share(8, 2, 8, inter, 15)) == 8 / 15
    assert float(accumulated_grad_share(8, 4, 15, inter, 16)) == 4 / 16
    assert float(accumulated_grad_share(8, 2, 16, inter, 15)) == 1.0  # two rounds: every chunk has accumulated
    assert float(accumulated_grad_share(8, 1, 8, one, 15)) == 1.0  # one stage per rank
    # in the estimate: the worst rank of the 405B layout (rank 1, 16 layers) holds 8 of its 16 layers' fp32
    # accumulators at one round (m = 8) and all at two (m = 16); nothing else in "grads" depends on m
    cfg = load_config(["model=llama-3.1-405b", "cluster=h100-sxm-80gb", "train.framework=torchtitan"])
    base = dict(dp=8, tp=8, pp=8, zero_stage=3, sequence_parallel=True, recompute="full", micro_batch_size=4)
    train = dataclasses.replace(cfg.train, global_batch_size=8 * 4 * 8, seq_len=8192)
    one_round = ParallelPlan(**base, vpp=2, pp_schedule="interleaved_1f1b", grad_accum_steps=8)
    two_rounds = dataclasses.replace(one_round, grad_accum_steps=16)
    train2 = dataclasses.replace(train, global_batch_size=8 * 4 * 16)
    g1 = float(memory_arrays(arrays_from_plans([one_round]), cfg.model, train, cfg.cluster)["grads"][0])
    g2 = float(memory_arrays(arrays_from_plans([two_rounds]), cfg.model, train2, cfg.cluster)["grads"][0])
    psi = rank_params(cfg.model, 8, 8, 2)
    assert float(psi["layers_second"]) == 16
    assert g2 - g1 == pytest.approx(4.0 * float(psi["second"]) * (1 - 8 / 16), rel=1e-9)


def test_estimate_memory_totals_hand_computed():
    # dp=2, no TP/PP, ZeRO-0, mbs=1, s=4: params 1352*4 + copy 1352*2 = 8112; grads 5408; Adam 10816;
    # activations 2 layers * 1408 + final norm ((4+2)*8*4 = 192) + head input (2*8*4 = 64) = 3072;
    # logits (fused loss, bench_model/loss.py: 4 + 2) bytes * 4 tokens * 10 vocab = 240; buffers: one block's grad bf16 + fp32 = 592 * 6 = 3552.
    plan = ParallelPlan(dp=2, micro_batch_size=1, grad_accum_steps=4)
    m = estimate_memory(plan, SMALL, BF16, CLUSTER)
    assert (m.params_bytes, m.grads_bytes, m.optimizer_bytes) == (8112, 5408, 10816)
    assert (m.activations_bytes, m.logits_bytes, m.buffers_bytes) == (3072, 240, 3552)
    alloc = 8112 + 5408 + 10816 + 3072 + 240 + 3552
    assert m.allocated_peak_bytes == alloc
    # caching allocator (autotune/predict/reserved.py): fp32 logits 240 * 4/6 = 160 and the foreach AdamW temporary
    # 4 * 1352 = 5408 (both < 1 MiB: not rounded), and FSDP2's fp32 grads 5408 made in the first backward ->
    # excess 0.46 * 160 + 0.975 * 5408 + 0.297 * 5408; fragmentation 0.5, overhead 1000
    assert m.reserved_peak_bytes == pytest.approx((alloc + 0.46 * 160 + 0.975 * 5408 + 0.297 * 5408) * 1.5 + 1000)


def test_worst_rank_is_the_largest_stage():
    # 1F1B pp=2, m=4: rank 0 holds 2 micro-batches of its layer (2 * 1408 = 2816 bytes) + 672 params;
    # rank 1 holds 1 micro-batch (1408) + head/norm activations (256) + logits (400) + 680 params -> rank 0 is worst.
    # torch's PipelineStage (base.torch_pipeline_buffers) adds, in units of one micro-batch's inter-stage activation
    # (4 tokens x h 8 x 2 bytes = 64): rank 0 its 4 gradient receive buffers + 2 in-flight outputs = 384 bytes
    plan = ParallelPlan(dp=1, pp=2, micro_batch_size=1, grad_accum_steps=4)
    m = memory_arrays(arrays_from_plans([plan]), SMALL, BF16, CLUSTER)
    assert int(m["worst_pp_rank"][0]) == 0
    assert float(m["activations"][0]) == 2 * 1408 + (4 + 2) * 64 and float(m["logits"][0]) == 0
    # a vocabulary of 100,000 makes the last stage's logits dominate: rank 1 becomes the worst
    big = dataclasses.replace(SMALL, vocab_size=100_000)
    m = memory_arrays(arrays_from_plans([plan]), big, BF16, CLUSTER)
    assert int(m["worst_pp_rank"][0]) == 1 and float(m["logits"][0]) == 10 * 4 * 100_000


def test_measured_saved_tensors_of_bench_model_block():
    """Ground truth: bytes autograd saves in one bench_model TransformerBlock (bf16), deduplicated by storage,
    excluding parameters and the model's own RoPE buffer, equal the model's per-layer activation term."""
    torch = pytest.importorskip("torch")
    from bench_model.model import TransformerBlock, rope_tables

    spec = ModelSpec(
        name="t", num_layers=1, hidden_size=64, ffn_hidden_size=160, num_heads=8, num_kv_heads=2, vocab_size=100
    )
    b, s = 2, 32
    for dtype, c in ((torch.bfloat16, 2), (torch.float32, 4)):
        block = TransformerBlock(spec).to(dtype)
        for p in block.parameters():
            torch.nn.init.normal_(p, std=0.02)
        rope = rope_tables(spec.head_dim, torch.arange(s), 1e4)
        skip = {p.untyped_storage().data_ptr() for p in block.parameters()} | {rope.untyped_storage().data_ptr()}
        saved: dict[int, int] = {}

        def pack(t):
            ptr = t.untyped_storage().data_ptr()
            if ptr not in skip:
                saved[ptr] = t.untyped_storage().nbytes()
            return t

        x = torch.randn(b, s, 64, dtype=dtype, requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            block(x, rope)
        predicted = float(layer_activation_bytes(spec, s, b, 1, False, 0, c)["saved"])
        assert sum(saved.values()) == predicted, dtype


@pytest.mark.parametrize("mode,code", [("none", 0), ("selective", 1), ("full", 2)])
def test_measured_activations_with_bench_model_recompute(mode, code):
    """Ground truth for the recompute variants: torch's MemTracker (tracks every storage on CPU too) after the forward
    of two bench_model blocks wrapped by bench_model's own apply_recompute (non-reentrant checkpoint / op-level SAC).
    ACT bytes = 2 layers' saved activations + the output; with recompute the first layer's saved input is the
    external x (tracked as "other"), so subtract it once."""
    torch = pytest.importorskip("torch")
    mem_tracker = pytest.importorskip("torch.distributed._tools.mem_tracker")
    from bench_model.model import TransformerBlock, rope_tables
    from bench_model.parallel.recompute import apply_recompute

    spec = ModelSpec(
        name="t", num_layers=2, hidden_size=64, ffn_hidden_size=160, num_heads=8, num_kv_heads=2, vocab_size=100
    )
    b, s = 2, 32

    class TwoBlocks(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleDict({"0": TransformerBlock(spec), "1": TransformerBlock(spec)})

        def forward(self, x, rope):
            for layer in self.layers.values():
                x = layer(x, rope)
            return x

    model = TwoBlocks().to(torch.bfloat16)
    apply_recompute(model, mode)
    rope = rope_tables(spec.head_dim, torch.arange(s), 1e4)
    x = torch.randn(b, s, 64, dtype=torch.bfloat16, requires_grad=True)
    tracker = mem_tracker.MemTracker()
    tracker.track_external(model, x, rope)
    with tracker:
        y = model(x, rope)  # keep the graph (and its saved tensors) alive for the snapshot
        snap = next(iter(tracker.get_tracker_snapshot("current").values()))
    act = next(v for k, v in snap.items() if str(k).endswith("ACT"))
    saved = float(layer_activation_bytes(spec, s, b, 1, False, code, 2)["saved"])
    x_bytes = out_bytes = b * s * 64 * 2
    expected = 2 * saved + out_bytes - (x_bytes if mode != "none" else 0)
    assert act == expected and y.shape == x.shape


def test_logits_term_follows_the_chunked_loss():
    """pp=1: bench_model/loss.py holds one chunk's logits (1024 tokens) at a time: tp 2 (checkpointed chunk under
    loss_parallel), seq 4096, mbs 2 -> (8 + 2) bytes * 1024 tokens * 10/2 vocab = 51,200 (unchunked: 8192 tokens =
    409,600); tp 1 (the fused loss: fp32 logits turned into their gradient in place + a bf16 copy) -> (4 + 2) * 1024
    * 10 = 61,440. pp=2 (vocab 100,000): the pipeline's loss sees the whole micro-batch's logits on the last stage,
    10 * 8192 * 1e5."""
    from autotune.predict.frameworks import bench_model as profile
    from bench_model import loss as bm_loss

    assert profile.LOSS_CHUNK_TOKENS == bm_loss.LOSS_CHUNK_TOKENS == 1024
    long = TrainSpec(seq_len=4096, global_batch_size=8)
    m = estimate_memory(ParallelPlan(tp=2, micro_batch_size=2, grad_accum_steps=4), SMALL, long, CLUSTER)
    assert m.logits_bytes == 10 * 1024 * 10 / 2
    m1 = estimate_memory(ParallelPlan(micro_batch_size=2, grad_accum_steps=8), SMALL, long, CLUSTER)
    assert m1.logits_bytes == 6 * 1024 * 10
    big = dataclasses.replace(SMALL, vocab_size=100_000)  # so the last stage is the worst
    arr = memory_arrays(
        arrays_from_plans([ParallelPlan(pp=2, micro_batch_size=2, grad_accum_steps=4)]), big, long, CLUSTER
    )
    assert int(arr["worst_pp_rank"][0]) == 1 and float(arr["logits"][0]) == 10 * 8192 * 100_000


def test_tied_embeddings_pipelined_last_stage_holds_a_copy():
    # Tied, pp=1: one shared 10 x 8 matrix -> 1352 - 80 = 1272 params. Tied, pp=2 (Megatron's embedding group,
    # bench_model/parallel/pipeline.py): stage 0 = layer 592 + embedding 80 = 672; last = layer 592 + its own head copy
    # 80 + final norm 8 = 680, so the two ranks together hold 1272 + 80 (the copy), as untied pp=2 does.
    tied = dataclasses.replace(SMALL, tie_embeddings=True)
    assert float(rank_params(tied, 1, 1, 1)["first"]) == 1272
    r = rank_params(tied, 1, 2, 1)
    assert (float(r["first"]), float(r["last"])) == (672, 680)
    assert float(r["first"] + r["last"]) == 1272 + 80
    # The copy is a parameter like any other: weight (fp32 + bf16 gathered copy), fp32 grad and 2 fp32 Adam states.
    # V=100,000 makes the last stage the worst rank: psi = 592 + 800,000 + 8 = 800,600.
    big = dataclasses.replace(tied, vocab_size=100_000)
    m = memory_arrays(
        arrays_from_plans([ParallelPlan(pp=2, micro_batch_size=1, grad_accum_steps=4)]), big, BF16, CLUSTER
    )
    assert int(m["worst_pp_rank"][0]) == 1
    assert (float(m["params"][0]), float(m["grads"][0]), float(m["optimizer"][0])) == (
        800_600 * 6,
        800_600 * 4,
        800_600 * 8,
    )


def test_pipelined_fsdp_keeps_unsharded_gradients_until_the_last_microbatch():
    # pp = 2, dp = 2, rank 0 holds 672 parameters (embedding 80 + one layer 592). torch.distributed.pipelining turns
    # FSDP2's gradient sync off on every micro-batch and reduce-scatters once after the last
    # (torch/distributed/pipelining/stage.py backward_maybe_with_nosync): the unsharded fp32 gradient accumulates,
    # 672 * 4 bytes instead of the shard's 672 * 4 / 2, and with set_reshard_after_backward(False) stage 3 keeps the
    # bf16 gathered copy (672 * 2) it otherwise frees after each block
    def states(zero: int, pp: int) -> tuple[float, float]:
        plan = ParallelPlan(dp=2, pp=pp, zero_stage=zero, micro_batch_size=1, grad_accum_steps=4)
        m = memory_arrays(arrays_from_plans([plan]), SMALL, BF16, CLUSTER)
        return float(m["grads"][0]), float(m["compute_copy"][0])

    # the accumulated unsharded gradient is held through every phase (FrameworkProfile.pipeline_held), on top of the
    # shard the optimizer step sees (672 * 4 / 2) after the one reduce-scatter
    held = 672 * 4
    assert states(2, 2)[0] == 672 * 4 / 2 + held and states(3, 2) == (672 * 4 / 2 + held, 672 * 2)
    assert states(2, 1)[0] == 1352 * 4 / 2  # pp = 1: bench_model's own loop reduce-scatters every micro-batch

"""bench_model pieces that need no process group: layer split, CP positions, data determinism, init determinism,
model shapes and parameter count against ModelSpec, CP attention mask = causal mask (by hand)."""

from __future__ import annotations

import pytest
import torch

from autotune.core.model import ModelSpec
from bench_model import data
from bench_model.model import Llama, build_meta_model, full_init_tensor
from bench_model.parallel.context_parallel import cp_positions
from bench_model.parallel.pipeline import layer_split

TINY = ModelSpec(
    name="tiny",
    num_layers=8,
    hidden_size=128,
    ffn_hidden_size=352,
    num_heads=8,
    num_kv_heads=4,
    vocab_size=1024,
    rope_theta=10000.0,
)


def test_layer_split_even_and_uneven():
    assert layer_split(8, 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # 8 layers over 6 stages: floor 1 each, the 2 extra go to the middle stages 1 and 2 (first/last get fewer)
    assert [len(s) for s in layer_split(8, 6)] == [1, 2, 2, 1, 1, 1]
    # 7 layers over 3 stages: extra to the middle stage, then stage 0; the last stage (head) gets fewest
    assert [len(s) for s in layer_split(7, 3)] == [2, 3, 2]
    assert sum(layer_split(13, 4), []) == list(range(13))


def test_cp_positions_load_balanced():
    # seq 16, cp 2: 4 chunks of 4; rank 0 holds chunks 0 and 3, rank 1 holds chunks 1 and 2
    assert cp_positions(16, 2, 0).tolist() == [0, 1, 2, 3, 12, 13, 14, 15]
    assert cp_positions(16, 2, 1).tolist() == [4, 5, 6, 7, 8, 9, 10, 11]
    all_pos = torch.cat([cp_positions(128, 4, r) for r in range(4)])
    assert sorted(all_pos.tolist()) == list(range(128))


def test_data_is_a_function_of_seed_step_index():
    a = data.sample_tokens(7, 3, 5, 128, 1024)
    assert torch.equal(a, data.sample_tokens(7, 3, 5, 128, 1024))
    assert not torch.equal(a, data.sample_tokens(7, 3, 6, 128, 1024))
    tokens, labels = data.batch(7, 3, range(4, 6), 128, 1024)
    assert torch.equal(tokens[1], a[:-1]) and torch.equal(labels[1], a[1:])
    assert list(data.rank_sample_range(1, 2, 3)) == [6, 7, 8, 9, 10, 11]


def test_model_matches_model_spec_and_is_deterministic():
    model = build_meta_model(TINY, 128)
    assert sum(p.numel() for p in model.parameters()) == TINY.num_params()
    m1, m2 = Llama(TINY, 32), Llama(TINY, 32)
    m1.init_weights(5)
    m2.init_weights(5)
    tokens = torch.randint(0, 1024, (2, 32))
    out = m1(tokens)
    assert out.shape == (2, 32, 1024)
    assert torch.equal(out, m2(tokens))
    assert torch.equal(
        full_init_tensor("layers.3.attention.wq.weight", (4, 4), 5, 8),
        full_init_tensor("layers.3._checkpoint_wrapped_module.attention.wq.weight", (4, 4), 5, 8),
    )


def test_context_parallel_mask_equals_causal_attention():
    """Attention of the load-balanced chunks with the global-position mask equals the causal result at those rows."""
    from bench_model.parallel.context_parallel import ContextParallelAttention

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))
    full = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    cp = 2
    k_pos = torch.cat([cp_positions(16, cp, r) for r in range(cp)])
    for rank in range(cp):
        q_pos = cp_positions(16, cp, rank)
        attn = ContextParallelAttention.__new__(ContextParallelAttention)
        attn.q_pos, attn.k_pos, attn._mask = q_pos, k_pos, None
        out = torch.nn.functional.scaled_dot_product_attention(
            q[:, :, q_pos], k[:, :, k_pos], v[:, :, k_pos], attn_mask=attn.mask(q.device)
        )
        torch.testing.assert_close(out, full[:, :, q_pos])


@pytest.mark.parametrize("fn", ["chunked_cross_entropy", "fused_linear_cross_entropy"])
def test_chunked_losses_equal_full_logits_loss(monkeypatch, fn):
    """Both chunked losses (bench_model.loss) give the loss and gradients of F.cross_entropy on the full fp32 logits
    (chunks of 3 tokens over 2 x 5 = 10 tokens: 4 chunks, the last one short), also scaled by 1/grad_accum (0.5)."""
    import torch.nn.functional as F

    from bench_model import loss as bm_loss

    monkeypatch.setattr(bm_loss, "LOSS_CHUNK_TOKENS", 3)
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=False)
    h = torch.randn(2, 5, 16, requires_grad=True)
    labels = torch.randint(0, 50, (2, 5))
    ref = F.cross_entropy(head(h).flatten(0, 1).float(), labels.flatten(0, 1)) * 0.5
    ref_grads = torch.autograd.grad(ref, [h, head.weight])
    loss = getattr(bm_loss, fn)(head, h, labels) * 0.5
    grads = torch.autograd.grad(loss, [h, head.weight])
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=0)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-7)


def test_fused_loss_runs_the_head_gemms_once():
    """The fused loss computes its gradients in forward: the head's three GEMMs (2 n V h FLOPs each, n = 2048 tokens,
    V = 4096, h = 16: 3 x 268,435,456) all in forward and no FLOP in backward; the checkpointed loss runs four (its
    backward recomputes the forward GEMM), the unchunked loss three."""
    from torch.utils.flop_counter import FlopCounterMode

    from bench_model import loss as bm_loss

    head = torch.nn.Linear(16, 4096, bias=False)
    h = torch.randn(1, 2048, 16, requires_grad=True)
    labels = torch.randint(0, 4096, (1, 2048))
    gemm = 2 * 2048 * 4096 * 16
    for fn, fwd_gemms, bwd_gemms in (
        (bm_loss.fused_linear_cross_entropy, 3, 0),
        (bm_loss.chunked_cross_entropy, 1, 3),
    ):
        with FlopCounterMode(display=False) as fwd:
            loss = fn(head, h, labels)
        with FlopCounterMode(display=False) as bwd:
            loss.backward()
        assert (fwd.get_total_flops(), bwd.get_total_flops()) == (fwd_gemms * gemm, bwd_gemms * gemm), fn


def test_chunked_loss_keeps_no_logits_for_backward():
    """Nothing of a chunk's head matmul and fp32 loss is saved: after forward the saved tensors are the head's input
    chunks only, no (tokens, vocab) tensor."""
    from bench_model import loss as bm_loss

    head = torch.nn.Linear(16, 4096, bias=False)
    h = torch.randn(1, 2048, 16, requires_grad=True)
    labels = torch.randint(0, 4096, (1, 2048))
    shapes = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: shapes.append(tuple(t.shape)) or t, lambda t: t):
        bm_loss.chunked_cross_entropy(head, h, labels)
    assert shapes and all(4096 not in s for s in shapes), shapes


@pytest.mark.parametrize("dtype, per_logit", [(torch.float32, 4), (torch.bfloat16, 6)])
def test_fused_loss_peak_is_the_memory_models_logits_term(dtype, per_logit):
    """Measured peak of the fused loss's forward + backward (CPU allocator events, bench_model.metrics.step_peak_bytes)
    = the memory model's logits term for one 1024-token chunk, (4 + c) bytes per logit (4 in fp32, where the cast is
    a no-op), plus the head's weight gradient and grad_h, which it fills in forward (V = 4096, n = 2048, h = 16)."""
    from autotune.core.model import ModelSpec
    from autotune.predict.frameworks.bench_model import BenchModelProfile
    from bench_model import loss as bm_loss
    from bench_model.metrics import step_peak_bytes

    n, hidden, vocab, c = 2048, 16, 4096, per_logit - 4 or 4
    head = torch.nn.Linear(hidden, vocab, bias=False).to(dtype)
    h = torch.randn(n, hidden).to(dtype).requires_grad_(True)
    labels = torch.randint(0, vocab, (n,))

    def step():
        bm_loss.fused_linear_cross_entropy(head, h, labels).backward()
        head.weight.grad, h.grad = None, None

    step()
    spec = ModelSpec(
        name="t", num_layers=1, hidden_size=hidden, ffn_hidden_size=32, num_heads=1, num_kv_heads=1, vocab_size=vocab
    )
    logits = float(BenchModelProfile().logits(spec, n, 1, 1, c))
    assert logits == per_logit * 1024 * vocab
    # beyond: per-token vectors of one chunk (row max, sum, the label's logit in fp32, the int64 row index: 20 bytes,
    # + 4 for the loss terms), at most 32 bytes per token
    beyond = step_peak_bytes(step) - (logits + (vocab + n) * hidden * c)
    assert 0 <= beyond <= 32 * 1024

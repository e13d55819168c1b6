"""bench_model's activation recompute modes on one CPU: what each recomputes (counted FLOPs) and that recompute never
changes the numbers (loss and every gradient bit-identical to recompute=none)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from autotune.core.model import ModelSpec  # noqa: E402
from autotune.core.plan_arrays import RECOMPUTE_CODE  # noqa: E402
from autotune.predict.frameworks.bench_model import layer_activation_bytes  # noqa: E402
from bench_model.model import Llama, TransformerBlock, rope_tables  # noqa: E402
from bench_model.parallel.recompute import apply_recompute  # noqa: E402

# MHA (num_kv_heads == num_heads): FlopCounterMode's SDPA formulas reject GQA shapes on some torch versions; the math
# SDPA backend below turns attention into bmm's, which the counter always counts.
SPEC = ModelSpec(
    name="t", num_layers=2, hidden_size=64, ffn_hidden_size=160, num_heads=4, num_kv_heads=4, vocab_size=96
)
B, S = 2, 32


def _run(mode: str, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, dict[str, torch.Tensor], int, int]:
    model = Llama(SPEC, S)
    model.init_weights(0)
    model = model.to(dtype)
    model.init_buffers("cpu")
    apply_recompute(model, mode)
    tokens = torch.randint(0, SPEC.vocab_size, (B, S), generator=torch.Generator().manual_seed(1))
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as fwd:
            loss = torch.nn.functional.cross_entropy(model(tokens).flatten(0, 1).float(), tokens.flatten())
        with FlopCounterMode(display=False) as bwd:
            loss.backward()
    grads = {name.replace("_checkpoint_wrapped_module.", ""): p.grad for name, p in model.named_parameters()}
    return loss.detach(), grads, fwd.get_total_flops(), bwd.get_total_flops()


def _layer_forward_flops() -> int:
    """Forward FLOPs of one block, counted the same way (math SDPA)."""
    model = Llama(SPEC, S)
    model.init_weights(0)
    x = torch.randn(B, S, SPEC.hidden_size)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as c:
        model.layers["0"](x, model.rope)
    return c.get_total_flops()


def test_selective_recomputes_no_matmul_and_full_recomputes_every_block():
    _, _, fwd_none, bwd_none = _run("none")
    _, _, fwd_sel, bwd_sel = _run("selective")
    _, _, fwd_full, bwd_full = _run("full")
    layer = _layer_forward_flops()
    assert fwd_none == fwd_sel == fwd_full and layer > 0
    # backward of a matmul costs twice its forward (Kaplan et al. 2020 Sec 2.1): sanity of the counter itself
    assert bwd_none == 2 * fwd_none
    # selective: every recomputed op is elementwise (norms, silu * up), so the counted extra work is <= 10% of the
    # forward - in fact zero, since matmuls and attention lie outside the checkpointed regions
    assert bwd_sel - bwd_none <= 0.10 * fwd_none
    assert bwd_sel == bwd_none
    # full: each of the 2 blocks runs its forward once more in backward (the head and embedding are not recomputed),
    # except its last matmul w2: non-reentrant checkpoint stops recomputing once every saved tensor is back
    # (torch.utils.checkpoint early stop), and w2's output is saved by nothing. w2 forward = 2*B*S*h*f.
    w2 = 2 * B * S * SPEC.hidden_size * SPEC.ffn_hidden_size
    assert bwd_full - bwd_none == SPEC.num_layers * (layer - w2)


@pytest.mark.parametrize("mode", ["selective", "full"])
def test_recompute_gives_identical_loss_and_grads_in_bf16(mode):
    """bf16 (the compute dtype of bench_model's bf16 precision): loss and every gradient bit-identical to none."""
    loss_ref, grads_ref, _, _ = _run("none", torch.bfloat16)
    loss, grads, _, _ = _run(mode, torch.bfloat16)
    assert torch.equal(loss, loss_ref)
    assert grads.keys() == grads_ref.keys() and len(grads) == 2 * 9 + 3
    for name, g in grads.items():
        assert torch.equal(g, grads_ref[name]), name


def test_selective_in_fp32_differs_only_by_summation_order():
    """fp32: the residual stream's gradient has three parts (residual add, and the norm's pow and mul, which read x
    itself because x.float() is a no-op). Without recompute autograd adds them one by one; selective adds the norm's
    two inside its region first, so a gradient may differ by float rounding (a few ulp), never more. In bf16 the
    norm's two parts meet in fp32 before the cast in both paths, hence the bit-identity above."""
    loss_ref, grads_ref, _, _ = _run("none")
    loss, grads, _, _ = _run("selective")
    assert torch.equal(loss, loss_ref)
    for name, g in grads.items():
        ref = grads_ref[name]
        assert torch.allclose(g, ref, rtol=0, atol=1e-6 * float(ref.abs().max())), name


def _compiled_block_saved_bytes(mode: str) -> tuple[int, torch.Tensor, list[torch.Tensor]]:
    """One bf16 block compiled as bench_model.parallel.parallelize compiles it, recompute applied first; the bytes
    autograd saves for its backward (deduplicated by storage, parameters and input excluded), the input's and the
    parameters' gradients. Backend aot_eager_decomp_partition: AOTAutograd with Inductor's decompositions and its
    min-cut partitioner (which decides what is saved) without C++ codegen; it saves the same bytes as Inductor
    here (114,176 none, 93,696 selective, measured on this block with both backends)."""
    torch.manual_seed(0)
    block = TransformerBlock(SPEC, 0, S).to(torch.bfloat16)
    for p in block.parameters():
        torch.nn.init.normal_(p, std=0.05)
    holder = torch.nn.Module()
    holder.layers = torch.nn.ModuleDict({"0": block})
    apply_recompute(holder, mode, compiled=True)
    holder.layers["0"].compile(backend="aot_eager_decomp_partition")
    rope = rope_tables(SPEC.head_dim, torch.arange(S), SPEC.rope_theta)
    x = torch.randn(B, S, SPEC.hidden_size, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    x.requires_grad_(True)
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = holder.layers["0"](x, rope)
    out.float().pow(2).sum().backward()
    own = {p.untyped_storage().data_ptr() for p in block.parameters()} | {x.untyped_storage().data_ptr()}
    saved = sum(n for ptr, n in seen.items() if ptr not in own)
    return saved, x.grad, [p.grad for p in block.parameters()]


def test_selective_under_compile_saves_the_swiglu_product_and_changes_no_gradient():
    """Under torch.compile selective's SwiGLU checkpoint region is recomputed by the partitioner: the block keeps
    c*f bytes per token fewer than compiled none (bf16, f = 160, B*S = 64 tokens: 2 * 160 * 64 = 20,480 bytes), as
    the memory model's compiled selective term says, and every gradient is bit-identical to compiled none."""
    saved_none, gx_none, gp_none = _compiled_block_saved_bytes("none")
    saved_sel, gx_sel, gp_sel = _compiled_block_saved_bytes("selective")
    assert saved_none - saved_sel == 2 * SPEC.ffn_hidden_size * B * S == 20_480
    terms = {
        m: float(layer_activation_bytes(SPEC, S, B, 1, False, RECOMPUTE_CODE[m], 2, compiled=True)["saved"])
        for m in ("none", "selective")
    }
    assert terms["none"] - terms["selective"] == 20_480
    assert torch.equal(gx_sel, gx_none) and all(torch.equal(a, b) for a, b in zip(gp_sel, gp_none))

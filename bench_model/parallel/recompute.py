"""Activation recomputation (Chen et al. 2016; Korthikanti et al. 2022 Sec 4-5), applied per transformer block.

- none: autograd keeps everything.
- full: each block is wrapped with non-reentrant `checkpoint`; only the block inputs are kept and the whole block is
  recomputed in backward (plus one block's activations live while it is recomputed).
- selective: the cheap elementwise regions only - the two RMSNorms and SwiGLU's silu(gate) * up - recompute in
  backward, in the spirit of Megatron-Core's fine-grained `recompute_modules` ("layernorm", activation). Each region
  keeps its inputs (the residual stream for a norm, the w1 and w3 outputs for SwiGLU) and re-runs its internals just
  before its own backward. Matmul inputs and the attention kernel's q, k, v, output and logsumexp lie outside every
  region and stay saved by construction, so no matmul or attention FLOP is recomputed. Dropped against `none`: the
  norms' fp32 copy of their input, their rsqrt and normalised output, and SwiGLU's silu output (autotune/predict/memory.py
  derives the bytes).

Why not op-level SAC (`create_selective_checkpoint_contexts` with a per-aten-op policy, torchtitan's "op" SAC, which
this module used before): in eager mode its policy is a Python call per aten op of the block plus saved-tensor
bookkeeping (a `detach` per saved output), which left the GPU idle - measured on an H200 (Llama-3.2-1B, seq 4096,
docs/memory_model.md): forward 68 ms against 33 ms without recompute and backward 107 ms against 65 ms, slower than
full recompute. Why not `torch.utils.checkpoint` per region either: its saved-tensor hooks cost ~240 us of forward
per region on this project's CPU box against ~30 us for the one autograd.Function call used here. A region pays its
bookkeeping once (3 per block) instead of once per op; `benchmarks/recompute_cost.py` measures all of them.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import checkpoint

from bench_model.model import rms_norm, swiglu

RECOMPUTED_NORMS = ("attention_norm", "ffn_norm")


class RecomputeInBackward(torch.autograd.Function):
    """out = fn(*inputs), keeping only the inputs; backward re-runs fn with autograd on and differentiates that graph,
    so the gradients are the same ops as without recompute (bit-identical in bf16; in fp32 the residual stream's
    gradient parts may be summed in another order). One Python call per region, no saved-tensor hooks."""

    @staticmethod
    def forward(ctx, fn, *inputs):
        ctx.fn = fn
        ctx.save_for_backward(*inputs)
        return fn(*inputs)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [x.detach().requires_grad_(x.requires_grad) for x in ctx.saved_tensors]
        with torch.enable_grad():
            out = ctx.fn(*inputs)
        wanted = [x for x in inputs if x.requires_grad]
        got = iter(torch.autograd.grad(out, wanted, grads))
        return (None, *(next(got) if x.requires_grad else None for x in inputs))


def _recomputed_norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    # norm.weight is looked up per call: FSDP2 swaps the sharded and unsharded parameter in and out
    return RecomputeInBackward.apply(functools.partial(rms_norm, eps=norm.eps), x, norm.weight)


def apply_selective(block: nn.Module) -> None:
    """In place: the norms and the SwiGLU gating of one block recompute in backward. The modules keep their names and
    hooks (tensor/sequence parallel); only their forward is routed through RecomputeInBackward."""
    for name in RECOMPUTED_NORMS:
        norm = getattr(block, name)
        norm.forward = functools.partial(_recomputed_norm, norm)
    ffn = block.feed_forward
    ffn.act = functools.partial(RecomputeInBackward.apply, swiglu)
    if hasattr(ffn, "experts"):  # MoE: the routed experts' gating too (the shared expert uses ffn.act)
        ffn.experts.act = ffn.act


def _checkpointed_swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return checkpoint(swiglu, gate, up, use_reentrant=False)


def apply_selective_compiled(block: nn.Module) -> None:
    """In place, for a block torch.compile will trace: SwiGLU's gating as a torch.utils.checkpoint region, which
    Dynamo turns into a tagged subgraph (the `tag_activation_checkpoint` higher-order op) and AOTAutograd's partitioner
    must recompute in backward. It then keeps only the w1 and w3 outputs; without the region it also keeps the
    product silu(w1 x) * (w3 x), w2's input (measured: benchmarks/recompute_cost.py). The norms are left alone: the
    partitioner already rebuilds their fp32 copy and output from their input under compile (the compiled activation
    saving, autotune/predict/frameworks/bench_model.py `compiled_savings_per_token`), so a region there saves nothing.
    RecomputeInBackward is not used under compile: Dynamo cannot trace its backward (torch.autograd.grad inside),
    which splits each block's graph at every region and turned selective into pure cost on an H200 (issue 29)."""
    ffn = block.feed_forward
    ffn.act = _checkpointed_swiglu
    if hasattr(ffn, "experts"):
        ffn.experts.act = ffn.act


def apply_recompute(model: nn.Module, mode: str, compiled: bool = False, layers: int = 0) -> None:
    """`compiled`: the blocks will be compiled afterwards (plan.compile), which changes how selective is applied.
    `layers` (plan.recompute_layers, full only): the first `layers` blocks of this stage chunk are checkpointed and the
    rest run without recompute, as Megatron-Core's `--recompute-method block --recompute-num-layers N` does per model
    chunk (TransformerBlock._checkpointed_forward, megatron/core/transformer/transformer_block.py @ core_r0.16.1);
    0 = every block."""
    if mode == "none":
        return
    if mode not in ("full", "selective"):
        raise ValueError(f"plan.recompute={mode!r} must be one of none, selective, full")
    order = sorted(model.layers.keys(), key=int)  # the chunk's blocks in forward order
    chosen = set(order[:layers]) if mode == "full" and layers > 0 else set(order)
    for key, block in list(model.layers.items()):
        if key not in chosen:
            continue
        if mode == "full":
            model.layers[key] = checkpoint_wrapper(block, preserve_rng_state=False)
        elif compiled:
            apply_selective_compiled(block)
        else:
            apply_selective(block)

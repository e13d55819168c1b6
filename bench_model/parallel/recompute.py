"""Activation recomputation (Chen et al. 2016; Korthikanti et al. 2022 Sec 4-5), applied per transformer block.

- none: autograd keeps everything.
- full: each block is wrapped with non-reentrant `checkpoint`; only the block inputs are kept and the whole block is
  recomputed in backward (plus one block's activations live while it is recomputed).
- selective: module-level checkpoints around the cheap elementwise regions only - the two RMSNorms and SwiGLU's
  silu(gate) * up - in the spirit of Megatron-Core's fine-grained `recompute_modules` ("layernorm", "moe_act"). Each
  region keeps its inputs (the residual stream for a norm, the w1 and w3 outputs for SwiGLU) and recomputes its
  internals just before its own backward. Matmul inputs/outputs and the attention kernel's q, k, v, output and
  logsumexp stay saved by construction (they lie outside every region), so no matmul or attention FLOP is recomputed.
  What is dropped against `none`: the norms' fp32 copy of their input, their rsqrt and normalised output, and SwiGLU's
  silu output (autotune/memory.py derives the bytes).

Why not op-level SAC (`create_selective_checkpoint_contexts` with a per-aten-op policy, torchtitan's "op" mode, which
this module used before): in eager mode its policy is a Python call per aten op of the block plus saved-tensor
bookkeeping (a `detach` per saved output), which left the GPU idle - measured on an H200 (Llama-3.2-1B, seq 4096,
docs/memory_model.md): forward 68 ms against 33 ms without recompute and backward 107 ms against 65 ms, slower than
full recompute. A region checkpoint pays that bookkeeping once per region (3 per block) instead of once per op;
`benchmarks/recompute_cost.py` measures both. Op-level SAC is cheap only under torch.compile, which traces it away.
"""
from __future__ import annotations

import functools

from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import checkpoint

from bench_model.model import swiglu

RECOMPUTED_NORMS = ("attention_norm", "ffn_norm")


def _checkpointed_swiglu():
    return functools.partial(checkpoint, swiglu, use_reentrant=False, preserve_rng_state=False)


def apply_selective(block: nn.Module) -> None:
    """In place: checkpoint the norms and the SwiGLU gating of one block (no RNG inside them, hence no RNG state)."""
    for name in RECOMPUTED_NORMS:
        setattr(block, name, checkpoint_wrapper(getattr(block, name), preserve_rng_state=False))
    block.feed_forward.act = _checkpointed_swiglu()


def apply_recompute(model: nn.Module, mode: str) -> None:
    if mode == "none":
        return
    if mode not in ("full", "selective"):
        raise ValueError(f"plan.recompute={mode!r} must be one of none, selective, full")
    for key, block in list(model.layers.items()):
        if mode == "full":
            model.layers[key] = checkpoint_wrapper(block, preserve_rng_state=False)
        else:
            apply_selective(block)

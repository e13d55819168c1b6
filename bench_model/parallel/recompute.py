"""Activation recomputation (Chen et al. 2016; Korthikanti et al. 2022 Sec 4-5), applied per transformer block.

- none: autograd keeps everything.
- full: each block is wrapped with non-reentrant `checkpoint`; only the block inputs are kept and the whole block is
  recomputed in backward (plus one block's activations live while it is recomputed).
- selective: op-level selective activation checkpointing (torchtitan's "op" SAC): outputs of matmuls and of the
  attention kernel (and of reduce-scatter collectives) are saved, everything else - norms, RoPE, SiLU/products,
  residual adds, softmax of the math path - is recomputed. Uses `torch.utils.checkpoint.create_selective_checkpoint_contexts`.
"""
from __future__ import annotations

import functools

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts


def _save_ops() -> set:
    aten = torch.ops.aten
    names = ["mm.default", "bmm.default", "addmm.default",
             "_scaled_dot_product_efficient_attention.default", "_scaled_dot_product_flash_attention.default",
             "_scaled_dot_product_flash_attention_for_cpu.default", "_scaled_dot_product_cudnn_attention.default"]
    ops = set()
    for n in names:
        packet, _, overload = n.partition(".")
        if hasattr(aten, packet):
            ops.add(getattr(getattr(aten, packet), overload))
    if hasattr(torch.ops, "_c10d_functional"):
        ops.add(torch.ops._c10d_functional.reduce_scatter_tensor.default)
    return ops


def _policy(save: set, ctx, op, *args, **kwargs) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in save else CheckpointPolicy.PREFER_RECOMPUTE


def _selective_context():
    return create_selective_checkpoint_contexts(functools.partial(_policy, _save_ops()))


def apply_recompute(model: nn.Module, mode: str) -> None:
    if mode == "none":
        return
    if mode not in ("full", "selective"):
        raise ValueError(f"plan.recompute={mode!r} must be one of none, selective, full")
    for key, block in list(model.layers.items()):
        if mode == "full":
            wrapped = checkpoint_wrapper(block, preserve_rng_state=False)
        else:
            wrapped = checkpoint_wrapper(block, context_fn=_selective_context, preserve_rng_state=False)
        model.layers[key] = wrapped

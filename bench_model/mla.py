"""Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 Sec 2.1; DeepSeek-V3 uses it unchanged), single-device:

    q      = wq_b(q_norm(wq_a(x)))  (or wq(x) when q_lora_rank = 0)     (B, S, heads, nope + rope)
    c, kpe = split(wkv_a(x))                                             latent (kv_lora) and one shared rope key
    k, v   = split(wkv_b(kv_norm(c)))                                    (B, S, heads, nope), (B, S, heads, v)
    q = [q_nope, rope(q_pe)], k = [k_nope, rope(kpe) broadcast to every head]
    out    = wo(sdpa(q, k, v))      SDPA with q/k dim nope + rope and its own v dim, scale 1/sqrt(nope + rope)

RoPE applies to the rope part only (the model's rope table is built for qk_rope_head_dim). Training computes the
full keys and values (the latent caching of the paper is an inference saving). `sdpa` is an attribute, so context
parallelism swaps in its exact sharded attention as for GQA."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from autotune.core.model import ModelSpec
from bench_model.model import RMSNorm, apply_rope, causal_sdpa


class MLAttention(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        h, n = spec.hidden_size, spec.num_heads
        self.nope, self.rope_dim, self.v_dim = spec.qk_nope_head_dim, spec.qk_rope_head_dim, spec.v_head_dim
        qk = self.nope + self.rope_dim
        if spec.q_lora_rank:
            self.wq_a = nn.Linear(h, spec.q_lora_rank, bias=False)
            self.q_norm = RMSNorm(spec.q_lora_rank, spec.norm_eps)
            self.wq_b = nn.Linear(spec.q_lora_rank, n * qk, bias=False)
        else:
            self.wq = nn.Linear(h, n * qk, bias=False)
        self.kv_lora = spec.kv_lora_rank
        self.wkv_a = nn.Linear(h, spec.kv_lora_rank + self.rope_dim, bias=False)
        self.kv_norm = RMSNorm(spec.kv_lora_rank, spec.norm_eps)
        self.wkv_b = nn.Linear(spec.kv_lora_rank, n * (self.nope + self.v_dim), bias=False)
        self.wo = nn.Linear(n * self.v_dim, h, bias=False)
        self.sdpa: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] = causal_sdpa

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq_b(self.q_norm(self.wq_a(x))) if hasattr(self, "wq_b") else self.wq(x)
        q = q.view(b, s, -1, self.nope + self.rope_dim)  # (B, S, heads, nope + rope)
        q_nope, q_pe = q.split([self.nope, self.rope_dim], dim=-1)
        c, k_pe = self.wkv_a(x).split([self.kv_lora, self.rope_dim], dim=-1)
        k_pe = apply_rope(k_pe.unsqueeze(2), rope)  # (B, S, 1, rope): one rope key shared by the heads
        kv = self.wkv_b(self.kv_norm(c)).view(b, s, -1, self.nope + self.v_dim)
        k_nope, v = kv.split([self.nope, self.v_dim], dim=-1)
        heads = k_nope.shape[2]
        q = torch.cat([q_nope, apply_rope(q_pe, rope)], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(b, s, heads, self.rope_dim)], dim=-1)
        o = self.sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))  # (B, heads, S, v)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))

"""The benchmark's Llama decoder: plain single-device PyTorch (no torch.distributed import; parallelism is applied from
outside by bench_model.parallel, torchtitan-style).

Block (as the memory model counts it):
    h   = x + wo(attn(rope(wq(n1)), rope(wk(n1)), wv(n1)))      n1 = attention_norm(x)   (RMSNorm)
    out = h + w2(silu(w1(n2)) * w3(n2))                           n2 = ffn_norm(h)         (RMSNorm, SwiGLU)
MoE models (spec.is_moe_layer) replace the SwiGLU on their MoE layers by bench_model.moe.MoE; attention="mla" uses
bench_model.mla.MLAttention instead of the GQA attention below.
Attention is causal `F.scaled_dot_product_attention(..., is_causal=True)` on (B, heads, S, head_dim) tensors. GQA: K/V
keep `num_kv_heads` heads and SDPA broadcasts them with `enable_gqa=True` (torch >= 2.5); on older torch K/V are
expanded with `repeat_interleave` (an extra (B, heads, S, head_dim) copy each). No biases anywhere; RoPE uses real cos/sin
tables (rotate-half form) so every tensor stays real-valued under DTensor/FSDP.

Layers live in a ModuleDict keyed by the *global* layer index ("0".."L-1") so a pipeline stage can delete the layers it
does not own and parameter names (used to seed the init) stay identical in every layout. `tok_embeddings`, `norm` and
`output` may be None on middle pipeline stages; `forward` then passes hidden states through.

Initialisation: `init_weights(seed)` draws every parameter from its own CPU generator seeded by (seed, parameter name),
so the values do not depend on layout, sharding or device; bench_model.weights does the same for sharded (DTensor)
parameters.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec

# `enable_gqa` exists from torch 2.5 (the package supports >= 2.6, but keep the fallback explicit).
_SDPA_HAS_GQA = tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 5)
INIT_STD = 0.02
# Wrapper prefixes that parallelisation inserts into parameter names; stripped so init seeds see the model's own names.
_WRAPPER_PREFIXES = ("_checkpoint_wrapped_module.", "_orig_mod.", "_fsdp_wrapped_module.")


def causal_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention, q (B, H, S, D), k/v (B, Hkv, S, D). Context parallelism swaps this for an exact sharded version."""
    if q.shape[1] != k.shape[1]:
        if _SDPA_HAS_GQA:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class RMSNorm(nn.Module):
    """Zhang & Sennrich 2019: x / sqrt(mean(x^2) + eps) * w, computed in fp32 and cast back."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return y.type_as(x) * weight


def rope_tables(head_dim: int, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """(S, head_dim) cos and sin stacked on dim 0 -> (2, S, head_dim); RoFormer (Su et al. 2021) Eq. 34, rotate-half form."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = positions.to(torch.float64)[:, None] * inv_freq[None, :]  # (S, D/2)
    ang = torch.cat([ang, ang], dim=-1)  # (S, D)
    return torch.stack([ang.cos(), ang.sin()]).float()


def apply_rope(x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
    """x (B, S, H, D); rope (2, >=S, D) -> rotated x."""
    s = x.shape[1]
    cos, sin = rope[0, :s][None, :, None, :].to(x.dtype), rope[1, :s][None, :, None, :].to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        h, d = spec.hidden_size, spec.head_dim
        self.head_dim = d
        self.wq = nn.Linear(h, spec.num_heads * d, bias=False)
        self.wk = nn.Linear(h, spec.num_kv_heads * d, bias=False)
        self.wv = nn.Linear(h, spec.num_kv_heads * d, bias=False)
        self.wo = nn.Linear(spec.num_heads * d, h, bias=False)
        self.sdpa: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] = causal_sdpa

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape  # (B, S, H); under TP the head counts below are the local ones, hence -1
        q = apply_rope(self.wq(x).view(b, s, -1, self.head_dim), rope)
        k = apply_rope(self.wk(x).view(b, s, -1, self.head_dim), rope)
        v = self.wv(x).view(b, s, -1, self.head_dim)
        o = self.sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))  # (B, heads, S, D)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """SwiGLU's gating, silu(x W1) * (x W3) (Shazeer 2020)."""
    return F.silu(gate) * up


class FeedForward(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.w1 = nn.Linear(spec.hidden_size, spec.ffn_hidden_size, bias=False)  # gate
        self.w2 = nn.Linear(spec.ffn_hidden_size, spec.hidden_size, bias=False)  # down
        self.w3 = nn.Linear(spec.hidden_size, spec.ffn_hidden_size, bias=False)  # up

        # The gated activation is an attribute so selective recompute can swap in a checkpointed version.
        self.act: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = swiglu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.act(self.w1(x), self.w3(x)))


class TransformerBlock(nn.Module):
    def __init__(self, spec: ModelSpec, layer: int = 0, seq_len: int = 0):
        super().__init__()
        # imported here: bench_model.mla and bench_model.moe build on this module's layers
        from bench_model.mla import MLAttention
        from bench_model.moe import MoE

        self.attention_norm = RMSNorm(spec.hidden_size, spec.norm_eps)
        self.attention = MLAttention(spec) if spec.attention == "mla" else Attention(spec)
        self.ffn_norm = RMSNorm(spec.hidden_size, spec.norm_eps)
        self.feed_forward = MoE(spec, seq_len) if spec.is_moe_layer(layer) else FeedForward(spec)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), rope)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, spec: ModelSpec, seq_len: int):
        super().__init__()
        if spec.block != "llama":
            raise SpecError(f"model.block={spec.block!r}: bench_model implements only the llama block")
        self.spec, self.seq_len = spec, seq_len
        self.tok_embeddings: nn.Embedding | None = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(spec, i, seq_len) for i in range(spec.num_layers)})
        self.norm: RMSNorm | None = RMSNorm(spec.hidden_size, spec.norm_eps)
        self.output: nn.Linear | None = nn.Linear(spec.hidden_size, spec.vocab_size, bias=False)
        if spec.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight
        # Global token positions of this rank's sequence slots (context parallelism permutes them).
        self.rope_positions = torch.arange(seq_len, device="cpu")
        # MLA rotates only the rope part of its queries and keys (bench_model.mla)
        self.rope_dim = spec.qk_rope_head_dim if spec.attention == "mla" else spec.head_dim
        self.register_buffer("rope", torch.empty(2, seq_len, self.rope_dim), persistent=False)

    def forward(self, tokens: torch.Tensor, loss_fn: Callable | None = None) -> torch.Tensor:
        """Logits (B, S, V) on the last stage, hidden states elsewhere; with `loss_fn(head, h)` the loss instead, so
        the loss can apply the head itself chunk by chunk (bench_model.loss.lm_loss)."""
        h = self.tok_embeddings(tokens) if self.tok_embeddings is not None else tokens  # (B, S) -> (B, S, H)
        for layer in self.layers.values():
            h = layer(h, self.rope)
        if self.norm is not None:
            h = self.norm(h)
        if loss_fn is not None:
            return loss_fn(self.output, h)
        return self.output(h) if self.output is not None else h  # (B, S, V) on the last stage

    def init_buffers(self, device: torch.device | str) -> None:
        self.rope = rope_tables(self.rope_dim, self.rope_positions, self.spec.rope_theta).to(device)

    def init_weights(self, seed: int) -> None:
        """Single-device init (plain tensors); sharded models use bench_model.weights.init_parameters."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.copy_(full_init_tensor(name, tuple(p.shape), seed, self.spec.num_layers))
        self.init_buffers(next(self.parameters()).device)


def canonical_name(name: str) -> str:
    for prefix in _WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def full_init_tensor(name: str, shape: tuple[int, ...], seed: int, num_layers: int) -> torch.Tensor:
    """The unsharded fp32 initial value of parameter `name`: ones for norms, N(0, 0.02) for matrices, with output
    projections (wo, w2, the experts' stacked w2) scaled by 1/sqrt(2*num_layers) as in GPT-2 (Radford et al. 2019,
    Sec 2.3); the sigmoid router's selection bias starts at zero. Seeded per name."""
    name = canonical_name(name)
    if name.endswith("norm.weight"):
        return torch.ones(shape)
    if name.endswith("expert_bias"):
        return torch.zeros(shape)
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & ((1 << 63) - 1))
    std = INIT_STD
    if name.endswith(("wo.weight", "w2.weight", "experts.w2")):
        std = INIT_STD / math.sqrt(2 * num_layers)
    return torch.randn(shape, generator=gen) * std


def build_meta_model(spec: ModelSpec, seq_len: int) -> Llama:
    """The full model on the meta device: no memory until `to_empty` after parallelisation."""
    with torch.device("meta"):
        return Llama(spec, seq_len)

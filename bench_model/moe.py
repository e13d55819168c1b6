"""The mixture-of-experts MLP of bench_model's MoE layers, single-device (no torch.distributed import: expert
parallelism swaps `MoE.dispatch` and shards `GroupedExperts` from outside, bench_model/parallel/expert_parallel.py).

    scores = router(x)                                (N, E) fp32: softmax, or sigmoid (DeepSeek-V3)
    top-k experts per token (+ selection bias with the sigmoid router; forced even with train.moe_routing=balanced)
    y = sum_j w_j * expert_{e_j}(x) + shared_expert(x)        every expert a SwiGLU, w_j the chosen scores
                                                              (re-normalised over the k when moe_norm_topk)
Routed tokens are sorted by expert and run as one grouped GEMM (`torch._grouped_mm`, experts' weights stacked
(E, out, in) like nn.Linear weights) where the device and dtype support it, else as a loop over the experts; the
path that ran is kept in `GroupedExperts.path`.

Dropless: every token reaches its k experts (moe_capacity_factor must be null; bench_model rejects a capacity).

Load balancing (moe_aux_loss_coeff > 0): DeepSeek-V3's sequence-wise balance loss (arXiv 2412.19437 Eqs. 17-20),
L_bal = coeff * sum_e f_e P_e per sequence, f_e = E/(k*S) * (tokens of the sequence routed to e), P_e = mean over
the sequence of the normalised scores s'_{t,e} = s_{t,e} / sum_e' s_{t,e'} (for softmax, the probabilities; Switch
Transformer's Eq. 4 is the batch-wise form). Per sequence, so its value does not depend on how sequences are
batched into micro-batches and ranks; under CP/SP a sequence's counts are summed over its ranks (`count_sync`) and
P_e is a sum of per-token terms, so each rank's part adds up to the 1-rank gradient. The loss enters only the
gradient, through `_AddAuxGrad` on the layer output (Megatron-LM's MoEAuxLossAutoScaler), scaled by `aux_scale`
(set by the trainer: 1/grad_accum, the CP factor); the reported loss is the language-model loss alone.

The sigmoid router's selection bias (`expert_bias`, DeepSeek-V3's auxiliary-loss-free balancing) is a parameter
without gradient; bench_model does not run its update rule (its step gamma is 0 here: a benchmark runs a few steps).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from autotune.core.model import ModelSpec
from bench_model.model import swiglu


def _identity(t: torch.Tensor) -> torch.Tensor:
    return t


def grouped_mm_supported(x: torch.Tensor, *dims: int) -> bool:
    """torch._grouped_mm as this torch build runs it: on CPU in fp32 (torch 2.13; bf16 there needs 16-byte aligned
    strides), on CUDA in bf16 from compute capability 9.0 (Hopper) with dims that keep rows 16-byte aligned."""
    if not hasattr(torch, "_grouped_mm"):
        return False
    if x.device.type == "cpu":  # the eager CPU kernel; its meta kernel (fake tensors: probe-memory) wants bf16
        return x.dtype == torch.float32 and not isinstance(x, torch._subclasses.FakeTensor)
    if x.device.type == "cuda":
        aligned = all(d % 8 == 0 for d in dims)
        return x.dtype == torch.bfloat16 and aligned and torch.cuda.get_device_capability(x.device)[0] >= 9
    return False


def _mm_loop(x: torch.Tensor, w: torch.Tensor, counts: list[int]) -> torch.Tensor:
    return torch.cat([F.linear(xe, w[e]) for e, xe in enumerate(x.split(counts))])


class GroupedExperts(nn.Module):
    """`num_experts` SwiGLU experts, weights stacked per expert as nn.Linear weights: w1/w3 (E, F, H), w2 (E, H, F).
    Expert parallelism replaces them by this rank's slice (E/ep experts, F/etp columns) and sets `shard`."""

    def __init__(self, num_experts: int, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(num_experts, hidden, dim))  # gate
        self.w2 = nn.Parameter(torch.empty(num_experts, dim, hidden))  # down
        self.w3 = nn.Parameter(torch.empty(num_experts, hidden, dim))  # up
        self.act: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = swiglu
        self.shard: ExpertShard | None = None
        self.path = ""  # "grouped_mm" or "loop": what the last forward ran
        self.allow_grouped_mm = True  # False forces the loop (a test compares the two)

    def forward(self, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """x (T, H) sorted by local expert, counts[e] rows each -> (T, H). Weights are cast to the tokens' dtype
        (bf16 compute where FSDP's mixed precision does not manage them)."""
        w1, w2, w3 = (w.to(x.dtype) for w in (self.w1, self.w2, self.w3))
        if self.allow_grouped_mm and x.shape[0] and grouped_mm_supported(x, w1.shape[1], w1.shape[2]):
            self.path = "grouped_mm"
            offs = torch.tensor(counts, device=x.device).cumsum(0).to(torch.int32)
            mm = lambda a, w: torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)  # noqa: E731
            return mm(self.act(mm(x, w1), mm(x, w3)), w2)
        self.path = "loop"
        return _mm_loop(self.act(_mm_loop(x, w1, counts), _mm_loop(x, w3, counts)), w2, counts)


class ExpertShard:
    """Which slice of the stacked expert weights a rank holds: experts [ep_rank*E/ep, ...) and, of each, the FFN
    columns [etp_rank*F/etp, ...). Used to initialise the slice from the full seeded tensor (bench_model.weights)."""

    def __init__(self, ep_rank: int, ep: int, etp_rank: int, etp: int, full_shapes: dict[str, tuple[int, ...]]):
        self.ep_rank, self.ep, self.etp_rank, self.etp = ep_rank, ep, etp_rank, etp
        self.full_shapes = full_shapes

    def take(self, leaf: str, full: torch.Tensor) -> torch.Tensor:
        ffn_dim = 2 if leaf == "w2" else 1
        return full.chunk(self.ep, dim=0)[self.ep_rank].chunk(self.etp, dim=ffn_dim)[self.etp_rank]


def balanced_topk(num_tokens: int, k: int, num_experts: int, device: torch.device) -> torch.Tensor:
    """Forced even routing: slot j of token t goes to expert (t*k + j) mod E, so every expert gets N*k/E copies
    (train.moe_routing=balanced; NVIDIA's MoE benchmarks run "force-balanced, no token drop")."""
    return (torch.arange(num_tokens * k, device=device) % num_experts).view(num_tokens, k)


def expert_counts(topi: torch.Tensor, num_experts: int, balanced: bool) -> list[int]:
    """Copies routed to each expert. Balanced routing's counts are known without reading the indices (so the
    memory probe's fake tensors have them); learned routing reads them (one device sync)."""
    if balanced:
        n, r = divmod(topi.numel(), num_experts)
        return [n + (1 if e < r else 0) for e in range(num_experts)]
    return torch.bincount(topi.reshape(-1), minlength=num_experts).tolist()


def local_dispatch(x: torch.Tensor, topi: torch.Tensor, experts: GroupedExperts, balanced: bool) -> torch.Tensor:
    """All experts on this device: x (N, H), topi (N, k) -> expert outputs (N*k, H) in slot order (t*k + j)."""
    k = topi.shape[1]
    order = torch.argsort(topi.reshape(-1), stable=True)
    # index_select, not x[order // k]: its backward is one index_add_ (CPU: 3.5 vs 5.6 ms fwd+bwd at 2,048 tokens,
    # k 8, h 256; benchmarks/moe_block_profile.py)
    ys = experts(x.index_select(0, order // k), expert_counts(topi, experts.w1.shape[0], balanced))
    return torch.empty_like(ys).index_copy_(0, order, ys)


class _AddAuxGrad(torch.autograd.Function):
    """Identity on `out`; backward feeds d(aux)/d(aux) = scale into the auxiliary loss's graph."""

    @staticmethod
    def forward(ctx, out: torch.Tensor, aux: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale, ctx.aux_shape = scale, aux.shape
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, torch.full(ctx.aux_shape, ctx.scale, dtype=torch.float32, device=grad.device), None


class MoE(nn.Module):
    def __init__(self, spec: ModelSpec, seq_len: int):
        super().__init__()
        h, e = spec.hidden_size, spec.num_experts
        self.num_experts, self.topk, self.kind = e, spec.moe_router_topk, spec.moe_router
        self.norm_topk, self.aux_coeff = spec.moe_norm_topk, spec.moe_aux_loss_coeff
        self.gate = nn.Linear(h, e, bias=False)
        if self.kind == "sigmoid":
            self.expert_bias = nn.Parameter(torch.zeros(e), requires_grad=False)
        self.experts = GroupedExperts(e, h, spec.moe_ffn_hidden_size)
        fs = spec.moe_shared_expert_ffn_hidden_size
        self.shared_w1 = nn.Linear(h, fs, bias=False) if fs else None
        self.shared_w2 = nn.Linear(fs, h, bias=False) if fs else None
        self.shared_w3 = nn.Linear(h, fs, bias=False) if fs else None
        self.act: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = swiglu
        self.balanced = False  # train.moe_routing=balanced (set by the trainer)
        self.seq_len = seq_len  # the full sequence length S of the aux loss
        self.aux_scale = 1.0
        # Set from outside by parallelisation: `dispatch` (expert parallelism), `count_sync` (sums a sequence's
        # expert counts over its CP/SP ranks), `grad_sync` (sums the replicated router/shared-expert weights'
        # gradients over the tp ranks that hold different tokens under SP).
        self.dispatch = local_dispatch
        self.count_sync: Callable[[torch.Tensor], torch.Tensor] = _identity
        self.grad_sync: Callable[[torch.Tensor], torch.Tensor] = _identity

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x (N, H) -> scores (N, E) fp32, chosen experts (N, k), their weights (N, k)."""
        logits = F.linear(x, self.grad_sync(self.gate.weight)).float()
        scores = logits.softmax(-1) if self.kind == "softmax" else logits.sigmoid()
        if self.balanced:
            topi = balanced_topk(x.shape[0], self.topk, self.num_experts, x.device)
        elif self.kind == "sigmoid":  # the bias chooses, the raw score weighs (DeepSeek-V3 Eq. 16)
            topi = (scores + self.expert_bias.float()).topk(self.topk, dim=-1).indices
        else:
            topi = scores.topk(self.topk, dim=-1).indices
        topv = scores.gather(-1, topi)
        if self.norm_topk:
            topv = topv / topv.sum(-1, keepdim=True)
        return scores, topi, topv

    def aux_loss(self, scores: torch.Tensor, topi: torch.Tensor, b: int) -> torch.Tensor:
        """Sequence-wise balance loss summed over this rank's part of the b sequences, averaged over sequences."""
        e, k, s = self.num_experts, self.topk, self.seq_len
        idx = topi.reshape(b, -1)  # scatter_add, not one_hot: no data-dependent checks (the probe's fake tensors)
        counts = torch.zeros(b, e, device=idx.device).scatter_add_(1, idx, torch.ones(idx.shape, device=idx.device))
        f = self.count_sync(counts) * (e / (k * s))
        p = (scores / scores.sum(-1, keepdim=True)).view(b, -1, e).sum(1) / s  # (B, E) this rank's share of P_e
        return self.aux_coeff * (f * p).sum() / b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape  # (B, S_local, H): under CP/SP this rank's tokens
        flat = x.reshape(-1, h)
        scores, topi, topv = self.route(flat)
        ys = self.dispatch(flat, topi, self.experts, self.balanced)  # (N*k, H)
        # the weighted sum over the k slots as one batched (1, k) x (k, H) GEMM per token (deterministic, no
        # (N, k, H) product): unpermute + combine 9.3 vs 16.8 ms fwd+bwd on CPU (benchmarks/moe_block_profile.py)
        out = torch.bmm(topv.unsqueeze(1).to(ys.dtype), ys.view(-1, self.topk, h)).squeeze(1)
        if self.shared_w1 is not None:
            w1, w2, w3 = (self.grad_sync(m.weight) for m in (self.shared_w1, self.shared_w2, self.shared_w3))
            out = out + F.linear(self.act(F.linear(flat, w1), F.linear(flat, w3)), w2)
        out = out.view(b, s, h).to(x.dtype)
        if self.aux_coeff > 0 and self.training and torch.is_grad_enabled():
            out = _AddAuxGrad.apply(out, self.aux_loss(scores, topi, b), self.aux_scale)
        return out
